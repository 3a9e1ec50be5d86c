import { readJson, upstreamEvents, upstreamFetch } from './http.js';
import type { AzureSettings } from './settings.js';
import { UpstreamError, type ChatRequest, type ChatResult, type ChatStreamEvent, type FinishReason, type ProviderAdapter, type ToolCall, type Usage } from './types.js';

/**
 * Azure OpenAI: OpenAI's chat-completions shapes behind a deployment URL,
 * `${endpoint}/openai/deployments/${deployment}/chat/completions?api-version=...`, authenticated
 * by the `api-key` header. The deployment is the request's upstreamModel (Azure deployments are
 * named by whoever created them; the router's upstream id is that name).
 *
 * Streams ask for `stream_options.include_usage`, so the last chunk carries the usage; a stream
 * that ends without it (an api-version older than 2024-09-01-preview) cannot be metered and fails.
 */
const PROVIDER = 'azure';

interface OpenAiUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

interface OpenAiCompletion {
  choices?: Array<{ message?: { content?: string | null; tool_calls?: ToolCall[] }; finish_reason?: string | null }>;
  usage?: OpenAiUsage;
}

interface OpenAiChunk {
  choices?: Array<{ delta?: { content?: string | null; tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }> }; finish_reason?: string | null }>;
  usage?: OpenAiUsage | null;
}

function requestBody(request: ChatRequest, stream: boolean): Record<string, unknown> {
  // cache_control is the gateway's own field (Azure caches prefixes by itself); the rest is OpenAI's shape.
  const messages = request.messages.map(({ cache_control: _ignored, ...message }) => message);
  return {
    messages,
    ...(request.maxTokens !== undefined && { max_tokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop?.length && { stop: request.stop }),
    ...(request.tools?.length && { tools: request.tools }),
    ...(request.toolChoice !== undefined && { tool_choice: request.toolChoice }),
    ...(request.responseFormat && { response_format: request.responseFormat }),
    ...(stream && { stream: true, stream_options: { include_usage: true } }),
  };
}

function finishReasonOf(reason: string | null | undefined): FinishReason {
  if (reason === 'length' || reason === 'tool_calls' || reason === 'content_filter') return reason;
  if (reason === 'function_call') return 'tool_calls';
  return 'stop';
}

function usageOf(usage: OpenAiUsage): Usage {
  const cached = usage.prompt_tokens_details?.cached_tokens;
  return { inputTokens: usage.prompt_tokens ?? 0, outputTokens: usage.completion_tokens ?? 0, ...(cached ? { cacheReadTokens: cached } : {}) };
}

function chatResultOf(completion: OpenAiCompletion): ChatResult {
  const choice = completion.choices?.[0];
  const toolCalls = choice?.message?.tool_calls;
  return {
    content: choice?.message?.content ?? null,
    ...(toolCalls?.length && { toolCalls: toolCalls.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.function.name, arguments: call.function.arguments } })) }),
    finishReason: finishReasonOf(choice?.finish_reason),
    usage: usageOf(completion.usage ?? {}),
  };
}

export function createAzureAdapter(settings: AzureSettings): ProviderAdapter {
  const post = (request: ChatRequest, stream: boolean) =>
    upstreamFetch(PROVIDER, `${settings.endpoint}/openai/deployments/${encodeURIComponent(request.upstreamModel)}/chat/completions?api-version=${encodeURIComponent(settings.apiVersion)}`, {
      method: 'POST',
      headers: { 'api-key': settings.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(requestBody(request, stream)),
      signal: request.signal,
    });

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await post(request, false);
      return chatResultOf(await readJson<OpenAiCompletion>(PROVIDER, response, request.signal));
    },

    async *chatStream(request): AsyncGenerator<ChatStreamEvent> {
      const response = await post(request, true);
      let finishReason: FinishReason | undefined;
      let usage: Usage | undefined;
      let done = false;
      for await (const { data } of upstreamEvents(PROVIDER, response, request.signal)) {
        if (data === '[DONE]') {
          done = true;
          break;
        }
        let chunk: OpenAiChunk;
        try {
          chunk = JSON.parse(data) as OpenAiChunk;
        } catch {
          throw new UpstreamError(PROVIDER, undefined, `malformed stream chunk: ${data.slice(0, 200)}`, true);
        }
        // Azure opens with a chunk of prompt filter results and no choices.
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
      if (!done || !finishReason) throw new UpstreamError(PROVIDER, undefined, 'stream ended before [DONE]', true);
      if (!usage) throw new UpstreamError(PROVIDER, undefined, 'stream ended without usage; use an api-version that supports stream_options (2024-10-21 or later)', false);
      yield { type: 'finish', finishReason };
      yield { type: 'usage', usage };
    },
  };
}
