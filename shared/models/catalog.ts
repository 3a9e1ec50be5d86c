/**
 * The model catalog: every concrete model the gateway can route to, with what it can do and what
 * it costs. A reference always resolves to one of these entries, and its id (`svc:<provider>/<model>`)
 * is what is metered, cached and capability-checked. Prices are integer micro-dollars per million
 * tokens; for the other kinds `inputMicrosPer1M` is the price of one unit: one search (rerank),
 * one image, one minute of audio transcribed, or a million characters spoken.
 *
 * Providers, by wire style (spec 1: 12 + 3 + 4):
 * - chat-completions compatible: openai, groq, together, fireworks, deepseek, mistral, xai,
 *   perplexity, openrouter, cerebras, deepinfra, voyage (embeddings and rerank only);
 * - native: anthropic (prompt caching; the match: families sonnet, opus, haiku), gemini, cohere;
 * - custom transport: bedrock (AWS Signature V4; the "cloud1" region route), vertex (OAuth token
 *   from a service-account key; "cloud2"), azure (deployment URLs, api-key header),
 *   watsonx (IAM token exchanged from an API key).
 */
export type ModelKind = 'chat' | 'embedding' | 'rerank' | 'moderation' | 'image' | 'speech_to_text' | 'text_to_speech';

export interface ModelCapabilities {
  tools?: boolean;
  vision?: boolean;
  json_schema?: boolean;
  audio_input?: boolean;
  pdf?: boolean;
  prompt_cache?: boolean;
}

export interface CatalogModel {
  /** Concrete id, `svc:<provider>/<model>`. */
  id: string;
  provider: string;
  model: string;
  kind: ModelKind;
  /** For match: references: the family and its version (higher is newer). */
  family?: 'sonnet' | 'opus' | 'haiku';
  version?: number;
  capabilities: ModelCapabilities;
  contextTokens?: number;
  maxOutputTokens?: number;
  /** Embeddings: native dimensions, and whether `dimensions` may shorten them. */
  dimensions?: number;
  shortenable?: boolean;
  inputMicrosPer1M: number;
  outputMicrosPer1M: number;
  /** Cloud-native ids of a first-party model on the hyperscaler routes (region suffixes). */
  cloudIds?: { cloud1: string; cloud2: string };
}

const usd = (dollarsPerMillion: number) => Math.round(dollarsPerMillion * 1_000_000);

function chat(provider: string, model: string, input: number, output: number, capabilities: ModelCapabilities, extra: Partial<CatalogModel> = {}): CatalogModel {
  return { id: `svc:${provider}/${model}`, provider, model, kind: 'chat', capabilities, inputMicrosPer1M: usd(input), outputMicrosPer1M: usd(output), ...extra };
}

function other(provider: string, model: string, kind: ModelKind, input: number, output = 0, extra: Partial<CatalogModel> = {}): CatalogModel {
  return { id: `svc:${provider}/${model}`, provider, model, kind, capabilities: {}, inputMicrosPer1M: usd(input), outputMicrosPer1M: usd(output), ...extra };
}

const FULL: ModelCapabilities = { tools: true, vision: true, json_schema: true, pdf: true };
const CLAUDE: ModelCapabilities = { ...FULL, prompt_cache: true };
const TEXT: ModelCapabilities = { tools: true, json_schema: true };

function claude(
  model: string,
  family: 'sonnet' | 'opus' | 'haiku',
  version: number,
  input: number,
  output: number,
  maxOutputTokens: number,
  cloud1: string,
  cloud2: string,
): CatalogModel {
  return chat('anthropic', model, input, output, CLAUDE, { family, version, contextTokens: 200_000, maxOutputTokens, cloudIds: { cloud1, cloud2 } });
}

export const CATALOG: readonly CatalogModel[] = [
  // anthropic: the match: families, oldest first within each.
  claude('claude-3-haiku-20240307', 'haiku', 3, 0.25, 1.25, 4_096, 'anthropic.claude-3-haiku-20240307-v1:0', 'claude-3-haiku@20240307'),
  claude('claude-3-5-haiku-20241022', 'haiku', 3.5, 0.8, 4, 8_192, 'anthropic.claude-3-5-haiku-20241022-v1:0', 'claude-3-5-haiku@20241022'),
  claude('claude-haiku-4-5-20251001', 'haiku', 4.5, 1, 5, 64_000, 'anthropic.claude-haiku-4-5-20251001-v1:0', 'claude-haiku-4-5@20251001'),
  claude('claude-3-7-sonnet-20250219', 'sonnet', 3.7, 3, 15, 64_000, 'anthropic.claude-3-7-sonnet-20250219-v1:0', 'claude-3-7-sonnet@20250219'),
  claude('claude-sonnet-4-20250514', 'sonnet', 4, 3, 15, 64_000, 'anthropic.claude-sonnet-4-20250514-v1:0', 'claude-sonnet-4@20250514'),
  claude('claude-sonnet-4-5-20250929', 'sonnet', 4.5, 3, 15, 64_000, 'anthropic.claude-sonnet-4-5-20250929-v1:0', 'claude-sonnet-4-5@20250929'),
  claude('claude-opus-4-20250514', 'opus', 4, 15, 75, 32_000, 'anthropic.claude-opus-4-20250514-v1:0', 'claude-opus-4@20250514'),
  claude('claude-opus-4-1-20250805', 'opus', 4.1, 15, 75, 32_000, 'anthropic.claude-opus-4-1-20250805-v1:0', 'claude-opus-4-1@20250805'),

  chat('openai', 'gpt-4o', 2.5, 10, { ...FULL, audio_input: false }, { contextTokens: 128_000, maxOutputTokens: 16_384 }),
  chat('openai', 'gpt-4o-mini', 0.15, 0.6, FULL, { contextTokens: 128_000, maxOutputTokens: 16_384 }),
  chat('openai', 'gpt-4.1', 2, 8, FULL, { contextTokens: 1_047_576, maxOutputTokens: 32_768 }),
  chat('openai', 'gpt-4o-audio-preview', 2.5, 10, { tools: true, audio_input: true }, { contextTokens: 128_000, maxOutputTokens: 16_384 }),
  chat('groq', 'llama-3.3-70b-versatile', 0.59, 0.79, TEXT, { contextTokens: 131_072, maxOutputTokens: 32_768 }),
  chat('together', 'meta-llama/Llama-3.3-70B-Instruct-Turbo', 0.88, 0.88, TEXT, { contextTokens: 131_072, maxOutputTokens: 8_192 }),
  chat('fireworks', 'accounts/fireworks/models/llama-v3p1-8b-instruct', 0.2, 0.2, TEXT, { contextTokens: 131_072, maxOutputTokens: 8_192 }),
  chat('deepseek', 'deepseek-chat', 0.27, 1.1, TEXT, { contextTokens: 65_536, maxOutputTokens: 8_192 }),
  chat('mistral', 'mistral-large-latest', 2, 6, { tools: true, json_schema: true }, { contextTokens: 131_072, maxOutputTokens: 8_192 }),
  chat('mistral', 'mistral-small-latest', 0.2, 0.6, { tools: true, json_schema: true, vision: true }, { contextTokens: 131_072, maxOutputTokens: 8_192 }),
  chat('xai', 'grok-3', 3, 15, TEXT, { contextTokens: 131_072, maxOutputTokens: 16_384 }),
  chat('perplexity', 'sonar', 1, 1, { json_schema: true }, { contextTokens: 127_072, maxOutputTokens: 8_192 }),
  chat('openrouter', 'openai/gpt-4o-mini', 0.15, 0.6, FULL, { contextTokens: 128_000, maxOutputTokens: 16_384 }),
  chat('cerebras', 'llama3.1-8b', 0.1, 0.1, TEXT, { contextTokens: 8_192, maxOutputTokens: 8_192 }),
  chat('deepinfra', 'meta-llama/Meta-Llama-3.1-8B-Instruct', 0.03, 0.05, TEXT, { contextTokens: 131_072, maxOutputTokens: 8_192 }),
  chat('gemini', 'gemini-2.0-flash', 0.1, 0.4, FULL, { contextTokens: 1_048_576, maxOutputTokens: 8_192 }),
  chat('cohere', 'command-r-plus', 2.5, 10, TEXT, { contextTokens: 128_000, maxOutputTokens: 4_096 }),
  chat('bedrock', 'amazon.nova-pro-v1:0', 0.8, 3.2, { tools: true, vision: true }, { contextTokens: 300_000, maxOutputTokens: 5_120 }),
  chat('vertex', 'gemini-2.0-flash', 0.15, 0.6, FULL, { contextTokens: 1_048_576, maxOutputTokens: 8_192 }),
  chat('azure', 'gpt-4o', 2.5, 10, FULL, { contextTokens: 128_000, maxOutputTokens: 16_384 }),
  chat('watsonx', 'ibm/granite-3-8b-instruct', 0.2, 0.2, { tools: true }, { contextTokens: 128_000, maxOutputTokens: 8_192 }),

  // The nine embedding models of spec 1, by bare id.
  other('openai', 'text-embedding-3-small', 'embedding', 0.02, 0, { dimensions: 1536, shortenable: true }),
  other('openai', 'text-embedding-3-large', 'embedding', 0.13, 0, { dimensions: 3072, shortenable: true }),
  other('openai', 'text-embedding-ada-002', 'embedding', 0.1, 0, { dimensions: 1536 }),
  other('cohere', 'embed-english-v3.0', 'embedding', 0.1, 0, { dimensions: 1024 }),
  other('cohere', 'embed-multilingual-v3.0', 'embedding', 0.1, 0, { dimensions: 1024 }),
  other('voyage', 'voyage-3-large', 'embedding', 0.18, 0, { dimensions: 1024 }),
  other('voyage', 'voyage-3-lite', 'embedding', 0.02, 0, { dimensions: 512 }),
  other('mistral', 'mistral-embed', 'embedding', 0.1, 0, { dimensions: 1024 }),
  other('gemini', 'text-embedding-004', 'embedding', 0.025, 0, { dimensions: 768 }),

  // The four rerank references: USD per search unit (one call).
  other('cohere', 'rerank-v3.5', 'rerank', 0.002),
  other('cohere', 'rerank-multilingual-v3.0', 'rerank', 0.002),
  other('voyage', 'rerank-2', 'rerank', 0.0005),
  other('voyage', 'rerank-2-lite', 'rerank', 0.0002),

  other('openai', 'omni-moderation-latest', 'moderation', 0),

  // Media: images to three providers, speech-to-text to two, text-to-speech to two.
  other('openai', 'gpt-image-1', 'image', 0.04),
  other('together', 'black-forest-labs/FLUX.1-schnell', 'image', 0.003),
  other('xai', 'grok-2-image', 'image', 0.07),
  other('openai', 'whisper-1', 'speech_to_text', 0.006),
  other('groq', 'whisper-large-v3', 'speech_to_text', 0.00185),
  other('openai', 'tts-1', 'text_to_speech', 15),
  other('groq', 'playai-tts', 'text_to_speech', 50),
];

const BY_ID = new Map(CATALOG.map((model) => [model.id, model]));

export function catalogModel(id: string): CatalogModel | undefined {
  return BY_ID.get(id);
}

/**
 * An embedding model by any id the catalogue shows for it: the bare id of spec 1
 * (text-embedding-3-small, the default; some carry a slash, BAAI/bge-...), the provider's
 * (openai/text-embedding-3-small) or GET /v1/models' own (svc:openai/text-embedding-3-small).
 */
export function embeddingModel(id: string): CatalogModel | undefined {
  const model = CATALOG.find((entry) => entry.kind === 'embedding' && entry.model === id) ?? BY_ID.get(`svc:${id.replace(/^svc:/, '')}`);
  return model?.kind === 'embedding' ? model : undefined;
}

/** Where the refusal of an unknown embedding model points. */
export const EMBEDDING_MODEL_HINT = 'Use an embedding model of GET /v1/models, by its id (svc:openai/text-embedding-3-small) or its bare name (text-embedding-3-small).';

/** The one provider whose models form the match: families and answer the @eu / @us suffixes. */
export const FIRST_PARTY_PROVIDER = 'anthropic';
