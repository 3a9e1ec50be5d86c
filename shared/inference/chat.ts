import { z } from 'zod';
import { serviceError } from '../errors.js';
import { parseWith } from '../validation.js';
import { compileSchema } from './json-schema.js';
import { newId } from '../ids.js';
import type { CatalogModel } from '../models/catalog.js';
import { estimateDifficulty, type RequestShape } from '../models/dynamic-profiles.js';
import { parseModelField, resolveModelRef, type Resolution, type ResolutionContext } from '../models/refs.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { InlineModeration } from './moderations.js';
import { estimatePromptTokens } from './pricing.js';
import type { ChatMessage, ChatRequest, ChatResult, ChatStreamEvent, ProviderAdapter } from '../providers/types.js';

/**
 * Chat completions, up to the provider call: the request as the OpenAI wire format states it,
 * validated before any model is called (so nothing invalid is billed), references resolved to
 * catalog models, each model to the adapter that serves it, and the call retried on retryable
 * failures within a deadline.
 */
const MAX_MESSAGES_BYTES = 100_000;

export const chatMessage = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: z.union([z.string(), z.array(z.record(z.string(), z.unknown())), z.null()]).optional(),
  name: z.string().optional(),
  tool_calls: z.array(z.object({ id: z.string(), type: z.literal('function'), function: z.object({ name: z.string(), arguments: z.string() }) })).optional(),
  tool_call_id: z.string().optional(),
  cache_control: z.object({ type: z.literal('ephemeral'), ttl: z.enum(['5m', '1h']).optional() }).optional(),
});

export const chatCompletionBody = z.object({
  model: z.unknown().optional(),
  messages: z.unknown().optional(),
  stream: z.boolean().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).optional(),
  max_tokens: z.int32().positive().optional(),
  max_completion_tokens: z.int32().positive().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
  tools: z.array(z.object({ type: z.literal('function'), function: z.object({ name: z.string(), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }) })).optional(),
  tool_choice: z.unknown().optional(),
  response_format: z.union([z.object({ type: z.literal('text') }), z.object({ type: z.literal('json_object') }), z.object({ type: z.literal('json_schema'), json_schema: z.object({ name: z.string(), schema: z.record(z.string(), z.unknown()), strict: z.boolean().optional() }) })]).optional(),
  prompt_cache: z.literal('auto').optional(),
  moderation: z.enum(['none', 'pre', 'post', 'pre_and_post']).optional(),
  user: z.string().optional(),
});

export interface ChatInput {
  plan: ReturnType<typeof parseModelField>;
  messages: ChatMessage[];
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | undefined;
  /** Inline moderation (default none); only `pre` combines with a stream. */
  moderation?: InlineModeration;
  options: Pick<ChatRequest, 'temperature' | 'topP' | 'stop' | 'tools' | 'toolChoice' | 'responseFormat' | 'promptCache'>;
}

export function parseChatInput(raw: unknown, headers: { idempotencyKey: string | undefined }): ChatInput {
  // JSON that parsed but is not an object (an array, a string, a number) cannot be a request.
  if (raw !== undefined && (raw === null || typeof raw !== 'object' || Array.isArray(raw))) throw serviceError('malformed_json');
  const input = parseWith(chatCompletionBody, raw ?? {});
  const plan = parseModelField(input.model);
  if (!Array.isArray(input.messages) || input.messages.length === 0) throw serviceError('missing_messages', { param: 'messages' });
  const messages = input.messages.map((entry, i) => parseWith(chatMessage, entry, ['messages', i]) as ChatMessage);
  // Sizes and counts before capabilities. Media parts have their own limits, so the 100,000-byte
  // limit of the serialized messages counts them without their base64 payloads.
  messages.forEach(checkPartLimits);
  if (Buffer.byteLength(JSON.stringify(messages, withoutPayloads)) > MAX_MESSAGES_BYTES) throw serviceError('messages_too_large', { param: 'messages' });
  if (input.response_format?.type === 'json_schema') compileSchema(input.response_format.json_schema.schema);
  const stream = input.stream === true;
  // A streamed completion reaches the caller as it is generated, so it cannot be held back for a
  // check of the whole text: post moderation needs a non-streaming call.
  if (stream && (input.moderation === 'post' || input.moderation === 'pre_and_post')) {
    throw serviceError('invalid_request', { param: 'moderation', message: `moderation: ${input.moderation} needs stream: false (a stream cannot be moderated after it was sent); use moderation: pre with streams.` });
  }
  if (plan.cascade && stream) {
    throw serviceError(input.response_format?.type === 'json_schema' ? 'streaming_with_schema_fallback_unsupported' : 'fallback_with_stream_unsupported', { param: 'model' });
  }
  if (plan.cascade && headers.idempotencyKey) throw serviceError('fallback_with_idempotency_unsupported', { param: 'model' });
  return {
    plan,
    messages,
    stream,
    includeUsage: input.stream_options?.include_usage === true,
    maxTokens: input.max_completion_tokens ?? input.max_tokens,
    moderation: input.moderation ?? 'none',
    options: {
      ...(input.temperature !== undefined && { temperature: input.temperature }),
      ...(input.top_p !== undefined && { topP: input.top_p }),
      ...(input.stop !== undefined && { stop: [input.stop].flat() }),
      ...(input.tools && { tools: input.tools as ChatRequest['tools'] }),
      ...(input.tool_choice !== undefined && { toolChoice: input.tool_choice }),
      ...(input.response_format && { responseFormat: input.response_format as ChatRequest['responseFormat'] }),
      ...(input.prompt_cache && { promptCache: input.prompt_cache }),
    },
  };
}

/** One entry of the call plan: a resolved model and the adapter that serves it. */
export interface ChatTarget {
  resolution: Resolution;
  adapter: ProviderAdapter;
  /** The id the provider expects: the model itself, or its cloud-native id on a hyperscaler route. */
  upstreamModel: string;
}

/** Resolves every reference and checks it can serve this chat before anything is called or billed. */
export async function planChat(input: ChatInput, context: ResolutionContext, providers: ProviderRegistry): Promise<ChatTarget[]> {
  const targets: ChatTarget[] = [];
  // Only a dyn: profile, reached directly or through a slot, reads the request's shape; svc: and
  // match: references never do, and the shape reads the whole prompt (~33 µs for 30 KB).
  const shape = input.plan.refs.some((ref) => ref.kind === 'dyn' || ref.kind === 'slot') ? requestShapeOf(input) : undefined;
  for (const ref of input.plan.refs) {
    const resolution = await resolveModelRef(ref, context, shape);
    const { model, region } = resolution;
    if (model.kind !== 'chat') throw serviceError('invalid_model_for_chat', { param: 'model', message: `${model.id} is a ${model.kind.replace(/_/g, '-')} model, not a chat model.` });
    checkContentParts(model, input.messages);
    const route = region === 'eu-cloud1' || region === 'us-cloud1' ? 'bedrock' : region === 'eu-cloud2' || region === 'us-cloud2' ? 'vertex' : model.provider;
    const adapter = providers.adapter(route);
    if (!adapter?.chat || !adapter.chatStream) throw serviceError('platform_not_configured', { message: `No upstream credentials are configured for ${route} (needed by ${model.id}).` });
    // A region moves a model onto a hyperscaler under its cloud-native id; a model of that hyperscaler's own keeps its id.
    const upstreamModel = route === model.provider ? model.model : route === 'bedrock' ? model.cloudIds!.cloud1 : model.cloudIds!.cloud2;
    targets.push({ resolution, adapter, upstreamModel });
  }
  return targets;
}

/** What a dyn: profile chooses by: the prompt's size, tools, images, json_schema and a difficulty estimate. */
export function requestShapeOf(input: ChatInput): RequestShape {
  const promptTokens = estimatePromptTokens(input.messages);
  const textOf = (message: ChatMessage) =>
    typeof message.content === 'string' ? message.content : (message.content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('\n');
  const lastUser = [...input.messages].reverse().find((message) => message.role === 'user');
  return {
    promptTokens,
    tools: (input.options.tools?.length ?? 0) > 0,
    vision: input.messages.some((message) => Array.isArray(message.content) && message.content.some((part) => part.type === 'image_url')),
    jsonSchema: input.options.responseFormat?.type === 'json_schema',
    difficulty: estimateDifficulty({ last: lastUser ? textOf(lastUser) : '', all: input.messages.map(textOf).join('\n'), turns: input.messages.length, promptTokens }),
  };
}

/** JSON.stringify replacer that leaves out media payloads (data URLs and base64 audio). */
function withoutPayloads(key: string, value: unknown): unknown {
  if ((key === 'url' || key === 'file_data') && typeof value === 'string' && value.startsWith('data:')) return '';
  if (key === 'data' && typeof value === 'string') return '';
  return value;
}

const MB = 1024 * 1024;
export const PART_LIMITS = { imagesPerMessage: 2, documentsPerMessage: 2, imageBytes: 20 * MB, documentBytes: 20 * MB, audioBytes: 25 * MB };

/** Bytes a base64 payload decodes to, without decoding it. */
const decodedBytes = (base64: string) => Math.floor((base64.length * 3) / 4) - (base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0);

function dataUrlPayload(url: string): { mediaType: string; base64: string } | undefined {
  const match = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1]!, base64: match[2]! } : undefined;
}

/**
 * Spec 1's content limits, checked before capabilities: two images and two PDF documents per
 * message, 20 MB each decoded, audio 25 MB decoded. Images are data URLs or https URLs (passed
 * through unmeasured); documents are PDF data only. File references (svc_file:<id>, file_id) are
 * counted here and checked when resolved (file-parts.ts).
 */
function checkPartLimits(message: ChatMessage, index: number): void {
  if (!Array.isArray(message.content)) return;
  const param = `messages.${index}.content`;
  let images = 0;
  let documents = 0;
  for (const part of message.content as Array<Record<string, unknown>>) {
    switch (part.type) {
      case 'text':
        if (typeof part.text !== 'string') throw serviceError('invalid_content_part', { param, message: 'A text part needs a text string.' });
        break;
      case 'image_url': {
        const url = (part.image_url as { url?: unknown } | undefined)?.url;
        if (typeof url !== 'string') throw serviceError('invalid_content_part', { param, message: 'An image_url part needs image_url.url.' });
        if (++images > PART_LIMITS.imagesPerMessage) throw serviceError('content_part_limit_exceeded', { param });
        // A file reference is checked (owner, size, kind) when it is resolved: see file-parts.ts.
        if (url.startsWith('svc_file:')) break;
        const payload = dataUrlPayload(url);
        if (payload) {
          if (!payload.mediaType.startsWith('image/')) throw serviceError('invalid_content_part', { param, message: `An image part cannot carry ${payload.mediaType}.` });
          if (decodedBytes(payload.base64) > PART_LIMITS.imageBytes) throw serviceError('content_part_too_large', { param });
        } else if (!url.startsWith('https://')) throw serviceError('invalid_content_part', { param, message: 'An image is a base64 data URL or an https URL.' });
        break;
      }
      case 'file': {
        const file = (part.file ?? {}) as { file_data?: unknown; file_id?: unknown };
        if (typeof file.file_id === 'string') {
          if (++documents > PART_LIMITS.documentsPerMessage) throw serviceError('content_part_limit_exceeded', { param });
          break;
        }
        if (typeof file.file_data !== 'string') throw serviceError('invalid_content_part', { param, message: 'A file part needs file_data (a PDF data URL) or file_id (an uploaded file).' });
        const payload = dataUrlPayload(file.file_data);
        if (!payload || payload.mediaType !== 'application/pdf') throw serviceError('invalid_content_part', { param, message: 'Document parts must be application/pdf data.' });
        if (++documents > PART_LIMITS.documentsPerMessage) throw serviceError('content_part_limit_exceeded', { param });
        if (decodedBytes(payload.base64) > PART_LIMITS.documentBytes) throw serviceError('content_part_too_large', { param });
        break;
      }
      case 'input_audio': {
        const data = (part.input_audio as { data?: unknown } | undefined)?.data;
        if (typeof data !== 'string') throw serviceError('invalid_content_part', { param, message: 'An input_audio part needs base64 data.' });
        if (decodedBytes(data) > PART_LIMITS.audioBytes) throw serviceError('content_part_too_large', { param });
        break;
      }
      default:
        throw serviceError('invalid_content_part', { param, message: `Unsupported content part type: ${String(part.type)}.` });
    }
  }
}

function checkContentParts(model: CatalogModel, messages: ChatMessage[]): void {
  for (const [i, entry] of messages.entries()) {
    if (!Array.isArray(entry.content)) continue;
    for (const part of entry.content) {
      const unsupported =
        (part.type === 'image_url' && !model.capabilities.vision) ||
        (part.type === 'input_audio' && !model.capabilities.audio_input) ||
        (part.type === 'file' && !model.capabilities.pdf);
      if (unsupported) throw serviceError('content_parts_unsupported_by_model', { param: `messages.${i}.content`, message: `${model.id} cannot take ${part.type} parts.` });
    }
  }
}

export function chatRequestFor(target: ChatTarget, input: ChatInput, signal: AbortSignal): ChatRequest {
  return {
    model: target.resolution.model,
    upstreamModel: target.upstreamModel,
    region: target.resolution.region,
    messages: input.messages,
    maxTokens: input.maxTokens,
    ...input.options,
    signal,
  };
}

export function completionObject(id: string, created: number, modelId: string, result: ChatResult) {
  return {
    id,
    object: 'chat.completion' as const,
    created,
    model: modelId,
    choices: [
      {
        index: 0,
        message: { role: 'assistant' as const, content: result.content, ...(result.toolCalls?.length && { tool_calls: result.toolCalls }), refusal: null },
        logprobs: null,
        finish_reason: result.finishReason,
      },
    ],
    usage: {
      prompt_tokens: result.usage.inputTokens,
      completion_tokens: result.usage.outputTokens,
      total_tokens: result.usage.inputTokens + result.usage.outputTokens,
      ...(result.usage.cacheReadTokens !== undefined && { prompt_tokens_details: { cached_tokens: result.usage.cacheReadTokens } }),
    },
  };
}

export const newCompletionId = () => newId('chatcmpl-');

export type { ChatStreamEvent };
