import { parseEventJson, readJson, upstreamEvents, upstreamFetch, type UpstreamResponse } from './http.js';
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
  type RerankRequest,
  type RerankResult,
  type ToolCall,
  type Usage,
} from './types.js';

/**
 * Cohere's v2 API (POST /v2/chat, /v2/embed), as a gateway-side client.
 *
 * Mapping decisions:
 * - Messages keep their roles (developer becomes system); tool results are `tool` messages with
 *   their `tool_call_id`; top_p is Cohere's `p`, stop is `stop_sequences`.
 * - tool_choice: Cohere v2 knows only REQUIRED and NONE. `auto` sends nothing, `required` is
 *   REQUIRED, and naming one function is REQUIRED with only that function's tool sent.
 * - response_format json_schema is `{type:'json_object', json_schema}` (Cohere v2's shape).
 * - The model's `tool_plan` (its reasoning before a tool call) is not content and is dropped.
 * - Usage prefers `usage.tokens` (what the model saw) and falls back to `usage.billed_units`.
 * - Embeddings use input_type `search_document` and float vectors; `dimensions` is sent as
 *   `output_dimension`, which only Cohere's embed-v4 models accept.
 */

const PROVIDER = 'cohere';
const MAX_EMBED_TEXTS = 96;

interface WireUsage {
  tokens?: { input_tokens?: number; output_tokens?: number };
  billed_units?: { input_tokens?: number; output_tokens?: number };
}

interface WireResponse {
  finish_reason?: string;
  message?: { content?: Array<{ type: string; text?: string }>; tool_calls?: ToolCall[] };
  usage?: WireUsage;
}

export function createCohereAdapter(settings: KeyProviderSettings): ProviderAdapter {
  const post = (path: string, body: unknown, signal: AbortSignal) =>
    upstreamFetch(PROVIDER, `${settings.baseUrl}/v2/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal,
    });

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await post('chat', requestBody(request), request.signal);
      return chatResult(await readJson<WireResponse>(PROVIDER, response, request.signal));
    },

    async *chatStream(request) {
      const response = await post('chat', { ...requestBody(request), stream: true }, request.signal);
      yield* streamEvents(response, request.signal);
    },

    async embeddings(request) {
      const embeddings: number[][] = [];
      let inputTokens = 0;
      for (let start = 0; start < request.input.length; start += MAX_EMBED_TEXTS) {
        const texts = request.input.slice(start, start + MAX_EMBED_TEXTS);
        const body = {
          model: request.upstreamModel,
          texts,
          input_type: 'search_document',
          embedding_types: ['float'],
          ...(request.dimensions !== undefined && { output_dimension: request.dimensions }),
        };
        const response = await post('embed', body, request.signal);
        const result = await readJson<{ embeddings?: { float?: number[][] }; meta?: { billed_units?: { input_tokens?: number } } }>(PROVIDER, response, request.signal);
        const vectors = result.embeddings?.float;
        if (vectors?.length !== texts.length) throw new UpstreamError(PROVIDER, response.status, `expected ${texts.length} embeddings, got ${vectors?.length ?? 0}`, true);
        embeddings.push(...vectors);
        inputTokens += result.meta?.billed_units?.input_tokens ?? 0;
      }
      return { embeddings, usage: { inputTokens } };
    },

    async rerank(request: RerankRequest): Promise<RerankResult> {
      const body = { model: request.upstreamModel, query: request.query, documents: request.documents, ...(request.topN !== undefined && { top_n: request.topN }) };
      const response = await post('rerank', body, request.signal);
      const result = await readJson<{ results: Array<{ index: number; relevance_score: number }> }>(PROVIDER, response, request.signal);
      return { results: result.results.map((entry) => ({ index: entry.index, relevanceScore: entry.relevance_score })) };
    },
  };
}

function requestBody(request: ChatRequest): Record<string, unknown> {
  const messages = request.messages.map((message, position) => messageOf(message, position));
  let tools = (request.tools ?? []).map((tool) => ({
    type: 'function',
    function: {
      name: tool.function.name,
      ...(tool.function.description !== undefined && { description: tool.function.description }),
      parameters: tool.function.parameters ?? { type: 'object', properties: {} },
    },
  }));
  let toolChoice: 'REQUIRED' | 'NONE' | undefined;
  const choice = request.toolChoice;
  if (tools.length > 0 && choice !== undefined && choice !== null && choice !== 'auto') {
    if (choice === 'none') toolChoice = 'NONE';
    else if (choice === 'required') toolChoice = 'REQUIRED';
    else {
      const name = (choice as { function?: { name?: unknown } }).function?.name;
      if (typeof name !== 'string') throw invalid(`tool_choice ${JSON.stringify(choice)} is not supported`);
      tools = tools.filter((tool) => tool.function.name === name);
      if (tools.length === 0) throw invalid(`tool_choice names ${name}, which is not among the tools`);
      toolChoice = 'REQUIRED';
    }
  }
  const format = request.responseFormat;
  const responseFormat =
    format?.type === 'json_schema' ? { type: 'json_object', json_schema: format.json_schema.schema } : format?.type === 'json_object' ? { type: 'json_object' } : undefined;

  return {
    model: request.upstreamModel,
    messages,
    ...(tools.length > 0 && { tools }),
    ...(toolChoice && { tool_choice: toolChoice }),
    ...(responseFormat && { response_format: responseFormat }),
    ...(request.maxTokens !== undefined && { max_tokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { p: request.topP }),
    ...(request.stop?.length && { stop_sequences: request.stop }),
  };
}

function messageOf(message: ChatMessage, position: number): Record<string, unknown> {
  switch (message.role) {
    case 'system':
    case 'developer':
      return { role: 'system', content: textOf(message.content) };
    case 'user':
      return { role: 'user', content: typeof message.content === 'string' ? message.content : (message.content ?? []).map((part) => partOf(part, position)) };
    case 'assistant': {
      const text = textOf(message.content);
      return {
        role: 'assistant',
        ...(text !== '' && { content: text }),
        ...(message.tool_calls?.length && { tool_calls: message.tool_calls.map(({ id, type, function: fn }) => ({ id, type, function: fn })) }),
      };
    }
    case 'tool':
      return { role: 'tool', tool_call_id: message.tool_call_id ?? '', content: textOf(message.content) };
  }
}

function partOf(part: ContentPart, position: number): Record<string, unknown> {
  if (part.type === 'text') return { type: 'text', text: part.text };
  if (part.type === 'image_url') return { type: 'image_url', image_url: { url: part.image_url.url } };
  throw invalid(`messages[${position}]: ${part.type} content is not supported`);
}

const textOf = (content: ChatMessage['content']): string =>
  typeof content === 'string' ? content : (content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');

const invalid = (message: string) => new UpstreamError(PROVIDER, 400, message, false);

function chatResult(body: WireResponse): ChatResult {
  const texts = (body.message?.content ?? []).filter((block) => block.type === 'text').map((block) => block.text ?? '');
  const toolCalls = (body.message?.tool_calls ?? []).map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.function.name, arguments: call.function.arguments } }));
  return {
    content: texts.length > 0 ? texts.join('') : null,
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason: finishReasonOf(body.finish_reason),
    usage: usageOf(body.usage),
  };
}

function finishReasonOf(reason: string | undefined): FinishReason {
  switch (reason) {
    case 'MAX_TOKENS':
    case 'ERROR_LIMIT':
      return 'length';
    case 'TOOL_CALL':
      return 'tool_calls';
    case 'ERROR_TOXIC':
      return 'content_filter';
    default:
      return 'stop';
  }
}

function usageOf(usage: WireUsage | undefined): Usage {
  const counts = usage?.tokens ?? usage?.billed_units;
  return { inputTokens: counts?.input_tokens ?? 0, outputTokens: counts?.output_tokens ?? 0 };
}

interface StreamPayload {
  type?: string;
  index?: number;
  delta?: {
    message?: {
      content?: { text?: string };
      tool_calls?: { id?: string; function?: { name?: string; arguments?: string } };
    };
    finish_reason?: string;
    usage?: WireUsage;
    error?: string;
  };
}

async function* streamEvents(response: UpstreamResponse, signal: AbortSignal): AsyncGenerator<ChatStreamEvent> {
  let ended: { finishReason: string | undefined; usage: WireUsage | undefined } | undefined;
  let opened = false;
  for await (const { event, data } of upstreamEvents(PROVIDER, response, signal)) {
    if (data === '[DONE]') continue;
    const payload = parseEventJson(PROVIDER, data) as StreamPayload;
    const message = payload.delta?.message;
    if (!opened && payload.delta?.finish_reason !== 'ERROR') {
      opened = true;
      yield STREAM_OPENED;
    }
    switch (payload.type ?? event) {
      case 'content-delta':
        if (message?.content?.text) yield { type: 'delta', content: message.content.text };
        break;
      case 'tool-call-start': {
        const call = message?.tool_calls;
        yield { type: 'delta', toolCalls: [{ index: payload.index ?? 0, id: call?.id, name: call?.function?.name, arguments: call?.function?.arguments ?? '' }] };
        break;
      }
      case 'tool-call-delta': {
        const fragment = message?.tool_calls?.function?.arguments;
        if (fragment) yield { type: 'delta', toolCalls: [{ index: payload.index ?? 0, arguments: fragment }] };
        break;
      }
      case 'message-end':
        if (payload.delta?.finish_reason === 'ERROR') throw new UpstreamError(PROVIDER, undefined, payload.delta.error ?? 'generation failed', true);
        ended = { finishReason: payload.delta?.finish_reason, usage: payload.delta?.usage };
        break;
    }
  }
  if (!ended) throw new UpstreamError(PROVIDER, undefined, 'stream ended before message-end', true);
  yield { type: 'finish', finishReason: finishReasonOf(ended.finishReason) };
  yield { type: 'usage', usage: usageOf(ended.usage) };
}
