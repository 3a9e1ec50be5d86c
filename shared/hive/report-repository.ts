import type { Queryable } from '../db/pool.js';
import { MEMORY_COLUMNS, type MemoryRow } from './memory-repository.js';
import { REACH_CTE } from './repository.js';

/**
 * SQL of the snapshot and the read-only reports. Each starts from the token's reach (`$1` the
 * token id) narrowed to a subtree (`$2` a node's `path`, or null for the whole reach), so nothing
 * outside it is counted, listed or loaded.
 */
const SCOPED = `${REACH_CTE},
  scoped AS (
    SELECT n.id AS node_id, reach.rank FROM reach JOIN hive.nodes n ON n.id = reach.node_id
     WHERE $2::text IS NULL OR n.path = $2 OR starts_with(n.path, $2 || '/')
  )`;
const SCOPED_MEMORIES = `hive.memories m JOIN scoped reach ON reach.node_id = m.node_id JOIN hive.nodes n ON n.id = m.node_id`;
const LIVE = `m.forgotten_at IS NULL AND m.superseded_by IS NULL`;

export interface Breakdown {
  dimension: 'kind' | 'tier' | 'scope' | 'age';
  key: string;
  count: number;
}

/**
 * Counts of memories by kind, by scope and by age (since last written) over the current ones,
 * and by tier over every memory: pinned, active, superseded, forgotten.
 */
export async function memoryBreakdown(db: Queryable, tokenId: string, path: string | null): Promise<Breakdown[]> {
  const { rows } = await db.query<Breakdown>(
    `WITH ${SCOPED},
     counted AS (
       SELECT m.kind, m.scope, m.pinned, m.forgotten_at, m.superseded_by, now() - m.updated_at AS age FROM ${SCOPED_MEMORIES}
     )
     SELECT 'kind' AS dimension, kind AS key, count(*)::int AS count FROM counted WHERE forgotten_at IS NULL AND superseded_by IS NULL GROUP BY kind
     UNION ALL
     SELECT 'scope', scope, count(*)::int FROM counted WHERE forgotten_at IS NULL AND superseded_by IS NULL GROUP BY scope
     UNION ALL
     SELECT 'age', CASE WHEN age < interval '1 day' THEN 'day' WHEN age < interval '7 days' THEN 'week' WHEN age < interval '30 days' THEN 'month'
                        WHEN age < interval '90 days' THEN 'quarter' ELSE 'older' END, count(*)::int
       FROM counted WHERE forgotten_at IS NULL AND superseded_by IS NULL GROUP BY 2
     UNION ALL
     SELECT 'tier', CASE WHEN forgotten_at IS NOT NULL THEN 'forgotten' WHEN superseded_by IS NOT NULL THEN 'superseded' WHEN pinned THEN 'pinned' ELSE 'active' END,
            count(*)::int FROM counted GROUP BY 2
     ORDER BY 1, 3 DESC, 2`,
    [tokenId, path],
  );
  return rows;
}

export interface Measures {
  nodes: number;
  memories: number;
  embedded: number;
  superseded: number;
  forgotten: number;
  events_7d: number;
  open_tasks: number;
  overdue_tasks: number;
}

export async function measures(db: Queryable, tokenId: string, path: string | null): Promise<Measures> {
  const { rows } = await db.query<Measures>(
    `WITH ${SCOPED}
     SELECT (SELECT count(*)::int FROM scoped) AS nodes,
            (SELECT count(*)::int FROM ${SCOPED_MEMORIES} WHERE ${LIVE}) AS memories,
            (SELECT count(*)::int FROM ${SCOPED_MEMORIES} WHERE ${LIVE} AND m.embedded_version = m.version) AS embedded,
            (SELECT count(*)::int FROM ${SCOPED_MEMORIES} WHERE m.forgotten_at IS NULL AND m.superseded_by IS NOT NULL) AS superseded,
            (SELECT count(*)::int FROM ${SCOPED_MEMORIES} WHERE m.forgotten_at IS NOT NULL) AS forgotten,
            (SELECT count(*)::int FROM hive.events e JOIN scoped ON scoped.node_id = e.node_id WHERE e.created_at > now() - interval '7 days') AS events_7d,
            (SELECT count(*)::int FROM hive.tasks t JOIN scoped ON scoped.node_id = t.node_id WHERE t.status = 'open') AS open_tasks,
            (SELECT count(*)::int FROM hive.tasks t JOIN scoped ON scoped.node_id = t.node_id WHERE t.status = 'open' AND t.due_at <= now()) AS overdue_tasks`,
    [tokenId, path],
  );
  return rows[0]!;
}

export interface ScopeRow {
  node_id: string;
  node_path: string;
  scope: string;
  memories: number;
  pinned: number;
  kinds: Record<string, number>;
  last_written: Date;
}

/** Each node and scope holding current memories, with their counts. */
export async function scopesOf(db: Queryable, tokenId: string, path: string | null): Promise<ScopeRow[]> {
  const { rows } = await db.query<ScopeRow>(
    `WITH ${SCOPED},
     per_kind AS (
       SELECT m.node_id, m.scope, m.kind, count(*)::int AS n, count(*) FILTER (WHERE m.pinned)::int AS pinned, max(m.updated_at) AS last_written
         FROM ${SCOPED_MEMORIES} WHERE ${LIVE} GROUP BY m.node_id, m.scope, m.kind
     )
     SELECT k.node_id, n.name_path AS node_path, k.scope, sum(k.n)::int AS memories, sum(k.pinned)::int AS pinned,
            jsonb_object_agg(k.kind, k.n) AS kinds, max(k.last_written) AS last_written
       FROM per_kind k JOIN hive.nodes n ON n.id = k.node_id
      GROUP BY k.node_id, n.name_path, k.scope
      ORDER BY n.name_path, k.scope`,
    [tokenId, path],
  );
  return rows;
}

/**
 * The current memories of the subtree for the snapshot, at most `perScope` of each node and scope
 * (pinned first, then the most recently written), with how many each scope holds.
 */
export async function snapshotMemories(db: Queryable, tokenId: string, path: string | null, scope: string | null, perScope: number): Promise<(MemoryRow & { in_scope: number })[]> {
  const { rows } = await db.query<MemoryRow & { in_scope: number }>(
    `WITH ${SCOPED},
     ranked AS (
       SELECT ${MEMORY_COLUMNS}, reach.rank, n.depth,
              row_number() OVER (PARTITION BY m.node_id, m.scope ORDER BY m.pinned DESC, m.updated_at DESC, m.id) AS place,
              count(*) OVER (PARTITION BY m.node_id, m.scope)::int AS in_scope
         FROM ${SCOPED_MEMORIES}
        WHERE ${LIVE} AND ($3::text IS NULL OR m.scope = $3 OR starts_with(m.scope, $3 || '/'))
     )
     SELECT * FROM ranked WHERE place <= $4 ORDER BY node_path, scope, place`,
    [tokenId, path, scope, perScope],
  );
  return rows;
}

/** Pinned current memories, most recently written first. */
export async function pinnedMemories(db: Queryable, tokenId: string, path: string | null, limit: number): Promise<MemoryRow[]> {
  const { rows } = await db.query<MemoryRow>(
    `WITH ${SCOPED} SELECT ${MEMORY_COLUMNS}, reach.rank FROM ${SCOPED_MEMORIES} WHERE ${LIVE} AND m.pinned ORDER BY m.updated_at DESC, m.id LIMIT $3`,
    [tokenId, path, limit],
  );
  return rows;
}

/** Tombstones left in the last `days`, newest first. */
export async function recentTombstones(db: Queryable, tokenId: string, path: string | null, days: number, limit: number): Promise<MemoryRow[]> {
  const { rows } = await db.query<MemoryRow>(
    `WITH ${SCOPED} SELECT ${MEMORY_COLUMNS}, reach.rank FROM ${SCOPED_MEMORIES}
      WHERE m.forgotten_at > now() - make_interval(days => $3) ORDER BY m.forgotten_at DESC, m.id LIMIT $4`,
    [tokenId, path, days, limit],
  );
  return rows;
}

/** Current memories last confirmed (written or verified) before `days` ago, oldest first; `kinds` narrows. */
export async function unconfirmedSince(db: Queryable, tokenId: string, path: string | null, days: number, kinds: string[] | null, limit: number): Promise<MemoryRow[]> {
  const { rows } = await db.query<MemoryRow>(
    `WITH ${SCOPED} SELECT ${MEMORY_COLUMNS}, reach.rank FROM ${SCOPED_MEMORIES}
      WHERE ${LIVE} AND ($4::text[] IS NULL OR m.kind = ANY($4::text[]))
        AND greatest(m.updated_at, m.verified_at) < now() - make_interval(days => $3)
      ORDER BY greatest(m.updated_at, m.verified_at), m.id LIMIT $5`,
    [tokenId, path, days, kinds, limit],
  );
  return rows;
}

export interface DuplicateRow {
  reason: 'same_title' | 'same_meaning';
  ids: string[];
  similarity: number | null;
}

/**
 * Current memories that look like one another: the same normalised title under another scope or
 * node, and pairs on one node whose vectors (same model) are at least `floor` similar.
 */
export async function duplicates(db: Queryable, tokenId: string, path: string | null, floor: number, limit: number): Promise<DuplicateRow[]> {
  const { rows } = await db.query<DuplicateRow>(
    `WITH ${SCOPED},
     live AS (SELECT m.id, m.node_id, m.title_key, m.embedding, m.embedding_model FROM ${SCOPED_MEMORIES} WHERE ${LIVE}),
     by_title AS (
       SELECT 'same_title' AS reason, array_agg(id ORDER BY id) AS ids, NULL::float8 AS similarity FROM live GROUP BY title_key HAVING count(*) > 1
     ),
     by_meaning AS (
       SELECT 'same_meaning' AS reason, ARRAY[a.id, near.id] AS ids, near.similarity
         FROM live a
         CROSS JOIN LATERAL (
           SELECT b.id, (1 - (b.embedding <=> a.embedding))::float8 AS similarity FROM live b
            WHERE b.node_id = a.node_id AND b.id > a.id AND b.embedding IS NOT NULL AND b.embedding_model = a.embedding_model
              AND vector_dims(b.embedding) = vector_dims(a.embedding)
            ORDER BY b.embedding <=> a.embedding LIMIT 1
         ) near
        WHERE a.embedding IS NOT NULL AND near.similarity >= $3
     )
     SELECT * FROM by_title UNION ALL SELECT * FROM by_meaning ORDER BY reason DESC, similarity DESC NULLS LAST, ids LIMIT $4`,
    [tokenId, path, floor, limit],
  );
  return rows;
}

export interface DanglingRow {
  id: string;
  node_path: string;
  superseded_by: string;
  problem: 'replacement_forgotten' | 'replacement_unreachable' | 'cycle';
}

/**
 * Supersession links that lead nowhere useful: to a tombstone, to a memory outside the reach (or
 * another organisation), or round in a cycle.
 */
export async function danglingSupersessions(db: Queryable, tokenId: string, path: string | null, limit: number): Promise<DanglingRow[]> {
  const { rows } = await db.query<DanglingRow>(
    `WITH RECURSIVE ${SCOPED},
     chain AS (
       SELECT m.id AS origin, m.superseded_by AS next, 1 AS steps FROM ${SCOPED_MEMORIES} WHERE m.superseded_by IS NOT NULL AND m.forgotten_at IS NULL
       UNION ALL
       SELECT c.origin, r.superseded_by, c.steps + 1 FROM chain c JOIN hive.memories r ON r.id = c.next
        WHERE r.superseded_by IS NOT NULL AND c.next <> c.origin AND c.steps < 20
     ),
     cycles AS (SELECT DISTINCT origin FROM chain WHERE next = origin)
     SELECT m.id, n.name_path AS node_path, m.superseded_by,
            CASE WHEN m.id IN (SELECT origin FROM cycles) THEN 'cycle'
                 WHEN r.id IS NULL OR r.org_id <> m.org_id OR NOT EXISTS (SELECT 1 FROM reach WHERE reach.node_id = r.node_id) THEN 'replacement_unreachable'
                 WHEN r.forgotten_at IS NOT NULL THEN 'replacement_forgotten' END AS problem
       FROM ${SCOPED_MEMORIES} LEFT JOIN hive.memories r ON r.id = m.superseded_by
      WHERE m.superseded_by IS NOT NULL AND m.forgotten_at IS NULL
        AND (m.id IN (SELECT origin FROM cycles) OR r.id IS NULL OR r.org_id <> m.org_id OR r.forgotten_at IS NOT NULL
             OR NOT EXISTS (SELECT 1 FROM reach WHERE reach.node_id = r.node_id))
      ORDER BY n.name_path, m.id LIMIT $3`,
    [tokenId, path, limit],
  );
  return rows;
}

export interface OrphanRow {
  what: 'task' | 'memory';
  id: string;
  node_path: string;
  problem: 'memory_forgotten' | 'author_gone';
}

/** Open tasks about a forgotten memory; current memories whose author and token are both gone. */
export async function orphans(db: Queryable, tokenId: string, path: string | null, limit: number): Promise<OrphanRow[]> {
  const { rows } = await db.query<OrphanRow>(
    `WITH ${SCOPED}
     SELECT 'task' AS what, t.id, n.name_path AS node_path, 'memory_forgotten' AS problem
       FROM hive.tasks t JOIN scoped ON scoped.node_id = t.node_id JOIN hive.nodes n ON n.id = t.node_id JOIN hive.memories m ON m.id = t.memory_id
      WHERE t.status = 'open' AND m.forgotten_at IS NOT NULL
     UNION ALL
     SELECT 'memory', m.id, n.name_path, 'author_gone' FROM ${SCOPED_MEMORIES}
      WHERE m.forgotten_at IS NULL AND m.created_by IS NULL AND NOT EXISTS (SELECT 1 FROM hive.tokens tk WHERE tk.id = m.created_token)
     ORDER BY 1, 3, 2 LIMIT $3`,
    [tokenId, path, limit],
  );
  return rows;
}

export interface DriftRow {
  id: string;
  node_path: string;
  problem: 'not_embedded' | 'other_model';
  embedding_model: string | null;
}

/**
 * The vector index against the memories: current versions still without a vector after `graceSeconds`
 * (the embedding job should have run), and vectors made with a model other than `model`.
 */
export async function indexDrift(db: Queryable, tokenId: string, path: string | null, model: string, graceSeconds: number, limit: number): Promise<DriftRow[]> {
  const { rows } = await db.query<DriftRow>(
    `WITH ${SCOPED}
     SELECT m.id, n.name_path AS node_path,
            CASE WHEN m.embedded_version IS DISTINCT FROM m.version THEN 'not_embedded' ELSE 'other_model' END AS problem, m.embedding_model
       FROM ${SCOPED_MEMORIES}
      WHERE m.forgotten_at IS NULL
        AND ((m.embedded_version IS DISTINCT FROM m.version AND m.updated_at < now() - make_interval(secs => $4))
             OR (m.embedded_version = m.version AND m.embedding_model <> $3))
      ORDER BY n.name_path, m.id LIMIT $5`,
    [tokenId, path, model, graceSeconds, limit],
  );
  return rows;
}
