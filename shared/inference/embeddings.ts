import { z } from 'zod';
import { serviceError } from '../errors.js';
import { CATALOG, embeddingModel, type CatalogModel } from '../models/catalog.js';
import type { ProviderAdapter } from '../providers/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { startUpstreamCall } from './upstream-call.js';
import { costMicros } from './pricing.js';

/**
 * POST /v1/embeddings, up to the provider call: bare model ids (spec 1's nine, default
 * text-embedding-3-small), input limits checked before anything is called or billed, and
 * `dimensions` honoured only where a model can shorten its vectors (text-embedding-3-*).
 */
export const DEFAULT_EMBEDDING_MODEL = 'text-embedding-3-small';
const MAX_INPUTS = 2_048;
const MAX_INPUT_CHARACTERS = 100_000;

export const embeddingsBody = z.object({
  model: z.unknown().optional(),
  input: z.unknown().optional(),
  dimensions: z.unknown().optional(),
  encoding_format: z.enum(['float', 'base64']).optional(),
  user: z.string().optional(),
});

export interface EmbeddingsPlan {
  model: CatalogModel;
  adapter: ProviderAdapter;
  input: string[];
  dimensions: number | undefined;
  encoding: 'float' | 'base64';
}

export type EmbeddingsRequest = z.output<typeof embeddingsBody>;

/** Plans a request parsed by embeddingsBody (the route builder, or a batch line through parseBody). */
export function planEmbeddings(request: EmbeddingsRequest, providers: ProviderRegistry): EmbeddingsPlan {
  const { model: requested, input, dimensions, encoding_format } = request;
  if (requested !== undefined && typeof requested !== 'string') throw serviceError('invalid_embedding_model', { param: 'model' });
  const model = embeddingModel((requested as string | undefined) ?? DEFAULT_EMBEDDING_MODEL);
  if (!model) {
    const known = CATALOG.filter((entry) => entry.kind === 'embedding').map((entry) => entry.model);
    throw serviceError('invalid_embedding_model', { param: 'model', message: `model must be one of: ${known.join(', ')} (bare, or as GET /v1/models lists them, svc:<provider>/<model>).` });
  }

  if (input === undefined || input === '' || (Array.isArray(input) && input.length === 0)) throw serviceError('missing_input', { param: 'input' });
  const inputs = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(inputs) || inputs.some((entry) => typeof entry !== 'string' || entry === '')) throw serviceError('invalid_input', { param: 'input' });
  if (inputs.length > MAX_INPUTS || inputs.some((entry) => (entry as string).length > MAX_INPUT_CHARACTERS)) throw serviceError('input_too_large', { param: 'input' });

  let shortened: number | undefined;
  if (dimensions !== undefined) {
    if (typeof dimensions !== 'number' || !Number.isInteger(dimensions) || dimensions < 1 || dimensions > model.dimensions!) {
      throw serviceError('invalid_dimensions', { param: 'dimensions', message: `dimensions must be an integer from 1 to ${model.dimensions}.` });
    }
    // Honoured only where the model can shorten its vectors; elsewhere the model's own size is returned.
    if (model.shortenable) shortened = dimensions;
  }

  const adapter = providers.adapter(model.provider);
  if (!adapter?.embeddings) throw serviceError('platform_not_configured', { message: `No upstream credentials are configured for ${model.provider} (needed by ${model.model}).` });
  return { model, adapter, input: inputs as string[], dimensions: shortened, encoding: encoding_format ?? 'float' };
}

/** The most an embeddings call can cost: about two characters a token, the pessimistic side. */
export function maxEmbeddingTokens(input: string[]): number {
  return input.reduce((sum, entry) => sum + Math.ceil(Buffer.byteLength(entry) / 2) + 8, 0);
}

/** OpenAI's base64 encoding: the vector's little-endian float32 bytes. */
export function encodeEmbedding(vector: number[], encoding: 'float' | 'base64'): number[] | string {
  if (encoding === 'float') return vector;
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return bytes.toString('base64');
}

export interface CreateEmbeddingsOptions {
  signal: AbortSignal;
  /** Makes the charge idempotent (a batch line run again is never charged twice), e.g. `batch:<id>:<custom_id>`. */
  billingKey?: string;
  /** Multiplies the provider price (batches from 10 requests up pay half). Default 1. */
  priceFactor?: number;
}

/**
 * One embeddings call, reserved and settled like every metered call; the same for POST
 * /v1/embeddings and a batch line. Returns the response body in the OpenAI wire shape.
 */
export async function createEmbeddings(platform: EmbeddingServices, call: MeteredCall, plan: EmbeddingsPlan, options: CreateEmbeddingsOptions) {
  const started = await startEmbeddings(platform, call, plan, options);
  return { body: started.body, ...(await started.settled) };
}

/** createEmbeddings, returning the vectors as soon as the provider answered: the call's settlement runs on (see StartedCall). */
export async function startEmbeddings(platform: EmbeddingServices, call: MeteredCall, plan: EmbeddingsPlan, options: CreateEmbeddingsOptions) {
  const factor = options.priceFactor ?? 1;
  const maxCost = Math.ceil(costMicros(plan.model, { inputTokens: maxEmbeddingTokens(plan.input), outputTokens: 0 }) * factor);
  const started = await startUpstreamCall(platform, call, {
    surface: 'embeddings',
    reserveMicros: maxCost,
    signal: options.signal,
    attempt: () => plan.adapter.embeddings!({ model: plan.model, upstreamModel: plan.model.model, input: plan.input, ...(plan.dimensions && { dimensions: plan.dimensions }), signal: options.signal }),
    meter: (result) => ({ model: plan.model.id, costMicros: Math.round(costMicros(plan.model, { inputTokens: result.usage.inputTokens, outputTokens: 0 }) * factor), tokensIn: result.usage.inputTokens, tokensOut: 0 }),
    ...(options.billingKey && { idempotencyKey: options.billingKey }),
  });
  return {
    body: {
      object: 'list' as const,
      data: started.result.embeddings.map((vector, index) => ({ object: 'embedding' as const, index, embedding: encodeEmbedding(vector, plan.encoding) })),
      model: plan.model.model,
      usage: { prompt_tokens: started.result.usage.inputTokens, total_tokens: started.result.usage.inputTokens },
    },
    settled: started.settled,
  };
}

type EmbeddingServices = Pick<GatewayServices, 'db' | 'config' | 'limiter' | 'meteringTimings' | 'grants'>;
