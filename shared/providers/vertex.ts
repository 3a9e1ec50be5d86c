import { importPKCS8, SignJWT } from 'jose';
import { networkFailure, readJson, upstreamEvents, upstreamFetch } from './http.js';
import type { VertexSettings } from './settings.js';
import {
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
 * Google Vertex AI, authenticated as a service account: a JWT-bearer assertion signed RS256 with
 * the account's key is exchanged at its token URI for a one-hour access token, which is cached and
 * reused until a minute before it expires (one exchange in flight at a time, shared by callers).
 *
 * Two publishers behind one token:
 * - anthropic models on the cloud2 route (`@us-cloud2` / `@eu-cloud2`; upstreamModel is the cloud2
 *   id): `:rawPredict` / `:streamRawPredict` with Anthropic's messages body and SSE events;
 * - Google's own models (catalog provider vertex, Gemini): `:generateContent` /
 *   `:streamGenerateContent?alt=sse`.
 * The two body mappings are kept small and local here; the first-party anthropic and gemini
 * adapters carry the same shapes and can later share them.
 */
const PROVIDER = 'vertex';
const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ASSERTION_LIFETIME_SECONDS = 3600;
/** A token is replaced this long before it expires, so none expires in flight. */
const REFRESH_MARGIN_MS = 60_000;
/** A token exchange is shared by concurrent callers, so it has its own deadline rather than one caller's signal. */
const TOKEN_EXCHANGE_TIMEOUT_MS = 30_000;
const ANTHROPIC_VERSION = 'vertex-2023-10-16';
/** Anthropic requires max_tokens; this is sent when the caller set none (every Claude model allows it). */
const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096;

/** Waits for a shared promise while still honouring this caller's own abort. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function createAccessTokens(settings: VertexSettings) {
  let cached: { token: string; refreshAt: number } | undefined;
  let inFlight: Promise<string> | undefined;
  let privateKey: ReturnType<typeof importPKCS8> | undefined;

  async function mint(): Promise<string> {
    privateKey ??= importPKCS8(settings.privateKeyPem, 'RS256');
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ scope: SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(settings.clientEmail)
      .setAudience(settings.tokenUri)
      .setIssuedAt(now)
      .setExpirationTime(now + ASSERTION_LIFETIME_SECONDS)
      .sign(await privateKey);
    const signal = AbortSignal.timeout(TOKEN_EXCHANGE_TIMEOUT_MS);
    let response: Response;
    try {
      response = await upstreamFetch(PROVIDER, settings.tokenUri, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
        signal,
      });
    } catch (error) {
      // The token endpoint refuses a bad key or account with 400 invalid_grant: that is an authentication failure.
      if (error instanceof UpstreamError && error.status !== undefined && error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429) {
        throw new UpstreamError(PROVIDER, 401, `service-account token exchange refused (${error.message})`, false);
      }
      throw error;
    }
    const body = await readJson<{ access_token?: string; expires_in?: number }>(PROVIDER, response, signal);
    if (!body.access_token) throw new UpstreamError(PROVIDER, response.status, 'token endpoint answered without an access_token', true);
    cached = { token: body.access_token, refreshAt: Date.now() + (body.expires_in ?? ASSERTION_LIFETIME_SECONDS) * 1000 - REFRESH_MARGIN_MS };
    return body.access_token;
  }

  return {
    get(signal: AbortSignal): Promise<string> {
      if (cached && Date.now() < cached.refreshAt) return Promise.resolve(cached.token);
      inFlight ??= mint().finally(() => {
        inFlight = undefined;
      });
      return untilAborted(inFlight, signal);
    },
    /** After a 401 from the API the token is no good, whatever its expiry said. */
    forget(token: string): void {
      if (cached?.token === token) cached = undefined;
    },
  };
}

// ---- shared helpers ---------------------------------------------------------------------

function parseDataUrl(url: string): { mediaType: string; base64: string } | undefined {
  const match = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1]!, base64: match[2]! } : undefined;
}

function textOf(content: ChatMessage['content']): string {
  if (content === null) return '';
  if (typeof content === 'string') return content;
  return content.map((part) => (part.type === 'text' ? part.text : '')).join('');
}

function parseArguments(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text || '{}') as unknown;
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

const unsupported = (what: string) => new UpstreamError(PROVIDER, 400, `${what} is not supported on Vertex AI`, false);

// ---- Anthropic on Vertex ----------------------------------------------------------------

type AnthropicBlock = Record<string, unknown> & { type: string };

function anthropicPart(part: ContentPart): AnthropicBlock {
  switch (part.type) {
    case 'text':
      return { type: 'text', text: part.text };
    case 'image_url': {
      const data = parseDataUrl(part.image_url.url);
      return { type: 'image', source: data ? { type: 'base64', media_type: data.mediaType, data: data.base64 } : { type: 'url', url: part.image_url.url } };
    }
    case 'file': {
      const data = part.file.file_data ? parseDataUrl(part.file.file_data) : undefined;
      if (data?.mediaType !== 'application/pdf') throw unsupported('A file other than an inline PDF');
      return { type: 'document', source: { type: 'base64', media_type: data.mediaType, data: data.base64 } };
    }
    default:
      throw unsupported(`A content part of type ${part.type}`);
  }
}

function anthropicBody(request: ChatRequest, stream: boolean): Record<string, unknown> {
  const system: AnthropicBlock[] = [];
  const messages: { role: 'user' | 'assistant'; content: AnthropicBlock[] }[] = [];
  const push = (role: 'user' | 'assistant', content: AnthropicBlock[], cacheControl: ChatMessage['cache_control']) => {
    if (content.length === 0) return;
    if (cacheControl) content[content.length - 1] = { ...content[content.length - 1]!, cache_control: cacheControl };
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...content);
    else messages.push({ role, content });
  };
  for (const message of request.messages) {
    if (message.role === 'system' || message.role === 'developer') {
      const text = textOf(message.content);
      if (text) system.push({ type: 'text', text, ...(message.cache_control && { cache_control: message.cache_control }) });
    } else if (message.role === 'tool') {
      push('user', [{ type: 'tool_result', tool_use_id: message.tool_call_id ?? '', content: textOf(message.content) }], message.cache_control);
    } else if (message.role === 'assistant') {
      const text = textOf(message.content);
      const calls = (message.tool_calls ?? []).map((call) => ({ type: 'tool_use', id: call.id, name: call.function.name, input: parseArguments(call.function.arguments) }));
      push('assistant', [...(text ? [{ type: 'text', text }] : []), ...calls], message.cache_control);
    } else {
      const content = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : (message.content ?? []).map(anthropicPart);
      push('user', content, message.cache_control);
    }
  }
  // prompt_cache 'auto': one breakpoint after the whole prompt, so the next turn reads it back.
  if (request.promptCache === 'auto' && messages.length > 0) {
    const lastContent = messages.at(-1)!.content;
    lastContent[lastContent.length - 1] = { cache_control: { type: 'ephemeral' }, ...lastContent[lastContent.length - 1]! };
  }
  const tools = request.toolChoice === 'none' ? [] : (request.tools ?? []);
  const choice = request.toolChoice;
  const toolChoice =
    choice === 'required' ? { type: 'any' } : choice === 'auto' ? { type: 'auto' } : (choice as { function?: { name?: string } })?.function?.name ? { type: 'tool', name: (choice as { function: { name: string } }).function.name } : undefined;
  return {
    anthropic_version: ANTHROPIC_VERSION,
    messages,
    max_tokens: request.maxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS,
    ...(system.length > 0 && { system }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop?.length && { stop_sequences: request.stop }),
    ...(tools.length > 0 && {
      tools: tools.map((tool) => ({ name: tool.function.name, ...(tool.function.description && { description: tool.function.description }), input_schema: tool.function.parameters ?? { type: 'object', properties: {} } })),
      ...(toolChoice && { tool_choice: toolChoice }),
    }),
    ...(stream && { stream: true }),
  };
}

interface AnthropicUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

function anthropicFinish(stopReason: string | null | undefined): FinishReason {
  if (stopReason === 'max_tokens') return 'length';
  if (stopReason === 'tool_use') return 'tool_calls';
  if (stopReason === 'refusal') return 'content_filter';
  return 'stop';
}

/** inputTokens is the whole prompt: Anthropic counts cached reads and writes apart from its input_tokens. */
function anthropicUsage(usage: AnthropicUsage): Usage {
  return {
    inputTokens: (usage.input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0),
    outputTokens: usage.output_tokens ?? 0,
    ...(usage.cache_read_input_tokens != null && { cacheReadTokens: usage.cache_read_input_tokens }),
    ...(usage.cache_creation_input_tokens != null && { cacheWriteTokens: usage.cache_creation_input_tokens }),
  };
}

function anthropicResult(message: { content?: Array<{ type: string; text?: string; id?: string; name?: string; input?: unknown }>; stop_reason?: string | null; usage?: AnthropicUsage }): ChatResult {
  const blocks = message.content ?? [];
  const texts = blocks.filter((block) => block.type === 'text').map((block) => block.text ?? '');
  const toolCalls: ToolCall[] = blocks
    .filter((block) => block.type === 'tool_use')
    .map((block) => ({ id: block.id ?? '', type: 'function', function: { name: block.name ?? '', arguments: JSON.stringify(block.input ?? {}) } }));
  return {
    content: texts.length > 0 ? texts.join('') : null,
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason: anthropicFinish(message.stop_reason),
    usage: anthropicUsage(message.usage ?? {}),
  };
}

/** Anthropic's error event names, with the HTTP status each would have had. */
const ANTHROPIC_ERROR_STATUS: Record<string, number> = { overloaded_error: 529, api_error: 500, rate_limit_error: 429, invalid_request_error: 400 };

async function* anthropicStream(response: Response, signal: AbortSignal): AsyncGenerator<ChatStreamEvent> {
  const usage: AnthropicUsage = {};
  let finishReason: FinishReason | undefined;
  const toolIndexByBlock = new Map<number, number>();
  for await (const { data } of upstreamEvents(PROVIDER, response, signal)) {
    const event = JSON.parse(data) as { type: string; [field: string]: unknown };
    switch (event.type) {
      case 'message_start':
        Object.assign(usage, (event.message as { usage?: AnthropicUsage }).usage);
        break;
      case 'content_block_start': {
        const block = event.content_block as { type: string; id?: string; name?: string };
        if (block.type === 'tool_use') {
          const index = toolIndexByBlock.size;
          toolIndexByBlock.set(event.index as number, index);
          yield { type: 'delta', toolCalls: [{ index, id: block.id, name: block.name }] };
        }
        break;
      }
      case 'content_block_delta': {
        const delta = event.delta as { type: string; text?: string; partial_json?: string };
        if (delta.type === 'text_delta' && delta.text) yield { type: 'delta', content: delta.text };
        const index = toolIndexByBlock.get(event.index as number);
        if (delta.type === 'input_json_delta' && delta.partial_json && index !== undefined) yield { type: 'delta', toolCalls: [{ index, arguments: delta.partial_json }] };
        break;
      }
      case 'message_delta':
        finishReason = anthropicFinish((event.delta as { stop_reason?: string }).stop_reason);
        Object.assign(usage, event.usage);
        break;
      case 'error': {
        const error = event.error as { type?: string; message?: string };
        throw UpstreamError.fromStatus(PROVIDER, ANTHROPIC_ERROR_STATUS[error.type ?? ''] ?? 500, error.message ?? error.type ?? 'stream error');
      }
      case 'message_stop':
        if (!finishReason) break;
        yield { type: 'finish', finishReason };
        yield { type: 'usage', usage: anthropicUsage(usage) };
        return;
    }
  }
  throw new UpstreamError(PROVIDER, undefined, 'stream ended before message_stop', true);
}

// ---- Gemini on Vertex -------------------------------------------------------------------

type GeminiPart = Record<string, unknown>;

function geminiPart(part: ContentPart): GeminiPart {
  switch (part.type) {
    case 'text':
      return { text: part.text };
    case 'image_url': {
      const data = parseDataUrl(part.image_url.url);
      if (data) return { inlineData: { mimeType: data.mediaType, data: data.base64 } };
      // Vertex reads gs:// and https:// URIs itself; the type is a best guess from the extension.
      const extension = /\.(png|jpe?g|gif|webp)(?:$|\?)/i.exec(part.image_url.url)?.[1]?.toLowerCase().replace('jpg', 'jpeg') ?? 'jpeg';
      return { fileData: { fileUri: part.image_url.url, mimeType: `image/${extension}` } };
    }
    case 'input_audio':
      return { inlineData: { mimeType: `audio/${part.input_audio.format}`, data: part.input_audio.data } };
    case 'file': {
      const data = part.file.file_data ? parseDataUrl(part.file.file_data) : undefined;
      if (!data) throw unsupported('A file given by id');
      return { inlineData: { mimeType: data.mediaType, data: data.base64 } };
    }
  }
}

function geminiBody(request: ChatRequest): Record<string, unknown> {
  const systemParts: GeminiPart[] = [];
  const contents: { role: 'user' | 'model'; parts: GeminiPart[] }[] = [];
  // Gemini names a function response by the function's name, which only the call carried.
  const toolNames = new Map<string, string>();
  const push = (role: 'user' | 'model', parts: GeminiPart[]) => {
    if (parts.length === 0) return;
    const last = contents.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  };
  for (const message of request.messages) {
    if (message.role === 'system' || message.role === 'developer') {
      const text = textOf(message.content);
      if (text) systemParts.push({ text });
    } else if (message.role === 'tool') {
      const name = toolNames.get(message.tool_call_id ?? '') ?? message.name ?? 'tool';
      push('user', [{ functionResponse: { name, response: { content: textOf(message.content) } } }]);
    } else if (message.role === 'assistant') {
      const text = textOf(message.content);
      for (const call of message.tool_calls ?? []) toolNames.set(call.id, call.function.name);
      const calls = (message.tool_calls ?? []).map((call) => ({ functionCall: { name: call.function.name, args: parseArguments(call.function.arguments) } }));
      push('model', [...(text ? [{ text }] : []), ...calls]);
    } else {
      push('user', typeof message.content === 'string' ? [{ text: message.content }] : (message.content ?? []).map(geminiPart));
    }
  }
  const format = request.responseFormat;
  const generationConfig = {
    ...(request.maxTokens !== undefined && { maxOutputTokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { topP: request.topP }),
    ...(request.stop?.length && { stopSequences: request.stop }),
    ...(format && format.type !== 'text' && { responseMimeType: 'application/json' }),
    ...(format?.type === 'json_schema' && { responseJsonSchema: format.json_schema.schema }),
  };
  const tools = request.toolChoice === 'none' ? [] : (request.tools ?? []);
  const choice = request.toolChoice;
  const forced = (choice as { function?: { name?: string } } | undefined)?.function?.name;
  const functionCallingConfig = choice === 'required' ? { mode: 'ANY' } : forced ? { mode: 'ANY', allowedFunctionNames: [forced] } : undefined;
  return {
    contents,
    ...(systemParts.length > 0 && { systemInstruction: { parts: systemParts } }),
    ...(Object.keys(generationConfig).length > 0 && { generationConfig }),
    ...(tools.length > 0 && {
      tools: [{ functionDeclarations: tools.map((tool) => ({ name: tool.function.name, ...(tool.function.description && { description: tool.function.description }), ...(tool.function.parameters && { parameters: tool.function.parameters }) })) }],
      ...(functionCallingConfig && { toolConfig: { functionCallingConfig } }),
    }),
  };
}

interface GeminiResponse {
  candidates?: Array<{ content?: { parts?: Array<{ text?: string; thought?: boolean; functionCall?: { id?: string; name: string; args?: unknown } }> }; finishReason?: string }>;
  usageMetadata?: { promptTokenCount?: number; candidatesTokenCount?: number; cachedContentTokenCount?: number; thoughtsTokenCount?: number };
}

function geminiFinish(reason: string | undefined, calledTools: boolean): FinishReason {
  if (calledTools) return 'tool_calls';
  if (reason === 'MAX_TOKENS') return 'length';
  if (reason === 'SAFETY' || reason === 'RECITATION' || reason === 'BLOCKLIST' || reason === 'PROHIBITED_CONTENT' || reason === 'SPII') return 'content_filter';
  return 'stop';
}

function geminiUsage(usage: GeminiResponse['usageMetadata']): Usage {
  return {
    inputTokens: usage?.promptTokenCount ?? 0,
    // Thinking tokens are billed as output.
    outputTokens: (usage?.candidatesTokenCount ?? 0) + (usage?.thoughtsTokenCount ?? 0),
    ...(usage?.cachedContentTokenCount !== undefined && { cacheReadTokens: usage.cachedContentTokenCount }),
  };
}

const geminiParts = (response: GeminiResponse) => (response.candidates?.[0]?.content?.parts ?? []).filter((part) => !part.thought);

function geminiResult(response: GeminiResponse): ChatResult {
  const parts = geminiParts(response);
  const texts = parts.filter((part) => typeof part.text === 'string').map((part) => part.text!);
  const toolCalls: ToolCall[] = parts
    .filter((part) => part.functionCall)
    .map(({ functionCall }, i) => ({ id: functionCall!.id ?? `call_${i}`, type: 'function', function: { name: functionCall!.name, arguments: JSON.stringify(functionCall!.args ?? {}) } }));
  return {
    content: texts.length > 0 ? texts.join('') : null,
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason: geminiFinish(response.candidates?.[0]?.finishReason, toolCalls.length > 0),
    usage: geminiUsage(response.usageMetadata),
  };
}

async function* geminiStream(response: Response, signal: AbortSignal): AsyncGenerator<ChatStreamEvent> {
  let finishReason: string | undefined;
  let usage: GeminiResponse['usageMetadata'];
  let toolCalls = 0;
  for await (const { data } of upstreamEvents(PROVIDER, response, signal)) {
    const chunk = JSON.parse(data) as GeminiResponse;
    for (const part of geminiParts(chunk)) {
      if (part.text) yield { type: 'delta', content: part.text };
      if (part.functionCall) {
        const index = toolCalls++;
        yield { type: 'delta', toolCalls: [{ index, id: part.functionCall.id ?? `call_${index}`, name: part.functionCall.name, arguments: JSON.stringify(part.functionCall.args ?? {}) }] };
      }
    }
    finishReason = chunk.candidates?.[0]?.finishReason ?? finishReason;
    usage = chunk.usageMetadata ?? usage;
  }
  // Gemini has no end-of-stream event: a finish reason is what tells a whole answer from a cut one.
  if (!finishReason) throw new UpstreamError(PROVIDER, undefined, 'stream ended without a finish reason', true);
  yield { type: 'finish', finishReason: geminiFinish(finishReason, toolCalls > 0) };
  yield { type: 'usage', usage: geminiUsage(usage) };
}

// ---- the adapter ------------------------------------------------------------------------

const DEFAULT_HOST = /^https:\/\/([a-z0-9-]+)-aiplatform\.googleapis\.com$/;
const GEOGRAPHY_DEFAULT_LOCATION = { eu: 'europe-west1', us: 'us-east5' } as const;

/**
 * Where a call goes. A region suffix picks a location in its geography (the configured one when it
 * already is there, else europe-west1 / us-east5); with the default regional host the host follows
 * the location, while a VERTEX_BASE_URL override (the emulator) is kept as is.
 */
function placeOf(settings: VertexSettings, request: ChatRequest): { baseUrl: string; location: string } {
  const geography = request.region?.startsWith('eu') ? 'eu' : request.region?.startsWith('us') ? 'us' : undefined;
  if (!geography) return { baseUrl: settings.baseUrl, location: settings.location };
  const inGeography = geography === 'eu' ? settings.location.startsWith('europe-') : settings.location.startsWith('us-');
  const location = inGeography ? settings.location : GEOGRAPHY_DEFAULT_LOCATION[geography];
  const baseUrl = DEFAULT_HOST.test(settings.baseUrl) ? `https://${location}-aiplatform.googleapis.com` : settings.baseUrl;
  return { baseUrl, location };
}

export function createVertexAdapter(settings: VertexSettings): ProviderAdapter {
  const tokens = createAccessTokens(settings);
  const modelsUrl = (request: ChatRequest, publisher: string) => {
    const { baseUrl, location } = placeOf(settings, request);
    return `${baseUrl}/v1/projects/${settings.projectId}/locations/${location}/publishers/${publisher}/models`;
  };

  async function post(request: ChatRequest, url: string, body: unknown): Promise<Response> {
    const token = await tokens.get(request.signal);
    try {
      return await upstreamFetch(PROVIDER, url, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: request.signal,
      });
    } catch (error) {
      if (error instanceof UpstreamError && error.status === 401) tokens.forget(token);
      throw error;
    }
  }

  const isAnthropic = (request: ChatRequest) => request.model.provider === 'anthropic';

  return {
    provider: PROVIDER,

    async chat(request) {
      if (isAnthropic(request)) {
        const response = await post(request, `${modelsUrl(request, 'anthropic')}/${request.upstreamModel}:rawPredict`, anthropicBody(request, false));
        return anthropicResult(await readJson(PROVIDER, response, request.signal));
      }
      const response = await post(request, `${modelsUrl(request, 'google')}/${request.upstreamModel}:generateContent`, geminiBody(request));
      return geminiResult(await readJson<GeminiResponse>(PROVIDER, response, request.signal));
    },

    async *chatStream(request) {
      try {
        if (isAnthropic(request)) {
          const response = await post(request, `${modelsUrl(request, 'anthropic')}/${request.upstreamModel}:streamRawPredict`, anthropicBody(request, true));
          yield* anthropicStream(response, request.signal);
        } else {
          const response = await post(request, `${modelsUrl(request, 'google')}/${request.upstreamModel}:streamGenerateContent?alt=sse`, geminiBody(request));
          yield* geminiStream(response, request.signal);
        }
      } catch (error) {
        // A malformed event is as unusable as a cut connection.
        throw error instanceof SyntaxError ? new UpstreamError(PROVIDER, undefined, `malformed stream event: ${error.message}`, true) : error;
      }
    },
  };
}
