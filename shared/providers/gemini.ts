import { randomUUID } from 'node:crypto';
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
 * The Gemini API (generativelanguage.googleapis.com, v1beta), as a gateway-side client. The chat
 * mapping (generateContent body, result, stream events) is exported for Gemini on Vertex AI
 * (vertex.ts), which sends the same body to another URL with another credential.
 *
 * Mapping decisions:
 * - system and developer messages become one `systemInstruction`; assistant turns are role `model`;
 *   tool results are `functionResponse` parts of a user turn, named after the call they answer
 *   (Gemini matches results by function name, not id); consecutive turns of one role are merged.
 * - Gemini gives function calls no id, so the adapter makes one (`call_<uuid>`) unless Gemini sends one.
 * - Schemas (json_schema and tool parameters) are sent as Gemini's OpenAPI-subset `Schema`: kept are
 *   type, format, title, description, nullable, enum, properties, required, items, minItems,
 *   maxItems, minProperties, maxProperties, minimum, maximum, minLength, maxLength, pattern,
 *   anyOf and propertyOrdering; `oneOf` becomes `anyOf`, `const` becomes a one-value `enum`, a type
 *   list with "null" becomes `nullable`. Dropped: $schema, $ref/$defs, additionalProperties, allOf,
 *   not, default, examples, and any other keyword.
 * - A wrong API key is 400 API_KEY_INVALID at Gemini; the adapter reports it as 401, like every other provider.
 * - Embeddings: Gemini reports no token usage, so inputTokens is estimated as ceil(chars / 4) per input.
 */

const PROVIDER = 'gemini';
const MAX_BATCH_EMBED_REQUESTS = 100;

type Part = Record<string, unknown>;
interface Content {
  role: 'user' | 'model';
  parts: Part[];
}

interface WireUsage {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  thoughtsTokenCount?: number;
  cachedContentTokenCount?: number;
}

/** A generateContent response (or one streamed chunk of it): what `geminiChatResult` reads. */
export interface GeminiResponse {
  candidates?: Array<{ content?: { parts?: Part[] }; finishReason?: string }>;
  promptFeedback?: { blockReason?: string };
  usageMetadata?: WireUsage;
}

export function createGeminiAdapter(settings: KeyProviderSettings): ProviderAdapter {
  const post = (path: string, body: unknown, signal: AbortSignal) =>
    upstreamFetch(
      PROVIDER,
      `${settings.baseUrl}/v1beta/models/${path}`,
      { method: 'POST', headers: { 'x-goog-api-key': settings.apiKey, 'content-type': 'application/json' }, body: JSON.stringify(body), signal },
      { statusOfError: (status, text) => (status === 400 && text.includes('API_KEY_INVALID') ? 401 : undefined) },
    );

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await post(`${encodeURIComponent(request.upstreamModel)}:generateContent`, geminiGenerateContentBody(PROVIDER, request), request.signal);
      return geminiChatResult(await readJson<GeminiResponse>(PROVIDER, response, request.signal));
    },

    async *chatStream(request) {
      const response = await post(`${encodeURIComponent(request.upstreamModel)}:streamGenerateContent?alt=sse`, geminiGenerateContentBody(PROVIDER, request), request.signal);
      yield* geminiStreamEvents(PROVIDER, response, request.signal);
    },

    async embeddings(request) {
      const embeddings: number[][] = [];
      for (let start = 0; start < request.input.length; start += MAX_BATCH_EMBED_REQUESTS) {
        const batch = request.input.slice(start, start + MAX_BATCH_EMBED_REQUESTS);
        const body = {
          requests: batch.map((text) => ({
            model: `models/${request.upstreamModel}`,
            content: { parts: [{ text }] },
            ...(request.dimensions !== undefined && { outputDimensionality: request.dimensions }),
          })),
        };
        const response = await post(`${encodeURIComponent(request.upstreamModel)}:batchEmbedContents`, body, request.signal);
        const result = await readJson<{ embeddings?: Array<{ values: number[] }> }>(PROVIDER, response, request.signal);
        if (result.embeddings?.length !== batch.length) throw new UpstreamError(PROVIDER, response.status, `expected ${batch.length} embeddings, got ${result.embeddings?.length ?? 0}`, true);
        embeddings.push(...result.embeddings.map((embedding) => embedding.values));
      }
      const inputTokens = request.input.reduce((sum, text) => sum + Math.ceil(text.length / 4), 0);
      return { embeddings, usage: { inputTokens } };
    },
  };
}

/**
 * The generateContent body for a request (the same on the Gemini API and on Vertex AI).
 * `provider` names who answers, in the errors of a request that cannot be mapped.
 */
export function geminiGenerateContentBody(provider: string, request: ChatRequest): Record<string, unknown> {
  const system: Part[] = [];
  const contents: Content[] = [];
  const callNames = new Map<string, string>();
  const push = (role: Content['role'], parts: Part[]) => {
    if (parts.length === 0) return;
    const last = contents.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  };

  for (const [position, message] of request.messages.entries()) {
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(...contentParts(provider, message, position));
        break;
      case 'user':
        push('user', contentParts(provider, message, position));
        break;
      case 'assistant': {
        const calls = (message.tool_calls ?? []).map((call) => {
          callNames.set(call.id, call.function.name);
          return { functionCall: { name: call.function.name, args: argumentsOf(provider, call, position) } };
        });
        push('model', [...contentParts(provider, message, position), ...calls]);
        break;
      }
      case 'tool': {
        const name = callNames.get(message.tool_call_id ?? '') ?? message.name;
        if (!name) throw invalid(provider, `messages[${position}]: tool_call_id ${message.tool_call_id} answers no earlier tool call`);
        push('user', [{ functionResponse: { name, response: toolResponse(textOf(message.content)) } }]);
        break;
      }
    }
  }

  const generationConfig: Record<string, unknown> = {
    ...(request.maxTokens !== undefined && { maxOutputTokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { topP: request.topP }),
    ...(request.stop?.length && { stopSequences: request.stop }),
  };
  if (request.responseFormat?.type === 'json_object') generationConfig.responseMimeType = 'application/json';
  if (request.responseFormat?.type === 'json_schema') {
    generationConfig.responseMimeType = 'application/json';
    generationConfig.responseSchema = geminiSchema(request.responseFormat.json_schema.schema);
  }

  const declarations = (request.tools ?? []).map((tool) => ({
    name: tool.function.name,
    ...(tool.function.description !== undefined && { description: tool.function.description }),
    ...(tool.function.parameters && { parameters: geminiSchema(tool.function.parameters) }),
  }));
  const toolConfig = declarations.length > 0 ? toolConfigOf(provider, request.toolChoice) : undefined;

  return {
    contents,
    ...(system.length > 0 && { systemInstruction: { parts: system } }),
    ...(declarations.length > 0 && { tools: [{ functionDeclarations: declarations }] }),
    ...(toolConfig && { toolConfig }),
    ...(Object.keys(generationConfig).length > 0 && { generationConfig }),
  };
}

function toolConfigOf(provider: string, choice: unknown): Record<string, unknown> | undefined {
  if (choice === undefined || choice === null) return undefined;
  const mode = { auto: 'AUTO', none: 'NONE', required: 'ANY' }[choice as string];
  if (mode) return { functionCallingConfig: { mode } };
  const name = (choice as { function?: { name?: unknown } }).function?.name;
  if (typeof name === 'string') return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [name] } };
  throw invalid(provider, `tool_choice ${JSON.stringify(choice)} is not supported`);
}

function contentParts(provider: string, message: ChatMessage, position: number): Part[] {
  if (message.content === null) return [];
  if (typeof message.content === 'string') return message.content === '' ? [] : [{ text: message.content }];
  return message.content.map((part) => partOf(provider, part, position));
}

const IMAGE_TYPES: Record<string, string> = { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif', heic: 'image/heic', pdf: 'application/pdf' };

function partOf(provider: string, part: ContentPart, position: number): Part {
  switch (part.type) {
    case 'text':
      return { text: part.text };
    case 'image_url': {
      const inline = parseDataUrl(part.image_url.url);
      if (inline) return { inlineData: { mimeType: inline.mediaType, data: inline.data } };
      const extension = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(part.image_url.url)?.[1]?.toLowerCase() ?? '';
      return { fileData: { mimeType: IMAGE_TYPES[extension] ?? 'image/jpeg', fileUri: part.image_url.url } };
    }
    case 'input_audio':
      return { inlineData: { mimeType: `audio/${part.input_audio.format}`, data: part.input_audio.data } };
    case 'file': {
      const inline = part.file.file_data ? parseDataUrl(part.file.file_data) : undefined;
      if (inline) return { inlineData: { mimeType: inline.mediaType, data: inline.data } };
      throw invalid(provider, `messages[${position}]: files must be sent inline as data: URLs`);
    }
  }
}

function argumentsOf(provider: string, call: ToolCall, position: number): unknown {
  try {
    return call.function.arguments.trim() === '' ? {} : JSON.parse(call.function.arguments);
  } catch {
    throw invalid(provider, `messages[${position}].tool_calls: arguments of ${call.id} are not valid JSON`);
  }
}

/** Gemini wants a JSON object as a function's response; other results are wrapped as `{content}`. */
function toolResponse(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Plain text: wrapped below.
  }
  return { content: text };
}

const textOf = (content: ChatMessage['content']): string =>
  typeof content === 'string' ? content : (content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');

const invalid = (provider: string, message: string) => new UpstreamError(provider, 400, message, false);

const KEPT_KEYWORDS = new Set([
  'format', 'title', 'description', 'nullable', 'enum', 'required', 'minItems', 'maxItems', 'minProperties', 'maxProperties',
  'minimum', 'maximum', 'minLength', 'maxLength', 'pattern', 'propertyOrdering',
]);

/** A JSON Schema as Gemini's OpenAPI-subset Schema (see the keywords kept and dropped above). */
function geminiSchema(schema: unknown): Record<string, unknown> {
  const node = (schema ?? {}) as Record<string, unknown>;
  const result: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) if (KEPT_KEYWORDS.has(key)) result[key] = value;
  const types = Array.isArray(node.type) ? (node.type as string[]) : typeof node.type === 'string' ? [node.type] : [];
  const concrete = types.filter((type) => type !== 'null');
  if (concrete.length > 0) result.type = concrete[0]!.toUpperCase();
  if (types.includes('null')) result.nullable = true;
  if (node.const !== undefined) result.enum = [node.const];
  if (Array.isArray(result.enum)) result.enum = result.enum.map(String);
  if (node.properties && typeof node.properties === 'object') {
    result.properties = Object.fromEntries(Object.entries(node.properties as Record<string, unknown>).map(([key, child]) => [key, geminiSchema(child)]));
    result.type ??= 'OBJECT';
  }
  if (node.items && typeof node.items === 'object' && !Array.isArray(node.items)) result.items = geminiSchema(node.items);
  const variants = (node.anyOf ?? node.oneOf) as unknown[] | undefined;
  if (Array.isArray(variants)) result.anyOf = variants.map(geminiSchema);
  return result;
}

export function geminiChatResult(body: GeminiResponse): ChatResult {
  const candidate = body.candidates?.[0];
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  for (const part of candidate?.content?.parts ?? []) {
    if (part.thought === true) continue;
    if (typeof part.text === 'string') texts.push(part.text);
    if (part.functionCall) toolCalls.push(toolCallOf(part.functionCall as FunctionCall));
  }
  return {
    content: texts.length > 0 ? texts.join('') : null,
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason: candidate ? finishReasonOf(candidate.finishReason, toolCalls.length > 0) : 'content_filter',
    usage: usageOf(body.usageMetadata),
  };
}

interface FunctionCall {
  id?: string;
  name: string;
  args?: unknown;
}

const toolCallOf = (call: FunctionCall): ToolCall => ({
  id: call.id ?? `call_${randomUUID().replaceAll('-', '')}`,
  type: 'function',
  function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) },
});

/** Gemini finishes a function call with STOP; the gateway's callers expect `tool_calls` then. */
function finishReasonOf(reason: string | undefined, calledTools: boolean): FinishReason {
  switch (reason) {
    case 'MAX_TOKENS':
      return 'length';
    case 'SAFETY':
    case 'RECITATION':
    case 'BLOCKLIST':
    case 'PROHIBITED_CONTENT':
    case 'SPII':
    case 'IMAGE_SAFETY':
      return 'content_filter';
    default:
      return calledTools ? 'tool_calls' : 'stop';
  }
}

/** Thinking tokens are billed as output; cached tokens are already part of promptTokenCount. */
function usageOf(usage: WireUsage | undefined): Usage {
  return {
    inputTokens: usage?.promptTokenCount ?? 0,
    outputTokens: (usage?.candidatesTokenCount ?? 0) + (usage?.thoughtsTokenCount ?? 0),
    ...(usage?.cachedContentTokenCount !== undefined && { cacheReadTokens: usage.cachedContentTokenCount }),
  };
}

/** A streamGenerateContent SSE stream as the gateway's stream events; `provider` names who answers, in its errors. */
export async function* geminiStreamEvents(provider: string, response: UpstreamResponse, signal: AbortSignal): AsyncGenerator<ChatStreamEvent> {
  let usage: WireUsage | undefined;
  let finishReason: string | undefined;
  let toolCalls = 0;
  let blocked = false;
  let opened = false;

  for await (const { data } of upstreamEvents(provider, response, signal)) {
    const chunk = parseEventJson(provider, data) as GeminiResponse & { error?: { code?: number; message?: string } };
    if (chunk.error) throw UpstreamError.fromStatus(provider, chunk.error.code ?? 500, chunk.error.message ?? 'stream error');
    if (!opened) {
      opened = true;
      yield STREAM_OPENED;
    }
    usage = chunk.usageMetadata ?? usage;
    if (chunk.promptFeedback?.blockReason) blocked = true;
    const candidate = chunk.candidates?.[0];
    for (const part of candidate?.content?.parts ?? []) {
      if (part.thought === true) continue;
      if (typeof part.text === 'string' && part.text !== '') yield { type: 'delta', content: part.text };
      if (part.functionCall) {
        const call = toolCallOf(part.functionCall as FunctionCall);
        yield { type: 'delta', toolCalls: [{ index: toolCalls++, id: call.id, name: call.function.name, arguments: call.function.arguments }] };
      }
    }
    finishReason = candidate?.finishReason ?? finishReason;
  }
  // A stream that stops without a finish reason was cut off; it must not look like a complete answer.
  if (!finishReason && !blocked) throw new UpstreamError(provider, undefined, 'stream ended without a finish reason', true);
  yield { type: 'finish', finishReason: blocked && !finishReason ? 'content_filter' : finishReasonOf(finishReason, toolCalls > 0) };
  yield { type: 'usage', usage: usageOf(usage) };
}
