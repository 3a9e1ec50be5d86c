import { parseEventJson, readJson, upstreamEvents, upstreamFetch } from './http.js';
import { openAiChatBody, openAiChatResult, openAiChunkDelta, openAiFinishReason, openAiUsage, type OpenAiCompletion, type OpenAiCompletionChunk } from './openai-compatible.js';
import type { WatsonxSettings } from './settings.js';
import { AccessTokenCache, postTokenForm } from './token-cache.js';
import { STREAM_OPENED, UpstreamError, type ChatMessage, type ChatRequest, type ChatStreamEvent, type FinishReason, type ProviderAdapter, type Usage } from './types.js';

/**
 * IBM watsonx.ai. The API key is exchanged at IBM Cloud IAM for a bearer token (one hour), held
 * in an AccessTokenCache (token-cache.ts); then `/ml/v1/text/chat` and `/ml/v1/text/chat_stream` (SSE) in the project.
 * Its chat shapes are close to OpenAI's: messages and tool calls as OpenAI sends them, except
 * that a named tool choice goes in `tool_choice` and a mode in `tool_choice_option`, and the model
 * and project go in the body. Answers and stream chunks are OpenAI's shapes, so they are read by
 * the OpenAI-compatible mapping (openai-compatible.ts); the SSE framing (an `error` event, no
 * required [DONE]) is watsonx's own.
 */
const PROVIDER = 'watsonx';
const API_VERSION = '2024-05-01';
const APIKEY_GRANT = 'urn:ibm:params:oauth:grant-type:apikey';

/** Exchanges the API key at IBM Cloud IAM for a bearer token. */
function createIamTokens(settings: WatsonxSettings): AccessTokenCache {
  return new AccessTokenCache(async (signal) => {
    const response = await postTokenForm(PROVIDER, `${settings.iamUrl}/identity/token`, { grant_type: APIKEY_GRANT, apikey: settings.apiKey }, signal, 'IAM token exchange refused');
    const body = await readJson<{ access_token?: string; expires_in?: number; expiration?: number }>(PROVIDER, response, signal);
    if (!body.access_token) throw new UpstreamError(PROVIDER, response.status, 'IAM answered without an access_token', true);
    // IAM gives the expiry as an absolute time (epoch seconds) as well as a lifetime; the absolute one wins.
    const expiresInSeconds = body.expiration !== undefined ? body.expiration - Date.now() / 1000 : (body.expires_in ?? 3600);
    return { token: body.access_token, expiresInSeconds };
  });
}

/** OpenAI's chat body, with watsonx's model and project fields, roles and tool choice. */
function requestBody(settings: WatsonxSettings, request: ChatRequest): Record<string, unknown> {
  const { messages, tool_choice: _toolChoice, ...options } = openAiChatBody(request, false, 'max_tokens') as { messages: ChatMessage[]; tool_choice?: unknown };
  const choice = request.toolChoice;
  return {
    model_id: request.upstreamModel,
    project_id: settings.projectId,
    // watsonx knows no developer role.
    messages: messages.map((message) => (message.role === 'developer' ? { ...message, role: 'system' } : message)),
    ...options,
    ...(typeof choice === 'string' && { tool_choice_option: choice }),
    ...(choice !== undefined && typeof choice === 'object' && { tool_choice: choice }),
  };
}

export function createWatsonxAdapter(settings: WatsonxSettings): ProviderAdapter {
  const tokens = createIamTokens(settings);

  const post = (request: ChatRequest, operation: 'chat' | 'chat_stream') =>
    tokens.authorized(request.signal, (token) =>
      upstreamFetch(PROVIDER, `${settings.baseUrl}/ml/v1/text/${operation}?version=${API_VERSION}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: operation === 'chat' ? 'application/json' : 'text/event-stream' },
        body: JSON.stringify(requestBody(settings, request)),
        signal: request.signal,
      }),
    );

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await post(request, 'chat');
      return openAiChatResult(PROVIDER, await readJson<OpenAiCompletion>(PROVIDER, response, request.signal), response.status, request);
    },

    async *chatStream(request): AsyncGenerator<ChatStreamEvent> {
      const response = await post(request, 'chat_stream');
      let finishReason: FinishReason | undefined;
      let usage: Usage | undefined;
      let opened = false;
      let done = false;
      for await (const { event, data } of upstreamEvents(PROVIDER, response, request.signal)) {
        // Past the end marker the body is read to its end, not left (which would drop the connection).
        if (done) continue;
        if (event === 'error') throw new UpstreamError(PROVIDER, undefined, `stream error: ${data.slice(0, 500)}`, true);
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        const chunk = parseEventJson(PROVIDER, data) as OpenAiCompletionChunk;
        if (!opened) {
          opened = true;
          yield STREAM_OPENED;
        }
        const delta = openAiChunkDelta(chunk);
        if (delta) yield delta;
        const reason = chunk.choices?.[0]?.finish_reason;
        if (reason) finishReason = openAiFinishReason(reason);
        if (chunk.usage) usage = openAiUsage(chunk.usage, request, '');
      }
      // The last chunk carries the finish reason and the usage; without them the stream was cut.
      if (!finishReason || !usage) throw new UpstreamError(PROVIDER, undefined, 'stream ended before its final chunk', true);
      yield { type: 'finish', finishReason };
      yield { type: 'usage', usage };
    },
  };
}
