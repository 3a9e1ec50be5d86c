import { readJson, upstreamEvents, upstreamFetch } from './http.js';
import type { KeyProviderSettings } from './settings.js';
import {
  UpstreamError,
  type ChatRequest,
  type ChatResult,
  type ChatStreamEvent,
  type EmbeddingsRequest,
  type EmbeddingsResult,
  type FinishReason,
  type ProviderAdapter,
  type ToolCall,
  type Usage,
} from './types.js';

/**
 * The twelve providers that speak OpenAI's chat-completions wire format: one adapter, each with
 * its own base URL and key. The gateway's edge format is the same, so the mapping is thin:
 * strip what only the gateway understands, rename the token limit, read usage back.
 */
interface CompletionResponse {
  choices: Array<{ message: { content: string | null; tool_calls?: ToolCall[] }; finish_reason: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
}

interface CompletionChunk {
  choices: Array<{
    delta?: { content?: string | null; tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }> };
    finish_reason?: string | null;
  }>;
  usage?: CompletionResponse['usage'] | null;
}

export function createOpenAiCompatibleAdapter(provider: string, settings: KeyProviderSettings): ProviderAdapter {
  const headers = { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json' };
  const post = (path: string, body: unknown, signal: AbortSignal) =>
    upstreamFetch(provider, `${settings.baseUrl}${path}`, { method: 'POST', headers, body: JSON.stringify(body), signal });

  return {
    provider,

    async chat(request: ChatRequest): Promise<ChatResult> {
      const response = await post('/chat/completions', chatBody(provider, request, false), request.signal);
      const completion = await readJson<CompletionResponse>(provider, response, request.signal);
      const choice = completion.choices[0];
      if (!choice) throw new UpstreamError(provider, response.status, 'completion without choices', true);
      return {
        content: choice.message.content,
        ...(choice.message.tool_calls?.length && { toolCalls: choice.message.tool_calls }),
        finishReason: finishReason(choice.finish_reason),
        usage: usageOf(completion.usage, request, choice.message.content ?? ''),
      };
    },

    async *chatStream(request: ChatRequest): AsyncGenerator<ChatStreamEvent> {
      const response = await post('/chat/completions', chatBody(provider, request, true), request.signal);
      let finish: FinishReason | undefined;
      let usage: Usage | undefined;
      let generated = '';
      let done = false;
      for await (const event of upstreamEvents(provider, response, request.signal)) {
        if (event.data === '[DONE]') {
          done = true;
          break;
        }
        const chunk = JSON.parse(event.data) as CompletionChunk & { error?: { message?: string } };
        if (chunk.error) throw new UpstreamError(provider, undefined, chunk.error.message ?? 'error event in stream', true);
        if (chunk.usage) usage = usageOf(chunk.usage, request, '');
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        const content = choice.delta?.content ?? undefined;
        const toolCalls = choice.delta?.tool_calls?.map((call) => ({
          index: call.index,
          ...(call.id && { id: call.id }),
          ...(call.function?.name && { name: call.function.name }),
          ...(call.function?.arguments && { arguments: call.function.arguments }),
        }));
        if (content || toolCalls?.length) {
          if (content) generated += content;
          yield { type: 'delta', ...(content && { content }), ...(toolCalls?.length && { toolCalls }) };
        }
        if (choice.finish_reason) finish = finishReason(choice.finish_reason);
      }
      // A stream that stops before its end marker was cut, not finished.
      if (!done || !finish) throw new UpstreamError(provider, undefined, 'stream ended before it finished', true);
      yield { type: 'finish', finishReason: finish };
      yield { type: 'usage', usage: usage ?? usageOf(undefined, request, generated) };
    },

    async embeddings(request: EmbeddingsRequest): Promise<EmbeddingsResult> {
      const body = { model: request.upstreamModel, input: request.input, encoding_format: 'float', ...(request.dimensions && { dimensions: request.dimensions }) };
      const response = await post('/embeddings', body, request.signal);
      const result = await readJson<{ data: Array<{ index: number; embedding: number[] }>; usage?: { prompt_tokens?: number; total_tokens?: number } }>(provider, response, request.signal);
      const embeddings = [...result.data].sort((a, b) => a.index - b.index).map((item) => item.embedding);
      const inputTokens = result.usage?.prompt_tokens ?? result.usage?.total_tokens ?? estimateTokens(request.input.join(''));
      return { embeddings, usage: { inputTokens } };
    },
  };
}

function chatBody(provider: string, request: ChatRequest, stream: boolean): Record<string, unknown> {
  return {
    model: request.upstreamModel,
    // cache_control is the gateway's own field (a prompt-cache breakpoint); these providers cache by themselves.
    messages: request.messages.map(({ cache_control: _cacheControl, ...message }) => message),
    // OpenAI's newer models take max_completion_tokens; the compatible providers take max_tokens.
    ...(request.maxTokens !== undefined && (provider === 'openai' ? { max_completion_tokens: request.maxTokens } : { max_tokens: request.maxTokens })),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop?.length && { stop: request.stop }),
    ...(request.tools?.length && { tools: request.tools }),
    ...(request.toolChoice !== undefined && { tool_choice: request.toolChoice }),
    ...(request.responseFormat && { response_format: request.responseFormat }),
    ...(stream && { stream: true, stream_options: { include_usage: true } }),
  };
}

function finishReason(reason: string | null | undefined): FinishReason {
  if (reason === 'length') return 'length';
  if (reason === 'tool_calls' || reason === 'function_call') return 'tool_calls';
  if (reason === 'content_filter') return 'content_filter';
  return 'stop';
}

/**
 * Usage as the provider reports it. A provider that reports none is estimated at four characters
 * per token, so the call is still metered (spec: count with a tokenizer where a provider gives none).
 */
function usageOf(reported: CompletionResponse['usage'] | undefined, request: ChatRequest, generated: string): Usage {
  if (reported) {
    const cached = reported.prompt_tokens_details?.cached_tokens;
    return { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens, ...(cached && { cacheReadTokens: cached }) };
  }
  const prompt = request.messages.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content ?? ''))).join('\n');
  return { inputTokens: estimateTokens(prompt), outputTokens: estimateTokens(generated) };
}

const estimateTokens = (text: string) => (text === '' ? 0 : Math.max(1, Math.ceil(text.length / 4)));
