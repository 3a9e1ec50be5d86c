import { parseDataUrl, parseEventJson, readJson, upstreamEvents, upstreamFetch, type UpstreamResponse } from './http.js';
import type { KeyProviderSettings } from './settings.js';
import {
  STREAM_OPENED,
  UpstreamError,
  type ChatMessage,
  type ChatRequest,
  type ChatResult,
  type ChatStreamEvent,
  type ContentPart,
  type FinishReason,
  type ProviderAdapter,
  type ToolCall,
  type Usage,
} from './types.js';

/**
 * Anthropic's Messages API (POST /v1/messages), as a gateway-side client. The mapping (request
 * body, result, stream events) is exported for Claude on Vertex AI (vertex.ts), which sends the
 * same body to another URL.
 *
 * Mapping decisions:
 * - system and developer messages become top-level `system` text blocks; consecutive messages of
 *   one role are merged into one turn (Anthropic wants all tool results of a turn in one user message).
 * - `json_schema` / `json_object` response formats have no native equivalent on every Claude model,
 *   so they become one forced tool (`json_response`) whose input is the answer; its input comes
 *   back as the text content (finish `stop`), never as a tool call.
 * - `max_tokens`, which Anthropic requires, is the caller's, else the model's catalog limit, else 4096.
 * - `temperature` is passed through unchanged: Anthropic's range is 0..1, and a value above it is
 *   Anthropic's 400 to the caller rather than a silent change of meaning.
 * - Usage: `inputTokens` is the TOTAL prompt (input_tokens + cache_creation_input_tokens +
 *   cache_read_input_tokens), as the other providers report it; the cache parts are also given
 *   separately as cacheWriteTokens / cacheReadTokens so billing can price them differently.
 */

const PROVIDER = 'anthropic';
const API_VERSION = '2023-06-01';
const JSON_TOOL = 'json_response';
const DEFAULT_MAX_TOKENS = 4096;
const MAX_CACHE_BREAKPOINTS = 4;

type CacheControl = { type: 'ephemeral'; ttl?: '5m' | '1h' };
type Block = Record<string, unknown> & { type: string; cache_control?: CacheControl };
interface WireMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

interface WireUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

/** A Messages API response: what `anthropicChatResult` reads. */
export interface AnthropicMessage {
  content: Array<{ type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown } | { type: string }>;
  stop_reason: string | null;
  usage: WireUsage;
}

export function createAnthropicAdapter(settings: KeyProviderSettings): ProviderAdapter {
  const post = (body: Record<string, unknown>, signal: AbortSignal) =>
    upstreamFetch(PROVIDER, `${settings.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': settings.apiKey, 'anthropic-version': API_VERSION, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await post({ model: request.upstreamModel, ...anthropicMessagesBody(PROVIDER, request) }, request.signal);
      const body = await readJson<AnthropicMessage>(PROVIDER, response, request.signal);
      return anthropicChatResult(body, wantsJsonAnswer(request));
    },

    async *chatStream(request) {
      const response = await post({ model: request.upstreamModel, ...anthropicMessagesBody(PROVIDER, request), stream: true }, request.signal);
      yield* anthropicStreamEvents(PROVIDER, response, request.signal, wantsJsonAnswer(request));
    },
  };
}

/** Whether the answer must be JSON (sent as the forced `json_response` tool): pass it to the result and stream mappings. */
export const wantsJsonAnswer = (request: ChatRequest) => request.responseFormat?.type === 'json_schema' || request.responseFormat?.type === 'json_object';


/**
 * The Messages body for a request, without `model` (Anthropic's own API names the model in the
 * body, Vertex in the URL). `provider` names who answers, in the errors of a request that cannot be mapped.
 */
export function anthropicMessagesBody(provider: string, request: ChatRequest): Record<string, unknown> {
  const system: Block[] = [];
  const messages: WireMessage[] = [];
  const push = (role: WireMessage['role'], blocks: Block[]) => {
    if (blocks.length === 0) return;
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  };

  for (const [position, message] of request.messages.entries()) {
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(...withCacheControl(textBlocks(provider, message, position), message.cache_control));
        break;
      case 'user':
        push('user', withCacheControl(contentBlocks(provider, message, position), message.cache_control));
        break;
      case 'assistant':
        push('assistant', withCacheControl([...contentBlocks(provider, message, position), ...(message.tool_calls ?? []).map((call) => toolUseBlock(provider, call, position))], message.cache_control));
        break;
      case 'tool':
        push('user', withCacheControl([{ type: 'tool_result', tool_use_id: message.tool_call_id ?? '', content: textOf(message.content) }], message.cache_control));
        break;
    }
  }

  // prompt_cache auto: one breakpoint at the end of the prompt, so the next turn of the same
  // conversation reads everything before it from the cache.
  if (request.promptCache === 'auto') {
    const last = messages.at(-1)?.content.at(-1) ?? system.at(-1);
    // Anthropic allows four breakpoints; the caller's own ones win over the automatic one.
    const breakpoints = [...system, ...messages.flatMap((message) => message.content)].filter((block) => block.cache_control).length;
    if (last && !last.cache_control && breakpoints < MAX_CACHE_BREAKPOINTS) last.cache_control = { type: 'ephemeral' };
  }

  const tools: Record<string, unknown>[] = (request.tools ?? []).map((tool) => ({
    name: tool.function.name,
    ...(tool.function.description !== undefined && { description: tool.function.description }),
    input_schema: tool.function.parameters ?? { type: 'object', properties: {} },
  }));
  let toolChoice = tools.length > 0 ? toolChoiceOf(provider, request.toolChoice) : undefined;
  if (wantsJsonAnswer(request)) {
    const schema = request.responseFormat?.type === 'json_schema' ? request.responseFormat.json_schema.schema : { type: 'object' };
    tools.push({ name: JSON_TOOL, description: 'Respond with a JSON value that matches this schema.', input_schema: schema });
    // With the caller's own tools present the model may still call one of them; otherwise the answer must be the JSON.
    if (tools.length === 1) toolChoice = { type: 'tool', name: JSON_TOOL };
  }

  return {
    max_tokens: request.maxTokens ?? request.model.maxOutputTokens ?? DEFAULT_MAX_TOKENS,
    messages,
    ...(system.length > 0 && { system }),
    ...(tools.length > 0 && { tools }),
    ...(toolChoice && { tool_choice: toolChoice }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop?.length && { stop_sequences: request.stop }),
  };
}

function toolChoiceOf(provider: string, choice: unknown): Record<string, unknown> | undefined {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto') return { type: 'auto' };
  if (choice === 'none') return { type: 'none' };
  if (choice === 'required') return { type: 'any' };
  const name = (choice as { function?: { name?: unknown } }).function?.name;
  if (typeof name === 'string') return { type: 'tool', name };
  throw invalid(provider, `tool_choice ${JSON.stringify(choice)} is not supported`);
}

/** A message's cache breakpoint goes on its last block: the prefix up to there is cached. */
function withCacheControl(blocks: Block[], cacheControl: CacheControl | undefined): Block[] {
  if (cacheControl && blocks.length > 0) blocks[blocks.length - 1] = { ...blocks.at(-1)!, cache_control: cacheControl };
  return blocks;
}

function textBlocks(provider: string, message: ChatMessage, position: number): Block[] {
  return contentBlocks(provider, message, position).filter((block) => {
    if (block.type !== 'text') throw invalid(provider, `messages[${position}]: a ${message.role} message may only contain text`);
    return true;
  });
}

/** Anthropic rejects empty text blocks, so an empty string (e.g. beside tool calls) adds none. */
function contentBlocks(provider: string, message: ChatMessage, position: number): Block[] {
  if (message.content === null) return [];
  if (typeof message.content === 'string') return message.content === '' ? [] : [{ type: 'text', text: message.content }];
  return message.content.flatMap((part) => partBlock(provider, part, position));
}

function partBlock(provider: string, part: ContentPart, position: number): Block[] {
  switch (part.type) {
    case 'text':
      return part.text === '' ? [] : [{ type: 'text', text: part.text }];
    case 'image_url': {
      const inline = parseDataUrl(part.image_url.url);
      if (inline) return [{ type: 'image', source: { type: 'base64', media_type: inline.mediaType, data: inline.data } }];
      return [{ type: 'image', source: { type: 'url', url: part.image_url.url } }];
    }
    case 'file': {
      const inline = part.file.file_data ? parseDataUrl(part.file.file_data) : undefined;
      if (inline?.mediaType === 'application/pdf') return [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: inline.data } }];
      throw invalid(provider, `messages[${position}]: only PDF files sent inline as data:application/pdf URLs are supported`);
    }
    case 'input_audio':
      throw invalid(provider, `messages[${position}]: audio input is not supported`);
  }
}

function toolUseBlock(provider: string, call: ToolCall, position: number): Block {
  let input: unknown;
  try {
    input = call.function.arguments.trim() === '' ? {} : JSON.parse(call.function.arguments);
  } catch {
    throw invalid(provider, `messages[${position}].tool_calls: arguments of ${call.id} are not valid JSON`);
  }
  return { type: 'tool_use', id: call.id, name: call.function.name, input };
}

const textOf = (content: ChatMessage['content']): string =>
  typeof content === 'string' ? content : (content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');

/** A request Anthropic could not accept as mapped: the caller's error, not retried. */
const invalid = (provider: string, message: string) => new UpstreamError(provider, 400, message, false);

export function anthropicChatResult(body: AnthropicMessage, json: boolean): ChatResult {
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  let answeredAsJson = false;
  for (const block of body.content) {
    if (block.type === 'text' && 'text' in block) texts.push(block.text);
    if (block.type === 'tool_use' && 'input' in block) {
      if (json && block.name === JSON_TOOL) {
        texts.push(JSON.stringify(block.input));
        answeredAsJson = true;
      } else {
        toolCalls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input) } });
      }
    }
  }
  const finishReason = jsonFinish(finishReasonOf(body.stop_reason), answeredAsJson && toolCalls.length === 0);
  return {
    content: texts.length > 0 ? texts.join('') : null,
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason,
    usage: usageOf(body.usage),
  };
}

/** The forced JSON tool ends with stop_reason tool_use, but to the caller it is a finished answer. */
const jsonFinish = (reason: FinishReason, answeredAsJson: boolean): FinishReason => (answeredAsJson && reason === 'tool_calls' ? 'stop' : reason);

function finishReasonOf(stopReason: string | null | undefined): FinishReason {
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

function usageOf(usage: WireUsage): Usage {
  const cacheWrite = usage.cache_creation_input_tokens ?? 0;
  const cacheRead = usage.cache_read_input_tokens ?? 0;
  return {
    inputTokens: (usage.input_tokens ?? 0) + cacheWrite + cacheRead,
    outputTokens: usage.output_tokens ?? 0,
    ...(usage.cache_read_input_tokens != null && { cacheReadTokens: cacheRead }),
    ...(usage.cache_creation_input_tokens != null && { cacheWriteTokens: cacheWrite }),
  };
}

/** Status of an `event: error` mid-stream, by Anthropic's error type, so retryability follows it. */
const STATUS_BY_ERROR_TYPE: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
};

/** A Messages SSE stream as the gateway's stream events; `provider` names who answers, in its errors. */
export async function* anthropicStreamEvents(provider: string, response: UpstreamResponse, signal: AbortSignal, json: boolean): AsyncGenerator<ChatStreamEvent> {
  let usage: WireUsage = {};
  let stopReason: string | null | undefined;
  let stopped = false;
  let answeredAsJson = false;
  /** Content-block index → tool-call index (tool calls are numbered among themselves). */
  const toolIndex = new Map<number, number>();
  const jsonBlocks = new Set<number>();
  let opened = false;

  for await (const { event, data } of upstreamEvents(provider, response, signal)) {
    const payload = parseEventJson(provider, data);
    const type = (payload.type as string | undefined) ?? event;
    if (!opened && type !== 'error') {
      opened = true;
      yield STREAM_OPENED;
    }
    switch (type) {
      case 'message_start':
        usage = { ...((payload.message as { usage?: WireUsage } | undefined)?.usage ?? {}) };
        break;
      case 'content_block_start': {
        const index = payload.index as number;
        const block = payload.content_block as { type: string; id?: string; name?: string };
        if (block.type !== 'tool_use') break;
        if (json && block.name === JSON_TOOL) {
          jsonBlocks.add(index);
          answeredAsJson = true;
          break;
        }
        toolIndex.set(index, toolIndex.size);
        yield { type: 'delta', toolCalls: [{ index: toolIndex.get(index)!, id: block.id!, name: block.name!, arguments: '' }] };
        break;
      }
      case 'content_block_delta': {
        const index = payload.index as number;
        const delta = payload.delta as { type: string; text?: string; partial_json?: string };
        if (delta.type === 'text_delta' && delta.text) yield { type: 'delta', content: delta.text };
        if (delta.type === 'input_json_delta' && delta.partial_json) {
          if (jsonBlocks.has(index)) yield { type: 'delta', content: delta.partial_json };
          else if (toolIndex.has(index)) yield { type: 'delta', toolCalls: [{ index: toolIndex.get(index)!, arguments: delta.partial_json }] };
        }
        break;
      }
      case 'message_delta': {
        stopReason = (payload.delta as { stop_reason?: string | null } | undefined)?.stop_reason ?? stopReason;
        // output_tokens here is cumulative; recent API versions repeat the input counts too.
        const update = (payload.usage ?? {}) as WireUsage;
        usage = { ...usage, ...Object.fromEntries(Object.entries(update).filter(([, value]) => value != null)) };
        break;
      }
      case 'message_stop':
        stopped = true;
        break;
      case 'error': {
        const error = (payload.error ?? {}) as { type?: string; message?: string };
        throw UpstreamError.fromStatus(provider, STATUS_BY_ERROR_TYPE[error.type ?? ''] ?? 500, error.message ?? 'stream error');
      }
    }
  }
  if (!stopped) throw new UpstreamError(provider, undefined, 'stream ended before message_stop', true);
  yield { type: 'finish', finishReason: jsonFinish(finishReasonOf(stopReason), answeredAsJson && toolIndex.size === 0) };
  yield { type: 'usage', usage: usageOf(usage) };
}
