import { readJson, upstreamEvents, upstreamFetch } from './http.js';
import type { WatsonxSettings } from './settings.js';
import { UpstreamError, type ChatRequest, type ChatResult, type ChatStreamEvent, type FinishReason, type ProviderAdapter, type ToolCall, type Usage } from './types.js';

/**
 * IBM watsonx.ai. The API key is exchanged at IBM Cloud IAM for a bearer token (one hour), cached
 * and reused until a minute before it expires, with one exchange in flight at a time shared by
 * callers; then `/ml/v1/text/chat` and `/ml/v1/text/chat_stream` (SSE) in the project.
 * Its chat shapes are close to OpenAI's: messages and tool calls as OpenAI sends them, except
 * that a named tool choice goes in `tool_choice` and a mode in `tool_choice_option`.
 */
const PROVIDER = 'watsonx';
const API_VERSION = '2024-05-01';
const APIKEY_GRANT = 'urn:ibm:params:oauth:grant-type:apikey';
const REFRESH_MARGIN_MS = 60_000;
/** A token exchange is shared by concurrent callers, so it has its own deadline rather than one caller's signal. */
const TOKEN_EXCHANGE_TIMEOUT_MS = 30_000;

/** Waits for a shared promise while still honouring this caller's own abort. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function createIamTokens(settings: WatsonxSettings) {
  let cached: { token: string; refreshAt: number } | undefined;
  let inFlight: Promise<string> | undefined;

  async function mint(): Promise<string> {
    const signal = AbortSignal.timeout(TOKEN_EXCHANGE_TIMEOUT_MS);
    let response: Response;
    try {
      response = await upstreamFetch(PROVIDER, `${settings.iamUrl}/identity/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({ grant_type: APIKEY_GRANT, apikey: settings.apiKey }).toString(),
        signal,
      });
    } catch (error) {
      // IAM refuses an unknown API key with 400 BXNIM0415E: that is an authentication failure.
      if (error instanceof UpstreamError && error.status !== undefined && error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429) {
        throw new UpstreamError(PROVIDER, 401, `IAM token exchange refused (${error.message})`, false);
      }
      throw error;
    }
    const body = await readJson<{ access_token?: string; expires_in?: number; expiration?: number }>(PROVIDER, response, signal);
    if (!body.access_token) throw new UpstreamError(PROVIDER, response.status, 'IAM answered without an access_token', true);
    const expiresAt = body.expiration !== undefined ? body.expiration * 1000 : Date.now() + (body.expires_in ?? 3600) * 1000;
    cached = { token: body.access_token, refreshAt: expiresAt - REFRESH_MARGIN_MS };
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

interface WatsonxUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

interface WatsonxChoice {
  message?: { content?: string | null; tool_calls?: ToolCall[] };
  delta?: { content?: string | null; tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }> };
  finish_reason?: string | null;
}

interface WatsonxAnswer {
  choices?: WatsonxChoice[];
  usage?: WatsonxUsage;
}

function requestBody(settings: WatsonxSettings, request: ChatRequest): Record<string, unknown> {
  // watsonx knows no developer role and no cache_control.
  const messages = request.messages.map(({ cache_control: _ignored, ...message }) => (message.role === 'developer' ? { ...message, role: 'system' } : message));
  const choice = request.toolChoice;
  return {
    model_id: request.upstreamModel,
    project_id: settings.projectId,
    messages,
    ...(request.maxTokens !== undefined && { max_tokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop?.length && { stop: request.stop }),
    ...(request.tools?.length && { tools: request.tools }),
    ...(typeof choice === 'string' && { tool_choice_option: choice }),
    ...(choice !== undefined && typeof choice === 'object' && { tool_choice: choice }),
    ...(request.responseFormat && { response_format: request.responseFormat }),
  };
}

function finishReasonOf(reason: string | null | undefined): FinishReason {
  if (reason === 'length' || reason === 'tool_calls' || reason === 'content_filter') return reason;
  return 'stop';
}

const usageOf = (usage: WatsonxUsage): Usage => ({ inputTokens: usage.prompt_tokens ?? 0, outputTokens: usage.completion_tokens ?? 0 });

function chatResultOf(answer: WatsonxAnswer): ChatResult {
  const choice = answer.choices?.[0];
  const toolCalls = choice?.message?.tool_calls;
  return {
    content: choice?.message?.content ?? null,
    ...(toolCalls?.length && { toolCalls: toolCalls.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.function.name, arguments: call.function.arguments } })) }),
    finishReason: finishReasonOf(choice?.finish_reason),
    usage: usageOf(answer.usage ?? {}),
  };
}

export function createWatsonxAdapter(settings: WatsonxSettings): ProviderAdapter {
  const tokens = createIamTokens(settings);

  async function post(request: ChatRequest, operation: 'chat' | 'chat_stream'): Promise<Response> {
    const token = await tokens.get(request.signal);
    try {
      return await upstreamFetch(PROVIDER, `${settings.baseUrl}/ml/v1/text/${operation}?version=${API_VERSION}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: operation === 'chat' ? 'application/json' : 'text/event-stream' },
        body: JSON.stringify(requestBody(settings, request)),
        signal: request.signal,
      });
    } catch (error) {
      if (error instanceof UpstreamError && error.status === 401) tokens.forget(token);
      throw error;
    }
  }

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await post(request, 'chat');
      return chatResultOf(await readJson<WatsonxAnswer>(PROVIDER, response, request.signal));
    },

    async *chatStream(request): AsyncGenerator<ChatStreamEvent> {
      const response = await post(request, 'chat_stream');
      let finishReason: FinishReason | undefined;
      let usage: Usage | undefined;
      for await (const { event, data } of upstreamEvents(PROVIDER, response, request.signal)) {
        if (event === 'error') throw new UpstreamError(PROVIDER, undefined, `stream error: ${data.slice(0, 500)}`, true);
        if (data === '[DONE]') break;
        let chunk: WatsonxAnswer;
        try {
          chunk = JSON.parse(data) as WatsonxAnswer;
        } catch {
          throw new UpstreamError(PROVIDER, undefined, `malformed stream chunk: ${data.slice(0, 200)}`, true);
        }
        const choice = chunk.choices?.[0];
        const delta = choice?.delta;
        if (delta?.content) yield { type: 'delta', content: delta.content };
        if (delta?.tool_calls?.length) {
          yield {
            type: 'delta',
            toolCalls: delta.tool_calls.map((call) => ({
              index: call.index,
              ...(call.id && { id: call.id }),
              ...(call.function?.name && { name: call.function.name }),
              ...(call.function?.arguments && { arguments: call.function.arguments }),
            })),
          };
        }
        if (choice?.finish_reason) finishReason = finishReasonOf(choice.finish_reason);
        if (chunk.usage) usage = usageOf(chunk.usage);
      }
      // The last chunk carries the finish reason and the usage; without them the stream was cut.
      if (!finishReason || !usage) throw new UpstreamError(PROVIDER, undefined, 'stream ended before its final chunk', true);
      yield { type: 'finish', finishReason };
      yield { type: 'usage', usage };
    },
  };
}
