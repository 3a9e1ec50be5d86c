import { z } from 'zod';
import { pageQuery } from '../pagination.js';
import { withErrorCode } from '../validation.js';
import { chunkingStrategyParam } from './chunking.js';

/**
 * Request shapes of /v1/vector_stores, as OpenAI's vector-store API has them (its published
 * OpenAPI description and the openai SDK's types) plus the spec's own fields (embedding_model,
 * dimensions, encryption, vector_sealing, vector_index, graphrag_enabled, key). A field whose
 * failure has its own code in spec 1 carries it; rules across fields are checked by the domain.
 */
export const ENCRYPTIONS = ['none', 'managed', 'byok'] as const;
export const VECTOR_SEALINGS = ['none', 'source', 'full'] as const;
export const VECTOR_INDEXES = ['auto', 'flat', 'ivf'] as const;

const metadata = z.record(z.string(), z.unknown()).nullable().describe('Up to 16 string values; keys up to 64, values up to 512 characters; 4 KB serialized.');
const expiresAfter = z
  .strictObject({ anchor: z.literal('last_active_at'), days: z.int32().min(1).max(365) })
  .describe('The store expires this many days after it was last active.');

/** Attributes of a file, for filtering: up to 16 keys; values are strings (up to 512 characters), numbers or booleans. */
export const fileAttributes = z
  .record(z.string().min(1).max(64), z.union([z.string().max(512), z.number(), z.boolean()]))
  .refine((attributes) => Object.keys(attributes).length <= 16, 'at most 16 attributes')
  .nullable();

export const chunkingStrategy = chunkingStrategyParam.describe('auto (800 tokens, 400 overlap) or static with max_chunk_size_tokens 100-4096 and chunk_overlap_tokens up to half of it.');

const passphrase = z.string().describe('At least 12 characters. Never stored or logged.');

export const createVectorStoreBody = z.strictObject({
  name: withErrorCode(z.string().min(1), 'invalid_name').optional().describe('Non-empty, at most 256 bytes.'),
  description: z.string().max(512).nullable().optional(),
  embedding_model: withErrorCode(z.string(), 'invalid_embedding_model').optional().describe('Required: one of the nine embedding ids, such as text-embedding-3-small.'),
  dimensions: withErrorCode(z.int32().positive(), 'invalid_dimensions').optional().describe('Shorter vectors, only on text-embedding-3-* models.'),
  encryption: withErrorCode(z.enum(ENCRYPTIONS), 'invalid_encryption').optional(),
  vector_sealing: withErrorCode(z.enum(VECTOR_SEALINGS), 'invalid_vector_sealing').optional().describe('Default full on an encrypted store, none otherwise.'),
  vector_index: withErrorCode(z.enum(VECTOR_INDEXES), 'invalid_vector_index').optional(),
  graphrag_enabled: z.boolean().optional(),
  key: withErrorCode(z.strictObject({ type: z.string(), passphrase: passphrase.optional() }), 'byok_key_required').optional().describe('byok only: {type: "passphrase", passphrase}.'),
  metadata: withErrorCode(metadata, 'invalid_metadata').optional(),
  expires_after: expiresAfter.optional(),
  file_ids: withErrorCode(z.array(z.string()).max(500), 'invalid_file_ids').optional(),
  chunking_strategy: chunkingStrategy.optional(),
});
export type CreateVectorStoreBody = z.output<typeof createVectorStoreBody>;

export const updateVectorStoreBody = z.strictObject({
  name: withErrorCode(z.string().min(1), 'invalid_name').nullable().optional(),
  description: z.string().max(512).nullable().optional(),
  metadata: withErrorCode(metadata, 'invalid_metadata').optional(),
  expires_after: expiresAfter.nullable().optional(),
});
export type UpdateVectorStoreBody = z.output<typeof updateVectorStoreBody>;

/** Store and file lists: 50 by default, 200 at most (spec 1, "Pagination"); OpenAI's `order` and `before`. */
export const vectorStoreListQuery = pageQuery.extend({
  order: z.enum(['asc', 'desc']).optional(),
  before: z.string().optional(),
});

export const fileListQuery = vectorStoreListQuery.extend({
  filter: z.enum(['in_progress', 'completed', 'failed', 'cancelled']).optional(),
});

export const attachFileBody = z.strictObject({
  file_id: withErrorCode(z.string().min(1), 'file_not_found').describe('A file uploaded with POST /v1/files.'),
  attributes: fileAttributes.optional(),
  chunking_strategy: chunkingStrategy.optional(),
});

export const updateFileBody = z.strictObject({ attributes: fileAttributes });

export const fileBatchBody = z.strictObject({
  file_ids: withErrorCode(z.array(z.string().min(1)), 'invalid_file_ids').optional(),
  files: withErrorCode(z.array(attachFileBody), 'invalid_file_ids').optional(),
  attributes: fileAttributes.optional(),
  chunking_strategy: chunkingStrategy.optional(),
});

type ComparisonFilter = { key: string; type: 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte' | 'in' | 'nin'; value: string | number | boolean | Array<string | number> };
export type SearchFilter = ComparisonFilter | { type: 'and' | 'or'; filters: SearchFilter[] };

const comparisonFilter = z.strictObject({
  key: z.string().min(1),
  type: z.enum(['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin']),
  value: z.union([z.string(), z.number(), z.boolean(), z.array(z.union([z.string(), z.number()]))]),
});
export const searchFilter: z.ZodType<SearchFilter> = z.lazy(() =>
  z.union([comparisonFilter, z.strictObject({ type: z.enum(['and', 'or']), filters: z.array(searchFilter).min(1) })]),
);

export const searchBody = z.strictObject({
  query: z.union([z.string().min(1).max(10_000), z.array(z.string().min(1).max(10_000)).min(1).max(10)]).describe('A query, or several whose results are fused.'),
  max_num_results: z.int32().min(1).max(50).optional(),
  filters: searchFilter.optional().describe("OpenAI's comparison (eq, ne, gt, gte, lt, lte, in, nin) and compound (and, or) filters on file attributes."),
  ranking_options: z
    .strictObject({ ranker: z.enum(['none', 'auto', 'default-2024-11-15']).optional(), score_threshold: z.number().min(0).max(1).optional() })
    .optional(),
  rewrite_query: z.boolean().optional().describe('Accepted; the query is searched as written.'),
});
export type SearchBody = z.output<typeof searchBody>;

export const unlockBody = z.strictObject({
  passphrase: withErrorCode(z.string().min(1), 'missing_passphrase').optional(),
  ttl_seconds: z.int32().min(60).max(86_400).optional().describe('How long the lease lasts: 60 s to 24 h, default 1 h.'),
});

export const migrateBody = z.strictObject({
  embedding_model: withErrorCode(z.string(), 'invalid_embedding_model').optional(),
  dimensions: withErrorCode(z.int32().positive(), 'invalid_dimensions').optional(),
});
