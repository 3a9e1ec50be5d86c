import { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { serviceError } from '../errors.js';
import type { CatalogModel } from '../models/catalog.js';
import { parseModelRef, resolveModelRef } from '../models/refs.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { ProviderAdapter, TranscriptionResult } from '../providers/types.js';
import { callUpstream } from './upstream-call.js';

/**
 * POST /v1/audio/transcriptions, up to the provider call. The provider is always asked for its
 * detailed form, so the call is billed by the audio's real duration (a price per minute); the
 * caller's own response_format is rendered from it.
 */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024;
/** Reserved before the duration is known: the longest audio 25 MB can hold at 8 kbit/s. */
const MAX_RESERVED_MINUTES = Math.ceil(MAX_AUDIO_BYTES / 1000 / 60);

export const transcriptionFields = z.object({
  model: z.string().optional(),
  response_format: z.enum(['json', 'text', 'srt', 'verbose_json', 'vtt']).default('json'),
  language: z.string().max(16).optional(),
  prompt: z.string().max(4_000).optional(),
  temperature: z.string().optional(),
});

export interface TranscriptionPlan {
  model: CatalogModel;
  adapter: ProviderAdapter;
  format: 'json' | 'text' | 'srt' | 'verbose_json' | 'vtt';
  language?: string;
  prompt?: string;
  maxCostMicros: number;
}

/** Plans a transcription from its form fields, parsed with transcriptionFields (the route builder does). */
export async function planTranscription(fields: z.output<typeof transcriptionFields>, hasFile: boolean, providers: ProviderRegistry): Promise<TranscriptionPlan> {
  if (!fields.model) throw serviceError('missing_model', { param: 'model' });
  if (!hasFile) throw serviceError('missing_file', { param: 'file' });
  const { model } = await resolveModelRef(parseModelRef(fields.model), { slot: async () => undefined, dynamic: async () => undefined });
  if (model.kind !== 'speech_to_text') throw serviceError('invalid_request', { param: 'model', message: `${model.id} is not a speech-to-text model.` });
  const adapter = providers.adapter(model.provider);
  if (!adapter?.transcribe) throw serviceError('platform_not_configured', { message: `No upstream credentials are configured for ${model.provider} (needed by ${model.model}).` });
  return {
    model,
    adapter,
    format: fields.response_format,
    ...(fields.language && { language: fields.language }),
    ...(fields.prompt && { prompt: fields.prompt }),
    maxCostMicros: MAX_RESERVED_MINUTES * model.inputMicrosPer1M,
  };
}

/** Billed per started second of a price per minute. */
export function transcriptionCost(model: CatalogModel, durationSeconds: number): number {
  return Math.ceil((Math.ceil(durationSeconds) * model.inputMicrosPer1M) / 60);
}

/** The caller's response_format, rendered from the detailed transcript. */
export function renderTranscript(result: TranscriptionResult, format: TranscriptionPlan['format']): { contentType: string; body: string | object } {
  const cues = result.segments.length > 0 ? result.segments : [{ start: 0, end: result.durationSeconds, text: result.text }];
  const stamp = (seconds: number, separator: string) => {
    const ms = Math.round(seconds * 1000);
    const pad = (value: number, width = 2) => String(value).padStart(width, '0');
    return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${pad(ms % 1000, 3)}`;
  };
  switch (format) {
    case 'json':
      return { contentType: 'application/json', body: { text: result.text } };
    case 'verbose_json':
      return { contentType: 'application/json', body: { task: 'transcribe', language: result.language ?? null, duration: result.durationSeconds, text: result.text, segments: result.segments } };
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: result.text };
    case 'srt':
      return { contentType: 'text/plain; charset=utf-8', body: cues.map((cue, i) => `${i + 1}\n${stamp(cue.start, ',')} --> ${stamp(cue.end, ',')}\n${cue.text.trim()}\n`).join('\n') };
    case 'vtt':
      return { contentType: 'text/vtt; charset=utf-8', body: `WEBVTT\n\n${cues.map((cue) => `${stamp(cue.start, '.')} --> ${stamp(cue.end, '.')}\n${cue.text.trim()}\n`).join('\n')}` };
  }
}

export interface AudioUpload {
  buffer: Buffer;
  filename: string;
  mimeType: string;
}

/**
 * One transcription, reserved at the longest audio the upload could hold and billed by the
 * audio's real duration; answers the caller's response_format.
 */
export async function transcribe(platform: Pick<GatewayServices, 'db' | 'config' | 'limiter' | 'meteringTimings' | 'grants'>, call: MeteredCall, plan: TranscriptionPlan, audio: AudioUpload, signal: AbortSignal) {
  const settled = await callUpstream(platform, call, {
    surface: 'media',
    reserveMicros: plan.maxCostMicros,
    signal,
    attempt: () =>
      plan.adapter.transcribe!({
        model: plan.model,
        upstreamModel: plan.model.model,
        audio: audio.buffer,
        filename: audio.filename,
        mimeType: audio.mimeType,
        ...(plan.language && { language: plan.language }),
        ...(plan.prompt && { prompt: plan.prompt }),
        signal,
      }),
    meter: (result) => ({ model: plan.model.id, costMicros: transcriptionCost(plan.model, result.durationSeconds), tokensIn: 0, tokensOut: 0 }),
  });
  return { ...renderTranscript(settled.result, plan.format), deductedMicros: settled.deductedMicros, balanceAfterMicros: settled.balanceAfterMicros };
}
