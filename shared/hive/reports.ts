import type { HiveServices } from '../composition/hive.js';
import type { Queryable } from '../db/pool.js';
import { nodeWithRole, type HiveCredential } from './access.js';
import { hiveEmbeddingModel } from './embedding.js';
import { formatMemory } from './memories.js';
import type { MemoryRow } from './memory-repository.js';
import { recall } from './recall.js';
import * as repo from './report-repository.js';

/**
 * The snapshot and the read-only reports (spec 3: stats, map, coverage, review, doctor). Each
 * covers the credential's reach, or one node and what lies below it (reader there); nothing
 * outside the reach is counted.
 */
const LIST_LIMIT = 50;
/** Days a tombstone stays "recent" on the map. */
const RECENT_TOMBSTONE_DAYS = 30;
/** Load-bearing kinds: wrong ones do harm, so they are due for re-confirmation sooner than they go stale. */
const RECONFIRM_KINDS = ['fact', 'decision', 'procedure', 'guardrail', 'axiom'];
const RECONFIRM_DAYS = 30;
/** Two memories on one node at least this similar in meaning are reported as likely duplicates. */
const DUPLICATE_SIMILARITY = 0.95;
/** How long a written version may wait for its vector before the doctor calls it drift. */
const EMBEDDING_GRACE_SECONDS = 600;

async function subtreePath(db: Queryable, credential: HiveCredential, node: string | undefined): Promise<{ path: string | null; node: { id: string; path: string } | null }> {
  if (!node) return { path: null, node: null };
  const reached = await nodeWithRole(db, credential, node, 'reader');
  return { path: reached.path, node: { id: reached.id, path: reached.name_path } };
}

/** POST /v1/stats: counts of memories by type (kind), tier, scope and age. */
export async function stats(db: Queryable, credential: HiveCredential, input: { node?: string }) {
  const { path, node } = await subtreePath(db, credential, input.node);
  const [breakdown, totals] = await Promise.all([repo.memoryBreakdown(db, credential.tokenId, path), repo.measures(db, credential.tokenId, path)]);
  const by = (dimension: repo.Breakdown['dimension']) => Object.fromEntries(breakdown.filter((row) => row.dimension === dimension).map((row) => [row.key, row.count]));
  return { object: 'stats', node, totals, by_type: by('kind'), by_tier: by('tier'), by_scope: by('scope'), by_age: by('age') };
}

/** POST /v1/map: the scopes of each node, the pins, recent tombstones and the store's measures. */
export async function map(db: Queryable, credential: HiveCredential, input: { node?: string }) {
  const { path, node } = await subtreePath(db, credential, input.node);
  const [scopes, pins, tombstones, measures] = await Promise.all([
    repo.scopesOf(db, credential.tokenId, path),
    repo.pinnedMemories(db, credential.tokenId, path, LIST_LIMIT),
    repo.recentTombstones(db, credential.tokenId, path, RECENT_TOMBSTONE_DAYS, LIST_LIMIT),
    repo.measures(db, credential.tokenId, path),
  ]);
  return {
    object: 'map',
    node,
    scopes: scopes.map((row) => ({ node: { id: row.node_id, path: row.node_path }, scope: row.scope, memories: row.memories, pinned: row.pinned, kinds: row.kinds, last_written_at: row.last_written.toISOString() })),
    pins: pins.map(briefMemory),
    recent_tombstones: tombstones.map((row) => ({ ...briefMemory(row), forgotten_at: row.forgotten_at!.toISOString(), forgotten_by: row.forgotten_by })),
    measures: { ...measures, embedded_share: measures.memories === 0 ? 1 : Number((measures.embedded / measures.memories).toFixed(4)) },
  };
}

/**
 * POST /v1/coverage: what the hive holds near a subject, found as recall finds it (text and
 * meaning), summarised by node, scope and kind, with a verdict: `none` (nothing), `thin` (fewer
 * than three matches), `covered` (three or more).
 */
export async function coverage(hive: Pick<HiveServices, 'db' | 'config' | 'providers' | 'logger'>, credential: HiveCredential, input: { subject: string; node?: string; limit: number }) {
  const found = await recall(hive, credential, { query: input.subject, nodes: input.node ? [input.node] : undefined, limit: input.limit });
  const count = (key: (memory: (typeof found.data)[number]['memory']) => string) => {
    const counts: Record<string, number> = {};
    for (const hit of found.data) counts[key(hit.memory)] = (counts[key(hit.memory)] ?? 0) + 1;
    return counts;
  };
  const best = Math.max(...found.data.map((hit) => hit.similarity ?? 0), 0);
  const verdict = found.data.length === 0 ? 'none' : found.data.length < 3 ? 'thin' : 'covered';
  return {
    object: 'coverage',
    subject: input.subject,
    verdict,
    matches: found.data.length,
    ranking: found.ranking,
    best_similarity: found.ranking.meaning ? Number(best.toFixed(4)) : null,
    by_node: count((memory) => memory.node.path),
    by_scope: count((memory) => memory.scope),
    by_kind: count((memory) => memory.kind),
    memories: found.data.map((hit) => ({ ...briefMemoryOf(hit.memory), score: hit.score, matched: hit.matched, similarity: hit.similarity })),
  };
}

/**
 * POST /v1/review: what wants a person's attention: stale memories (neither written nor verified
 * for `stale_days`), load-bearing ones due for re-confirmation (facts, decisions, procedures,
 * guardrails, axioms unconfirmed for 30 days and not yet stale), and likely duplicates.
 */
export async function review(db: Queryable, credential: HiveCredential, input: { node?: string; stale_days: number; limit: number }) {
  const { path, node } = await subtreePath(db, credential, input.node);
  const [stale, unconfirmed, twins] = await Promise.all([
    repo.unconfirmedSince(db, credential.tokenId, path, input.stale_days, null, input.limit),
    repo.unconfirmedSince(db, credential.tokenId, path, Math.min(RECONFIRM_DAYS, input.stale_days), RECONFIRM_KINDS, input.limit * 2),
    repo.duplicates(db, credential.tokenId, path, DUPLICATE_SIMILARITY, input.limit),
  ]);
  const staleIds = new Set(stale.map((row) => row.id));
  const confirmedAt = (row: MemoryRow) => new Date(Math.max(row.updated_at.getTime(), row.verified_at?.getTime() ?? 0)).toISOString();
  return {
    object: 'review',
    node,
    stale_days: input.stale_days,
    stale: stale.map((row) => ({ ...briefMemory(row), last_confirmed_at: confirmedAt(row) })),
    due_for_reconfirmation: unconfirmed.filter((row) => !staleIds.has(row.id)).slice(0, input.limit).map((row) => ({ ...briefMemory(row), last_confirmed_at: confirmedAt(row) })),
    duplicates: twins.map((row) => ({ reason: row.reason, ids: row.ids, similarity: row.similarity === null ? null : Number(row.similarity.toFixed(4)) })),
  };
}

/**
 * POST /v1/doctor: the store's integrity: supersession links that dangle (to a tombstone, out of
 * the reach, in a cycle), orphans (open tasks about a forgotten memory, memories whose author and
 * token are both gone) and index drift (current versions still without a vector ten minutes on,
 * vectors of a model other than HIVE_EMBEDDING_MODEL). `healthy` when all three are empty.
 */
export async function doctor(hive: Pick<HiveServices, 'db' | 'config'>, credential: HiveCredential, input: { node?: string }) {
  const { db } = hive;
  const { path, node } = await subtreePath(db, credential, input.node);
  const model = hiveEmbeddingModel(hive.config).id;
  const [dangling, orphaned, drift] = await Promise.all([
    repo.danglingSupersessions(db, credential.tokenId, path, LIST_LIMIT),
    repo.orphans(db, credential.tokenId, path, LIST_LIMIT),
    repo.indexDrift(db, credential.tokenId, path, model, EMBEDDING_GRACE_SECONDS, LIST_LIMIT),
  ]);
  return {
    object: 'doctor',
    node,
    healthy: dangling.length === 0 && orphaned.length === 0 && drift.length === 0,
    dangling_supersessions: dangling.map((row) => ({ id: row.id, node: row.node_path, superseded_by: row.superseded_by, problem: row.problem })),
    orphans: orphaned.map((row) => ({ what: row.what, id: row.id, node: row.node_path, problem: row.problem })),
    index_drift: { embedding_model: model, items: drift.map((row) => ({ id: row.id, node: row.node_path, problem: row.problem, embedding_model: row.embedding_model })) },
  };
}

/**
 * POST /v1/snapshot: a readable digest of the store per node and scope: the current memories of
 * each (pinned first, then the latest, `per_scope` at most, the rest counted) as JSON and as a
 * Markdown document an agent or a person can read top to bottom.
 */
export async function snapshot(db: Queryable, credential: HiveCredential, input: { node?: string; scope?: string; per_scope: number }) {
  const { path, node } = await subtreePath(db, credential, input.node);
  const rows = await repo.snapshotMemories(db, credential.tokenId, path, input.scope ?? null, input.per_scope);
  const scopes: { node: { id: string; path: string }; scope: string; memories: number; shown: ReturnType<typeof snapshotEntry>[]; more: number }[] = [];
  for (const row of rows) {
    let current = scopes.at(-1);
    if (!current || current.node.id !== row.node_id || current.scope !== row.scope) {
      current = { node: { id: row.node_id, path: row.node_path }, scope: row.scope, memories: row.in_scope, shown: [], more: 0 };
      scopes.push(current);
    }
    current.shown.push(snapshotEntry(row));
    current.more = current.memories - current.shown.length;
  }
  const text: string[] = [`# Snapshot of ${node?.path ?? 'the reach'} at ${new Date().toISOString()}`, ''];
  for (const entry of scopes) {
    text.push(`## ${entry.node.path} · ${entry.scope} (${entry.memories})`);
    for (const memory of entry.shown) text.push(`- ${memory.pinned ? '📌 ' : ''}[${memory.kind}] ${memory.title}${memory.summary ? ` — ${memory.summary}` : ''}`);
    if (entry.more > 0) text.push(`- … and ${entry.more} more`);
    text.push('');
  }
  return { object: 'snapshot', node, generated_at: new Date().toISOString(), scopes, text: text.join('\n') };
}

/** The first line of a body, at most 160 characters. */
function summaryOf(body: string): string {
  const line = body.split('\n').find((candidate) => candidate.trim().length > 0)?.trim() ?? '';
  return line.length > 160 ? `${line.slice(0, 159)}…` : line;
}

function snapshotEntry(row: MemoryRow) {
  return { id: row.id, title: row.title, kind: row.kind, pinned: row.pinned, summary: summaryOf(row.body), updated_at: row.updated_at.toISOString() };
}

function briefMemory(row: MemoryRow) {
  return briefMemoryOf(formatMemory(row));
}

function briefMemoryOf(memory: ReturnType<typeof formatMemory>) {
  return { id: memory.id, node: memory.node, scope: memory.scope, title: memory.title, kind: memory.kind, pinned: memory.pinned, status: memory.status, updated_at: memory.updated_at, verified_at: memory.verified_at };
}
