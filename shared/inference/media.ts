import { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { serviceError } from '../errors.js';
import type { CatalogModel, ModelKind } from '../models/catalog.js';
import { parseModelRef, resolveModelRef, type ResolutionContext } from '../models/refs.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { ProviderAdapter } from '../providers/types.js';
import { callUpstream } from './upstream-call.js';

/**
 * Media calls (images, speech), up to the provider call. Media models are svc: references too;
 * a reference to another kind of model is refused before anything is called or billed.
 */
const NO_DEFINITIONS: ResolutionContext = { slot: async () => undefined, dynamic: async () => undefined };

async function mediaModel(ref: unknown, kind: ModelKind, providers: ProviderRegistry, capability: 'generateImages' | 'speak'): Promise<{ model: CatalogModel; adapter: ProviderAdapter }> {
  if (typeof ref !== 'string' || ref === '') throw serviceError('missing_model', { param: 'model' });
  const { model } = await resolveModelRef(parseModelRef(ref), NO_DEFINITIONS);
  if (model.kind !== kind) throw serviceError('invalid_request', { param: 'model', message: `${model.id} is not a ${kind.replace(/_/g, '-')} model.` });
  const adapter = providers.adapter(model.provider);
  if (!adapter?.[capability]) throw serviceError('platform_not_configured', { message: `No upstream credentials are configured for ${model.provider} (needed by ${model.model}).` });
  return { model, adapter };
}

export const imageBody = z.object({
  model: z.unknown().optional(),
  prompt: z.string().min(1).max(32_000),
  n: z.number().int().min(1).max(4).default(1),
  size: z.string().max(32).optional(),
  response_format: z.literal('b64_json', { error: 'only b64_json is offered' }).optional(),
  user: z.string().optional(),
});

/** Plans a request parsed by imageBody. */
export async function planImages(body: z.output<typeof imageBody>, providers: ProviderRegistry) {
  const { model, adapter } = await mediaModel(body.model, 'image', providers, 'generateImages');
  return { model, adapter, prompt: body.prompt, n: body.n, size: body.size, costMicros: body.n * model.inputMicrosPer1M };
}

export const SPEECH_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;

export const speechBody = z.object({
  model: z.unknown().optional(),
  input: z.string().min(1).max(4_096),
  voice: z.string().min(1).max(64),
  response_format: z.enum(SPEECH_FORMATS).default('mp3'),
  speed: z.number().min(0.25).max(4).optional(),
});

/** Plans a request parsed by speechBody. */
export async function planSpeech(body: z.output<typeof speechBody>, providers: ProviderRegistry) {
  const { model, adapter } = await mediaModel(body.model, 'text_to_speech', providers, 'speak');
  // Priced per million characters spoken.
  return { model, adapter, input: body.input, voice: body.voice, format: body.response_format, costMicros: Math.ceil((body.input.length * model.inputMicrosPer1M) / 1_000_000) };
}

type MeteringServices = Pick<GatewayServices, 'db' | 'config' | 'limiter' | 'meteringTimings' | 'grants'>;
export type ImagesPlan = Awaited<ReturnType<typeof planImages>>;
export type SpeechPlan = Awaited<ReturnType<typeof planSpeech>>;

/** Image generation, billed per image the provider returned; the OpenAI images wire shape. */
export async function generateImages(platform: MeteringServices, call: MeteredCall, plan: ImagesPlan, signal: AbortSignal) {
  const settled = await callUpstream(platform, call, {
    surface: 'media',
    reserveMicros: plan.costMicros,
    signal,
    attempt: () => plan.adapter.generateImages!({ model: plan.model, upstreamModel: plan.model.model, prompt: plan.prompt, n: plan.n, ...(plan.size && { size: plan.size }), signal }),
    meter: (result) => ({ model: plan.model.id, costMicros: result.images.length * plan.model.inputMicrosPer1M, tokensIn: 0, tokensOut: 0 }),
  });
  return {
    body: { created: Math.floor(Date.now() / 1000), data: settled.result.images.map((image) => ({ b64_json: image.b64Json, ...(image.revisedPrompt && { revised_prompt: image.revisedPrompt }) })) },
    deductedMicros: settled.deductedMicros,
    balanceAfterMicros: settled.balanceAfterMicros,
  };
}

/** Text to speech, billed per character spoken; answers the audio bytes and their content type. */
export async function speak(platform: MeteringServices, call: MeteredCall, plan: SpeechPlan, signal: AbortSignal) {
  const settled = await callUpstream(platform, call, {
    surface: 'media',
    reserveMicros: plan.costMicros,
    signal,
    attempt: () => plan.adapter.speak!({ model: plan.model, upstreamModel: plan.model.model, input: plan.input, voice: plan.voice, format: plan.format, signal }),
    meter: () => ({ model: plan.model.id, costMicros: plan.costMicros, tokensIn: 0, tokensOut: 0 }),
  });
  return { audio: settled.result.audio, contentType: settled.result.contentType, deductedMicros: settled.deductedMicros, balanceAfterMicros: settled.balanceAfterMicros };
}
