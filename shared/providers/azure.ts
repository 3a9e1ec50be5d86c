import { readJson, upstreamFetch } from './http.js';
import { openAiChatBody, openAiChatResult, openAiStreamEvents, type OpenAiCompletion } from './openai-compatible.js';
import type { AzureSettings } from './settings.js';
import type { ChatRequest, ProviderAdapter } from './types.js';

/**
 * Azure OpenAI: OpenAI's chat-completions shapes behind a deployment URL,
 * `${endpoint}/openai/deployments/${deployment}/chat/completions?api-version=...`, authenticated
 * by the `api-key` header. The deployment is the request's upstreamModel (Azure deployments are
 * named by whoever created them; the router's upstream id is that name). The body, result and
 * stream events are the OpenAI-compatible adapter's (openai-compatible.ts); this file is the transport.
 *
 * Streams ask for `stream_options.include_usage`, so the last chunk carries the usage; a stream
 * that ends without it (an api-version older than 2024-09-01-preview) cannot be metered and fails.
 */
const PROVIDER = 'azure';
const STREAM_WITHOUT_USAGE = 'stream ended without usage; use an api-version that supports stream_options (2024-10-21 or later)';

export function createAzureAdapter(settings: AzureSettings): ProviderAdapter {
  const post = (request: ChatRequest, stream: boolean) =>
    upstreamFetch(PROVIDER, `${settings.endpoint}/openai/deployments/${encodeURIComponent(request.upstreamModel)}/chat/completions?api-version=${encodeURIComponent(settings.apiVersion)}`, {
      method: 'POST',
      headers: { 'api-key': settings.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(openAiChatBody(request, stream, 'max_tokens')),
      signal: request.signal,
    });

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await post(request, false);
      return openAiChatResult(PROVIDER, await readJson<OpenAiCompletion>(PROVIDER, response, request.signal), response.status, request);
    },

    async *chatStream(request) {
      // Azure opens with a chunk of prompt filter results and no choices; the shared reader skips it.
      yield* openAiStreamEvents(PROVIDER, await post(request, true), request, { required: STREAM_WITHOUT_USAGE });
    },
  };
}
