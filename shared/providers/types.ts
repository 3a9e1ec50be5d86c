import type { CatalogModel } from '../models/catalog.js';
import type { Region } from '../models/refs.js';

/**
 * The one provider interface. The gateway speaks OpenAI's chat-completions shapes at its edge;
 * every adapter turns them into its provider's wire format and back, so routes never see a
 * provider's own shapes. An adapter implements only what its provider offers.
 */

export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

/** An OpenAI-style content part, as the caller sent it (already validated by the route). */
export type ContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string; detail?: string } }
  | { type: 'input_audio'; input_audio: { data: string; format: string } }
  | { type: 'file'; file: { file_data?: string; file_id?: string; filename?: string } };

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: ChatRole;
  content: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  /** Prompt caching (spec 1): a breakpoint after this message. */
  cache_control?: { type: 'ephemeral'; ttl?: '5m' | '1h' };
}

export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export interface ChatRequest {
  /** The resolved catalog model (what is metered); `upstreamModel` is the id the provider expects. */
  model: CatalogModel;
  upstreamModel: string;
  region: Region | undefined;
  messages: ChatMessage[];
  maxTokens: number | undefined;
  temperature?: number;
  topP?: number;
  stop?: string[];
  tools?: ToolDefinition[];
  toolChoice?: unknown;
  responseFormat?: { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; json_schema: { name: string; schema: Record<string, unknown>; strict?: boolean } };
  /** prompt_cache: 'auto' — the provider that supports caching marks the prompt prefix itself. */
  promptCache?: 'auto';
  /** Aborted when the caller disconnects or the deadline passes; the adapter must stop the upstream call. */
  signal: AbortSignal;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Prompt-cache accounting where the provider reports it. */
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
}

export interface ChatResult {
  content: string | null;
  toolCalls?: ToolCall[];
  finishReason: FinishReason;
  usage: Usage;
}

/**
 * What a stream yields, in order: `opened` once, then deltas, then one finish, then one usage
 * (always, last). `opened` says the upstream accepted the call and its first frame arrived without
 * an error, so the gateway opens its own stream then, not one token later; a failure before it is
 * still a plain error response.
 */
export type ChatStreamEvent =
  | { type: 'opened' }
  | { type: 'delta'; content?: string; toolCalls?: Array<{ index: number; id?: string; name?: string; arguments?: string }> }
  | { type: 'finish'; finishReason: FinishReason }
  | { type: 'usage'; usage: Usage };

export const STREAM_OPENED: ChatStreamEvent = Object.freeze({ type: 'opened' });

export interface EmbeddingsRequest {
  model: CatalogModel;
  upstreamModel: string;
  input: string[];
  dimensions?: number;
  signal: AbortSignal;
}

export interface EmbeddingsResult {
  embeddings: number[][];
  usage: { inputTokens: number };
}

export interface ModerationRequest {
  model: CatalogModel;
  upstreamModel: string;
  input: string[];
  signal: AbortSignal;
}

/** One result per input, in the common moderation wire shape (categories and scores by name). */
export interface ModerationResult {
  results: Array<{ flagged: boolean; categories: Record<string, boolean>; category_scores: Record<string, number> }>;
}

export interface RerankRequest {
  model: CatalogModel;
  upstreamModel: string;
  query: string;
  documents: string[];
  topN: number | undefined;
  signal: AbortSignal;
}

/** Documents by their index in the request, most relevant first. */
export interface RerankResult {
  results: Array<{ index: number; relevanceScore: number }>;
}

export interface ImageRequest {
  model: CatalogModel;
  upstreamModel: string;
  prompt: string;
  n: number;
  size?: string;
  signal: AbortSignal;
}

export interface ImageResult {
  images: Array<{ b64Json: string; revisedPrompt?: string }>;
}

export interface SpeechRequest {
  model: CatalogModel;
  upstreamModel: string;
  input: string;
  voice: string;
  format: string;
  signal: AbortSignal;
}

export interface SpeechResult {
  audio: Buffer;
  contentType: string;
}

export interface TranscriptionRequest {
  model: CatalogModel;
  upstreamModel: string;
  audio: Buffer;
  filename: string;
  mimeType: string;
  language?: string;
  prompt?: string;
  signal: AbortSignal;
}

/** Always the detailed form, so the call can be metered by the audio's real duration. */
export interface TranscriptionResult {
  text: string;
  durationSeconds: number;
  language?: string;
  segments: Array<{ start: number; end: number; text: string }>;
}

export interface ProviderAdapter {
  readonly provider: string;
  chat?(request: ChatRequest): Promise<ChatResult>;
  chatStream?(request: ChatRequest): AsyncIterable<ChatStreamEvent>;
  embeddings?(request: EmbeddingsRequest): Promise<EmbeddingsResult>;
  moderate?(request: ModerationRequest): Promise<ModerationResult>;
  rerank?(request: RerankRequest): Promise<RerankResult>;
  generateImages?(request: ImageRequest): Promise<ImageResult>;
  speak?(request: SpeechRequest): Promise<SpeechResult>;
  transcribe?(request: TranscriptionRequest): Promise<TranscriptionResult>;
}

/**
 * A provider failure, normalized. `retryable` marks 429 and 5xx (and network failures), which the
 * gateway retries with backoff within its deadline; anything else goes back to the caller.
 */
export class UpstreamError extends Error {
  constructor(
    readonly provider: string,
    readonly status: number | undefined,
    message: string,
    readonly retryable: boolean,
    readonly retryAfterSeconds?: number,
  ) {
    super(`${provider}: ${message}`);
    this.name = 'UpstreamError';
  }

  static fromStatus(provider: string, status: number, message: string, retryAfterHeader?: string | null): UpstreamError {
    const retryAfter = retryAfterHeader && /^\d+$/.test(retryAfterHeader) ? Number(retryAfterHeader) : undefined;
    return new UpstreamError(provider, status, message, status === 408 || status === 429 || status >= 500, retryAfter);
  }
}
