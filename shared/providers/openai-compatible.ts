import { networkFailure, parseEventJson, readJson, upstreamEvents, upstreamFetch, type UpstreamResponse } from './http.js';
import type { KeyProviderSettings } from './settings.js';
import {
  STREAM_OPENED,
  UpstreamError,
  type ChatRequest,
  type ChatResult,
  type ChatStreamEvent,
  type EmbeddingsRequest,
  type EmbeddingsResult,
  type ModerationRequest,
  type ModerationResult,
  type ImageRequest,
  type ImageResult,
  type SpeechRequest,
  type SpeechResult,
  type TranscriptionRequest,
  type TranscriptionResult,
  type RerankRequest,
  type RerankResult,
  type FinishReason,
  type ProviderAdapter,
  type ToolCall,
  type Usage,
} from './types.js';

/**
 * The twelve providers that speak OpenAI's chat-completions wire format: one adapter, each with
 * its own base URL and key. The gateway's edge format is the same, so the mapping is thin:
 * strip what only the gateway understands, rename the token limit, read usage back.
 *
 * That mapping (body, result, stream events) is exported for the other transports of the same
 * shapes: Azure OpenAI (azure.ts) and, for results and chunks, watsonx (watsonx.ts).
 */
export interface OpenAiCompletion {
  choices?: Array<{ message?: { content?: string | null; tool_calls?: ToolCall[] }; finish_reason?: string | null }>;
  usage?: OpenAiUsage;
}

export interface OpenAiUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

export interface OpenAiCompletionChunk {
  choices?: Array<{
    delta?: { content?: string | null; tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }> };
    finish_reason?: string | null;
  }>;
  usage?: OpenAiUsage | null;
}

export function createOpenAiCompatibleAdapter(provider: string, settings: KeyProviderSettings): ProviderAdapter {
  const headers = { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json' };
  const post = (path: string, body: unknown, signal: AbortSignal) =>
    upstreamFetch(provider, `${settings.baseUrl}${path}`, { method: 'POST', headers, body: JSON.stringify(body), signal });
  // OpenAI's newer models take max_completion_tokens; the compatible providers take max_tokens.
  const chatBody = (request: ChatRequest, stream: boolean) => ({
    model: request.upstreamModel,
    ...openAiChatBody(request, stream, provider === 'openai' ? 'max_completion_tokens' : 'max_tokens'),
  });

  return {
    provider,

    async chat(request: ChatRequest): Promise<ChatResult> {
      const response = await post('/chat/completions', chatBody(request, false), request.signal);
      return openAiChatResult(provider, await readJson<OpenAiCompletion>(provider, response, request.signal), response.status, request);
    },

    async *chatStream(request: ChatRequest): AsyncGenerator<ChatStreamEvent> {
      const response = await post('/chat/completions', chatBody(request, true), request.signal);
      yield* openAiStreamEvents(provider, response, request, 'estimate');
    },

    async embeddings(request: EmbeddingsRequest): Promise<EmbeddingsResult> {
      const body = { model: request.upstreamModel, input: request.input, encoding_format: 'float', ...(request.dimensions && { dimensions: request.dimensions }) };
      const response = await post('/embeddings', body, request.signal);
      const result = await readJson<{ data: Array<{ index: number; embedding: number[] }>; usage?: { prompt_tokens?: number; total_tokens?: number } }>(provider, response, request.signal);
      const embeddings = [...result.data].sort((a, b) => a.index - b.index).map((item) => item.embedding);
      const inputTokens = result.usage?.prompt_tokens ?? result.usage?.total_tokens ?? estimateTokens(request.input.join(''));
      return { embeddings, usage: { inputTokens } };
    },

    async generateImages(request: ImageRequest): Promise<ImageResult> {
      const body = { model: request.upstreamModel, prompt: request.prompt, n: request.n, ...(request.size && { size: request.size }), response_format: 'b64_json' };
      // gpt-image-1 always answers in base64 and refuses response_format.
      if (request.upstreamModel === 'gpt-image-1') delete (body as { response_format?: string }).response_format;
      const response = await post('/images/generations', body, request.signal);
      const result = await readJson<{ data: Array<{ b64_json?: string; revised_prompt?: string }> }>(provider, response, request.signal);
      return {
        images: result.data.map((image) => {
          if (!image.b64_json) throw new UpstreamError(provider, response.status, 'image without b64_json', true);
          return { b64Json: image.b64_json, ...(image.revised_prompt && { revisedPrompt: image.revised_prompt }) };
        }),
      };
    },

    async speak(request: SpeechRequest): Promise<SpeechResult> {
      const body = { model: request.upstreamModel, input: request.input, voice: request.voice, response_format: request.format };
      const response = await post('/audio/speech', body, request.signal);
      let audio: Buffer;
      try {
        audio = Buffer.from(await response.arrayBuffer());
      } catch (error) {
        throw networkFailure(provider, error, request.signal);
      }
      return { audio, contentType: response.headers.get('content-type') ?? 'application/octet-stream' };
    },

    async transcribe(request: TranscriptionRequest): Promise<TranscriptionResult> {
      const form = new FormData();
      form.set('file', new Blob([request.audio], { type: request.mimeType }), request.filename);
      form.set('model', request.upstreamModel);
      form.set('response_format', 'verbose_json');
      if (request.language) form.set('language', request.language);
      if (request.prompt) form.set('prompt', request.prompt);
      const response = await upstreamFetch(provider, `${settings.baseUrl}/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${settings.apiKey}` }, body: form, signal: request.signal });
      const result = await readJson<{ text: string; duration?: number; language?: string; segments?: Array<{ start: number; end: number; text: string }> }>(provider, response, request.signal);
      if (typeof result.duration !== 'number') throw new UpstreamError(provider, response.status, 'transcription without a duration', true);
      return {
        text: result.text,
        durationSeconds: result.duration,
        ...(result.language && { language: result.language }),
        segments: (result.segments ?? []).map(({ start, end, text }) => ({ start, end, text })),
      };
    },

    /** Voyage's rerank (the one compatible provider that offers it). */
    async rerank(request: RerankRequest): Promise<RerankResult> {
      const body = { model: request.upstreamModel, query: request.query, documents: request.documents, ...(request.topN !== undefined && { top_k: request.topN }), return_documents: false };
      const response = await post('/rerank', body, request.signal);
      const result = await readJson<{ data: Array<{ index: number; relevance_score: number }> }>(provider, response, request.signal);
      return { results: result.data.map((entry) => ({ index: entry.index, relevanceScore: entry.relevance_score })) };
    },

    async moderate(request: ModerationRequest): Promise<ModerationResult> {
      const response = await post('/moderations', { model: request.upstreamModel, input: request.input }, request.signal);
      const result = await readJson<ModerationResult>(provider, response, request.signal);
      return { results: result.results.map(({ flagged, categories, category_scores }) => ({ flagged, categories, category_scores })) };
    },
  };
}

/** A chat-completions body, without `model` (Azure names the deployment in the URL instead). */
export function openAiChatBody(request: ChatRequest, stream: boolean, tokenLimitField: 'max_tokens' | 'max_completion_tokens'): Record<string, unknown> {
  return {
    // cache_control is the gateway's own field (a prompt-cache breakpoint); these providers cache by themselves.
    messages: request.messages.map(({ cache_control: _cacheControl, ...message }) => message),
    ...(request.maxTokens !== undefined && { [tokenLimitField]: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop?.length && { stop: request.stop }),
    ...(request.tools?.length && { tools: request.tools }),
    ...(request.toolChoice !== undefined && { tool_choice: request.toolChoice }),
    ...(request.responseFormat && { response_format: request.responseFormat }),
    ...(stream && { stream: true, stream_options: { include_usage: true } }),
  };
}

/** A completion's first choice as the gateway's result; `status` is the HTTP status it came with. */
export function openAiChatResult(provider: string, completion: OpenAiCompletion, status: number, request: ChatRequest): ChatResult {
  const choice = completion.choices?.[0];
  if (!choice) throw new UpstreamError(provider, status, 'completion without choices', true);
  const content = choice.message?.content ?? null;
  return {
    content,
    ...(choice.message?.tool_calls?.length && { toolCalls: choice.message.tool_calls }),
    finishReason: openAiFinishReason(choice.finish_reason),
    usage: openAiUsage(completion.usage, request, content ?? ''),
  };
}

/**
 * A chat-completions SSE stream (ended by `data: [DONE]`) as the gateway's stream events. A stream
 * without usage is estimated, or, with `{ required: message }`, fails with that message (for an
 * upstream that omits usage only when misconfigured, as Azure with an old api-version).
 */
export async function* openAiStreamEvents(
  provider: string,
  response: UpstreamResponse,
  request: ChatRequest,
  missingUsage: 'estimate' | { required: string },
): AsyncGenerator<ChatStreamEvent> {
  let finish: FinishReason | undefined;
  let usage: Usage | undefined;
  let generated = '';
  let done = false;
  let opened = false;
  for await (const event of upstreamEvents(provider, response, request.signal)) {
    // Read on past the end marker rather than break: leaving the loop before the body has ended
    // destroys it, and with it the keep-alive connection the next call would have reused.
    if (done) continue;
    if (event.data === '[DONE]') {
      done = true;
      continue;
    }
    const chunk = parseEventJson(provider, event.data) as OpenAiCompletionChunk & { error?: { message?: string } };
    if (chunk.error) throw new UpstreamError(provider, undefined, chunk.error.message ?? 'error event in stream', true);
    if (!opened) {
      opened = true;
      yield STREAM_OPENED;
    }
    if (chunk.usage) usage = openAiUsage(chunk.usage, request, '');
    const delta = openAiChunkDelta(chunk);
    if (delta) {
      if (delta.content) generated += delta.content;
      yield delta;
    }
    const reason = chunk.choices?.[0]?.finish_reason;
    if (reason) finish = openAiFinishReason(reason);
  }
  // A stream that stops before its end marker was cut, not finished.
  if (!done || !finish) throw new UpstreamError(provider, undefined, 'stream ended before it finished', true);
  if (!usage && missingUsage !== 'estimate') throw new UpstreamError(provider, undefined, missingUsage.required, false);
  yield { type: 'finish', finishReason: finish };
  yield { type: 'usage', usage: usage ?? openAiUsage(undefined, request, generated) };
}

/** The delta event of one stream chunk's first choice, if it carries content or tool calls. */
export function openAiChunkDelta(chunk: OpenAiCompletionChunk): Extract<ChatStreamEvent, { type: 'delta' }> | undefined {
  const delta = chunk.choices?.[0]?.delta;
  const content = delta?.content ?? undefined;
  const toolCalls = delta?.tool_calls?.map((call) => ({
    index: call.index,
    ...(call.id && { id: call.id }),
    ...(call.function?.name && { name: call.function.name }),
    ...(call.function?.arguments && { arguments: call.function.arguments }),
  }));
  if (!content && !toolCalls?.length) return undefined;
  return { type: 'delta', ...(content && { content }), ...(toolCalls?.length && { toolCalls }) };
}

export function openAiFinishReason(reason: string | null | undefined): FinishReason {
  if (reason === 'length') return 'length';
  if (reason === 'tool_calls' || reason === 'function_call') return 'tool_calls';
  if (reason === 'content_filter') return 'content_filter';
  return 'stop';
}

/**
 * Usage as the provider reports it. A provider that reports none is estimated at four characters
 * per token, so the call is still metered (spec: count with a tokenizer where a provider gives none).
 */
export function openAiUsage(reported: OpenAiUsage | undefined, request: ChatRequest, generated: string): Usage {
  if (reported) {
    const cached = reported.prompt_tokens_details?.cached_tokens;
    return { inputTokens: reported.prompt_tokens ?? 0, outputTokens: reported.completion_tokens ?? 0, ...(cached && { cacheReadTokens: cached }) };
  }
  const prompt = request.messages.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content ?? ''))).join('\n');
  return { inputTokens: estimateTokens(prompt), outputTokens: estimateTokens(generated) };
}

const estimateTokens = (text: string) => (text === '' ? 0 : Math.max(1, Math.ceil(text.length / 4)));
