import { z } from 'zod';
import { INT32_MAX, instant, withErrorCode } from '../validation.js';
import { memoryPolicyPatch } from './policy.js';

/** Request shapes of /v1/brains (spec 2). Rules across fields and against the brain are checked by the domain. */
export const BRAIN_ENCRYPTIONS = ['none', 'standard', 'strict'] as const;
export const ENTRY_CLASSES = ['reference', 'memory', 'policy'] as const;
export const TRUST_LEVELS = ['high', 'low'] as const;

/** A scope path: `/` or `/segment/segment...`, segments of letters, digits, `_`, `-` and `.`. */
export const SCOPE_PATH = /^\/$|^(\/[A-Za-z0-9_.-]{1,128}){1,32}$/;
export const scopePath = withErrorCode(z.string().max(1_024).regex(SCOPE_PATH, 'a path such as / or /team/project: segments of letters, digits, _, - and .'), 'invalid_brain_scope');

/** An offset page's start, from the query string: it reaches SQL, so it is bounded as request integers are (shared/validation.ts). */
const pageOffset = z.coerce.number().int().min(0).max(INT32_MAX).optional();

export const createBrainBody = z.strictObject({
  name: z.string().trim().min(1).max(256),
  encryption: withErrorCode(z.enum(BRAIN_ENCRYPTIONS), 'invalid_encryption').optional(),
  embedding_model: withErrorCode(z.string().min(1), 'invalid_embedding_model').optional().describe('Any embedding id of the catalog, with or without its provider prefix; default openai/text-embedding-3-small.'),
  memory_policy: memoryPolicyPatch.optional().describe('Partial; merged over the defaults.'),
});

export const updateBrainBody = z.strictObject({
  name: z.string().trim().min(1).max(256).optional(),
  encryption: withErrorCode(z.enum(BRAIN_ENCRYPTIONS), 'invalid_encryption').optional().describe('Only while the brain has no entries.'),
  memory_policy: memoryPolicyPatch.optional().describe('Partial; merged over the current policy.'),
});

export const brainListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).optional(),
  offset: pageOffset,
});

const entryId = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'letters, digits, _ . : and -, up to 128 characters');

/** The write fields of an entry; `body` is measured in bytes by the domain (413 entry_too_large past 100 MB). */
export const putEntryBody = z.strictObject({
  entry_id: entryId.optional(),
  scope: scopePath.optional(),
  class: z.enum(ENTRY_CLASSES).optional(),
  type: z.string().min(1).max(64).nullable().optional(),
  title: z.string().max(1_024).nullable().optional(),
  body: z.string().min(1),
  trust: z.enum(TRUST_LEVELS).optional(),
  user: z.string().min(1).max(256).optional().describe('Bills the embedding to this customer (as Svc-Customer).'),
});

export const patchEntryBody = z.strictObject({
  scope: scopePath.optional(),
  class: z.enum(ENTRY_CLASSES).optional(),
  type: z.string().min(1).max(64).nullable().optional(),
  title: z.string().max(1_024).nullable().optional(),
  body: z.string().min(1).optional(),
  trust: z.enum(TRUST_LEVELS).optional(),
  user: z.string().min(1).max(256).optional(),
});

export const entryListQuery = z.strictObject({
  scope: scopePath.optional(),
  class: z.enum(ENTRY_CLASSES).optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  offset: pageOffset,
});

export const scopeListQuery = z.strictObject({
  scope: scopePath,
  limit: z.coerce.number().int().min(1).max(500).optional(),
  offset: pageOffset,
});

export const entityListQuery = z.strictObject({
  scope: scopePath.describe('Entities at or below this scope.'),
  name: z.string().min(1).max(256).optional().describe('Exact lookup, after normalisation (case, whitespace, leading article, possessive), by name or alias.'),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  offset: pageOffset,
});

export const recallBody = z.strictObject({
  query: z.string().min(1).max(100_000),
  scope: scopePath.optional(),
  top_k: z.int32().min(1).optional().describe('Default 8; above 100 is clamped to 100.'),
  min_score: z.number().min(0).max(1).optional(),
  classes: z.array(z.enum(ENTRY_CLASSES)).min(1).optional(),
  types: z.array(z.string().min(1).max(64)).min(1).max(64).optional(),
  inherit: z.boolean().optional(),
  subtree: z.boolean().optional(),
  explain: z.boolean().optional(),
  explain_misses: z.boolean().optional(),
  misses_top_k: z.int32().min(1).optional().describe('Default top_k; above 100 is clamped to 100.'),
  as_of: instant().optional(),
  user: z.string().min(1).max(256).optional(),
});

/** Exactly one of scope, source and entity (checked by the domain, which names the rule). */
export const forgetBody = z.strictObject({
  scope: scopePath.optional().describe('Erases the entries of this scope and every scope beneath it.'),
  source: z.string().min(1).max(1_024).optional().describe('Erases the entries learned from this provenance source.'),
  entity: z.string().min(1).max(128).optional().describe('An entity id (bent_...) or name (normalised, every scope): erases the entity, its edges and its linked entries.'),
  dry_run: z.boolean().optional().describe('Counts what would be erased and returns a preview_token; erases nothing.'),
  preview_token: z.string().min(1).max(128).optional().describe("A dry run's token: the erase runs only if the set it named is unchanged, else 409 preview_stale."),
});

export const reindexBody = z.strictObject({
  embedding_model: withErrorCode(z.string().min(1), 'invalid_embedding_model').describe('The embedding id to move to, with or without its provider prefix.'),
  confirm: z.boolean().optional().describe('Without it, the estimate only (estimated_cost_usd, native_chunks); with true, the job starts (201).'),
  user: z.string().min(1).max(256).optional().describe("Bills the job's embeddings to this customer (as Svc-Customer)."),
});

/** The ambient headers of a chat completion (read lower-cased); Brain itself is any string: an unknown id fails open. */
export const ambientBrainHeaders = z.object({
  brain: z.string().trim().min(1).max(256).describe('A brain to recall before the turn (developer keys only; an unknown id fails open).'),
  'brain-scope': scopePath.default('/').describe('The scope to recall (and learn) at.'),
  'brain-trust': z.enum(TRUST_LEVELS).default('high').describe('The trust learning gives what it takes from the turn.'),
  'brain-subtree': z.enum(['true', 'false']).default('false').describe('true also recalls every scope beneath.'),
  'brain-learn': z.enum(['true', 'false']).default('true').describe('false recalls without learning.'),
});

export const observeBody = z.strictObject({
  transcript: z.string().min(1).max(1_000_000).describe('Lines of "user: ..." and "assistant: ...".'),
  scope: scopePath.optional(),
  trust: z.enum(TRUST_LEVELS).optional().describe('low for external or tool-derived content: it never overwrites high-trust memory.'),
  source: z.string().min(1).max(1_024).optional().describe('Provenance given to what this turn teaches (forget by source); default observe.'),
  wait: z.boolean().optional().describe('true answers with the outcome once the pass ends (else 202 while it learns).'),
  user: z.string().min(1).max(256).optional().describe("Bills the pass's model calls to this customer (as Svc-Customer)."),
});

export const observeQuery = z.strictObject({ wait: z.enum(['true', 'false']).optional() });

export const reviewListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).optional(),
  offset: pageOffset,
});

export const proposalDecisionBody = z.strictObject({
  proposal_id: z.string().min(1).max(64),
  action: z.enum(['approve', 'reject']),
  user: z.string().min(1).max(256).optional().describe("Bills an approval's embedding to this customer."),
});

export const conflictResolutionBody = z.strictObject({
  conflict_id: z.string().min(1).max(64),
  resolution: z.enum(['keep_existing', 'accept_incoming']).optional().describe('keep_existing (default) leaves the memory; accept_incoming makes the incoming statement its next version.'),
  user: z.string().min(1).max(256).optional(),
});

export const autotuneBody = z.strictObject({ action: z.enum(['freeze', 'reset']) });

export const PACK_VISIBILITIES = ['private', 'org', 'unlisted', 'public'] as const;

export const publishBody = z.strictObject({
  name: z.string().trim().min(1).max(256).optional().describe("Default the source brain's name; used only when the first publish creates the pack."),
  slug: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'lowercase letters, digits and -, up to 64 characters').optional().describe('Unique across your packs; derived from the name if omitted; set only at creation.'),
  visibility: withErrorCode(z.enum(PACK_VISIBILITIES), 'invalid_visibility').optional().describe('private (default); the others are reserved and behave as private.'),
  notes: z.string().max(10_000).optional().describe("This version's changelog."),
  encryption_at_publish: withErrorCode(z.enum(BRAIN_ENCRYPTIONS), 'invalid_encryption').optional().describe("Default the source brain's encryption; set only at creation."),
  declassify: z.boolean().optional().describe('Must be true to publish a sealed brain into a plaintext (none) pack.'),
});

export const packListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).optional(),
  offset: pageOffset,
});

export const grantBody = z.strictObject({
  account_id: z.string().max(64).optional().describe('The account (user id) to share the pack with.'),
});

export const MOUNT_MODES = ['reference', 'materialize'] as const;
const mountVersion = withErrorCode(z.int32().positive(), 'invalid_version');
const mountScope = z.string().max(1_024).regex(SCOPE_PATH);

export const mountBody = z.strictObject({
  pack_id: withErrorCode(z.string().min(1).max(64), 'missing_pack_id').describe('A pack you own, or hold through a grant (materialize only).'),
  mode: withErrorCode(z.enum(MOUNT_MODES), 'invalid_mode').optional().describe('reference (default): read the version where it lies, no copy (plaintext packs of your own account); materialize: a copy re-sealed under the brain’s key.'),
  version: mountVersion.optional().describe("Default the pack's latest; a ready version."),
  follow_latest: z.boolean().optional().describe('true: a new version of the pack moves the mount to it (default false).'),
  scope_map: withErrorCode(z.record(mountScope, mountScope).refine((map) => Object.keys(map).length > 0, 'at least one source path'), 'invalid_scope_map')
    .optional()
    .describe('Source scope path to target scope path, by longest prefix; scopes no source path covers are not mounted. Default {"/": "/"}.'),
});

export const patchMountBody = z.strictObject({
  version: mountVersion.optional().describe('Re-points a reference mount, or re-materializes a materialize mount, at this ready version.'),
  follow_latest: z.boolean().optional(),
});
