import type { Queryable } from '../db/pool.js';
import type { EntryRow } from './repository.js';

/** SQL of learning: learn passes, proposals, conflicts, use counts, autotune (migrations/024_brain_learning.sql). */

export interface LearnPassRow {
  id: string;
  brain_id: string;
  developer_id: string;
  payer_account_id: string;
  customer_id: string | null;
  origin: 'observe' | 'ambient';
  scope: string;
  trust: 'high' | 'low';
  source: string;
  transcript: Buffer;
  extracted: Buffer | null;
  status: 'learning' | 'completed' | 'skipped' | 'failed';
  recalled: string[];
  recalled_tiers: string[];
  recalled_scores: number[];
  used: string[];
  cost_micros: string;
  result: Record<string, unknown> | null;
  created_at: Date;
  completed_at: Date | null;
}

export type NewLearnPass = Pick<LearnPassRow, 'id' | 'brain_id' | 'developer_id' | 'payer_account_id' | 'customer_id' | 'origin' | 'scope' | 'trust' | 'source' | 'transcript' | 'recalled' | 'recalled_tiers' | 'recalled_scores'>;

/** A pass once: a retried observe (same id) finds the row its first attempt made. */
export async function insertLearnPass(q: Queryable, pass: NewLearnPass): Promise<boolean> {
  const { rowCount } = await q.query(
    `INSERT INTO brain_learn_passes (id, brain_id, developer_id, payer_account_id, customer_id, origin, scope, trust, source, transcript, recalled, recalled_tiers, recalled_scores)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO NOTHING`,
    [pass.id, pass.brain_id, pass.developer_id, pass.payer_account_id, pass.customer_id, pass.origin, pass.scope, pass.trust, pass.source, pass.transcript, pass.recalled, pass.recalled_tiers, pass.recalled_scores],
  );
  return rowCount === 1;
}

export async function findLearnPass(q: Queryable, id: string, lock?: 'update'): Promise<LearnPassRow | undefined> {
  const { rows } = await q.query<LearnPassRow>(`SELECT * FROM brain_learn_passes WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0];
}

export async function recordExtraction(q: Queryable, id: string, fields: { extracted: Buffer; recalled: string[]; recalled_tiers: string[]; recalled_scores: number[]; used: string[]; costMicros: number }): Promise<void> {
  await q.query(
    `UPDATE brain_learn_passes SET extracted = $2, recalled = $3, recalled_tiers = $4, recalled_scores = $5, used = $6, cost_micros = cost_micros + $7 WHERE id = $1 AND extracted IS NULL`,
    [id, fields.extracted, fields.recalled, fields.recalled_tiers, fields.recalled_scores, fields.used, fields.costMicros],
  );
}

export async function finishLearnPass(q: Queryable, id: string, status: 'completed' | 'skipped' | 'failed', result: Record<string, unknown>, addedCostMicros = 0): Promise<void> {
  await q.query(
    `UPDATE brain_learn_passes SET status = $2, result = $3, cost_micros = cost_micros + $4, completed_at = now() WHERE id = $1`,
    [id, status, JSON.stringify(result), addedCostMicros],
  );
}

/** The brain's most recent completed passes that recalled something: autotune's history. */
export async function recentRecallHistory(q: Queryable, brainId: string, limit: number): Promise<Pick<LearnPassRow, 'recalled' | 'recalled_tiers' | 'recalled_scores' | 'used'>[]> {
  const { rows } = await q.query(
    `SELECT recalled, recalled_tiers, recalled_scores, used FROM brain_learn_passes
     WHERE brain_id = $1 AND status = 'completed' AND cardinality(recalled) > 0 ORDER BY completed_at DESC LIMIT $2`,
    [brainId, limit],
  );
  return rows;
}

/** Current native memories of one scope (the learn pass matches candidates against them). */
export async function memoriesOfScope(q: Queryable, brainId: string, scope: string): Promise<EntryRow[]> {
  const { rows } = await q.query<EntryRow>(
    `SELECT * FROM brain_entries WHERE brain_id = $1 AND scope = $2 AND valid_to IS NULL AND class = 'memory' AND origin = 'native' ORDER BY created_at, entry_id`,
    [brainId, scope],
  );
  return rows;
}

export async function countMemoriesOfScope(q: Queryable, brainId: string, scope: string): Promise<number> {
  const { rows } = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM brain_entries WHERE brain_id = $1 AND scope = $2 AND valid_to IS NULL AND class = 'memory' AND origin = 'native'`,
    [brainId, scope],
  );
  return rows[0]!.n;
}

/** Moves the links of superseded entries to the entry that replaced them (consolidation). */
export async function moveEntityLinks(q: Queryable, brainId: string, fromEntryIds: string[], toEntryId: string): Promise<void> {
  await q.query(
    `INSERT INTO brain_entity_links (brain_id, entity_id, entry_id)
     SELECT DISTINCT brain_id, entity_id, $3 FROM brain_entity_links WHERE brain_id = $1 AND entry_id = ANY($2) ON CONFLICT DO NOTHING`,
    [brainId, fromEntryIds, toEntryId],
  );
  await q.query(`DELETE FROM brain_entity_links WHERE brain_id = $1 AND entry_id = ANY($2)`, [brainId, fromEntryIds]);
}

/**
 * One use of each memory the answer used: the count and the time move on the current version in
 * place (use is not content, so no new version), and the brain's usage_seq moves with them, each
 * version used marked with the new value (used_seq), so that a cache of the brain's rows as of an
 * older one reads only what moved since (versionsUsedSince). One statement, the brain's row
 * locked before its entries' (as writers lock them), so the sequence and the marks move together
 * whether or not the caller holds a transaction.
 */
export async function countUses(q: Queryable, brainId: string, entryIds: string[]): Promise<number> {
  if (entryIds.length === 0) return 0;
  const { rowCount } = await q.query(
    `WITH bumped AS (
       UPDATE brains SET usage_seq = usage_seq + 1
       WHERE id = $1 AND EXISTS (SELECT 1 FROM brain_entries WHERE brain_id = $1 AND entry_id = ANY($2) AND valid_to IS NULL AND origin = 'native')
       RETURNING usage_seq
     )
     UPDATE brain_entries e SET use_count = e.use_count + 1, last_used = now(), used_seq = bumped.usage_seq
     FROM bumped WHERE e.brain_id = $1 AND e.entry_id = ANY($2) AND e.valid_to IS NULL AND e.origin = 'native'`,
    [brainId, entryIds],
  );
  return rowCount ?? 0;
}

export interface ProposalRow {
  id: string;
  brain_id: string;
  pass_id: string;
  scope: string;
  action: 'add' | 'refine';
  target_entry_id: string | null;
  reason: 'review' | 'low_trust';
  candidate: Buffer;
  status: 'pending' | 'approved' | 'rejected';
  created_at: Date;
  decided_at: Date | null;
}

export async function insertProposal(q: Queryable, proposal: Pick<ProposalRow, 'id' | 'brain_id' | 'pass_id' | 'scope' | 'action' | 'target_entry_id' | 'reason' | 'candidate'>): Promise<void> {
  await q.query(
    `INSERT INTO brain_proposals (id, brain_id, pass_id, scope, action, target_entry_id, reason, candidate) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [proposal.id, proposal.brain_id, proposal.pass_id, proposal.scope, proposal.action, proposal.target_entry_id, proposal.reason, proposal.candidate],
  );
}

export async function pendingProposals(q: Queryable, brainId: string, limit: number, offset: number): Promise<ProposalRow[]> {
  const { rows } = await q.query<ProposalRow>(
    `SELECT * FROM brain_proposals WHERE brain_id = $1 AND status = 'pending' ORDER BY created_at, id LIMIT $2 OFFSET $3`,
    [brainId, limit + 1, offset],
  );
  return rows;
}

export async function findProposal(q: Queryable, brainId: string, id: string, lock?: 'update'): Promise<ProposalRow | undefined> {
  const { rows } = await q.query<ProposalRow>(`SELECT * FROM brain_proposals WHERE brain_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`, [brainId, id]);
  return rows[0];
}

export async function decideProposal(q: Queryable, id: string, status: 'approved' | 'rejected'): Promise<ProposalRow> {
  const { rows } = await q.query<ProposalRow>(`UPDATE brain_proposals SET status = $2, decided_at = now() WHERE id = $1 RETURNING *`, [id, status]);
  return rows[0]!;
}

export interface ConflictRow {
  id: string;
  brain_id: string;
  pass_id: string;
  scope: string;
  entry_id: string;
  candidate: Buffer;
  reason: string | null;
  status: 'open' | 'resolved';
  resolution: 'keep_existing' | 'accept_incoming' | null;
  created_at: Date;
  resolved_at: Date | null;
}

export async function insertConflict(q: Queryable, conflict: Pick<ConflictRow, 'id' | 'brain_id' | 'pass_id' | 'scope' | 'entry_id' | 'candidate' | 'reason'>): Promise<void> {
  await q.query(
    `INSERT INTO brain_conflicts (id, brain_id, pass_id, scope, entry_id, candidate, reason) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [conflict.id, conflict.brain_id, conflict.pass_id, conflict.scope, conflict.entry_id, conflict.candidate, conflict.reason],
  );
}

export async function openConflicts(q: Queryable, brainId: string, limit: number, offset: number): Promise<ConflictRow[]> {
  const { rows } = await q.query<ConflictRow>(
    `SELECT * FROM brain_conflicts WHERE brain_id = $1 AND status = 'open' ORDER BY created_at, id LIMIT $2 OFFSET $3`,
    [brainId, limit + 1, offset],
  );
  return rows;
}

export async function findConflict(q: Queryable, brainId: string, id: string, lock?: 'update'): Promise<ConflictRow | undefined> {
  const { rows } = await q.query<ConflictRow>(`SELECT * FROM brain_conflicts WHERE brain_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`, [brainId, id]);
  return rows[0];
}

export async function resolveConflict(q: Queryable, id: string, resolution: 'keep_existing' | 'accept_incoming'): Promise<ConflictRow> {
  const { rows } = await q.query<ConflictRow>(`UPDATE brain_conflicts SET status = 'resolved', resolution = $2, resolved_at = now() WHERE id = $1 RETURNING *`, [id, resolution]);
  return rows[0]!;
}

export type TierMultipliers = Partial<Record<'A' | 'B' | 'C' | 'D', number>>;

export async function setTierMultipliers(q: Queryable, brainId: string, next: TierMultipliers, prior: TierMultipliers | null): Promise<void> {
  await q.query(`UPDATE brains SET tier_multipliers = $2, prior_tier_multipliers = $3, usage_seq = usage_seq + 1 WHERE id = $1`, [brainId, JSON.stringify(next), prior ? JSON.stringify(prior) : null]);
}

export async function setAutotuneFrozen(q: Queryable, brainId: string, frozen: boolean, multipliers?: TierMultipliers): Promise<void> {
  await q.query(
    `UPDATE brains SET autotune_frozen = $2, tier_multipliers = coalesce($3::jsonb, tier_multipliers), prior_tier_multipliers = CASE WHEN $3::jsonb IS NULL THEN prior_tier_multipliers END,
       usage_seq = usage_seq + 1, updated_at = now() WHERE id = $1`,
    [brainId, frozen, multipliers ? JSON.stringify(multipliers) : null],
  );
}

/**
 * Cold soft memories: current native memories of the given types whose decay anchor (last use,
 * else last update) is older than `before`. The caller checks fading per type.
 */
export async function coldMemories(q: Queryable, brainId: string, types: string[], before: Date): Promise<Pick<EntryRow, 'version_id' | 'entry_id' | 'type' | 'created_at' | 'updated_at' | 'last_used'>[]> {
  const { rows } = await q.query(
    `SELECT version_id, entry_id, type, created_at, updated_at, last_used FROM brain_entries
     WHERE brain_id = $1 AND valid_to IS NULL AND class = 'memory' AND origin = 'native' AND type = ANY($2) AND coalesce(last_used, updated_at) < $3`,
    [brainId, types, before],
  );
  return rows;
}

/** Brains that hold memories (the prune sweep's work list). */
export async function brainsWithMemories(q: Queryable): Promise<string[]> {
  const { rows } = await q.query<{ id: string }>(
    `SELECT b.id FROM brains b WHERE b.state = 'active' AND EXISTS (SELECT 1 FROM brain_entries e WHERE e.brain_id = b.id AND e.class = 'memory' AND e.valid_to IS NULL) ORDER BY b.id`,
  );
  return rows.map((row) => row.id);
}

/** The normalised names (and aliases) of the entities each entry is linked to. */
export async function entityNamesOfEntries(q: Queryable, brainId: string, entryIds: string[]): Promise<Map<string, string[]>> {
  if (entryIds.length === 0) return new Map();
  const { rows } = await q.query<{ entry_id: string; names: string[] }>(
    `SELECT l.entry_id, array_agg(DISTINCT n) AS names
     FROM brain_entity_links l JOIN brain_entities e ON e.id = l.entity_id, unnest(array_prepend(e.normalized, e.aliases)) AS n
     WHERE l.brain_id = $1 AND l.entry_id = ANY($2) GROUP BY l.entry_id`,
    [brainId, entryIds],
  );
  return new Map(rows.map((row) => [row.entry_id, row.names]));
}
