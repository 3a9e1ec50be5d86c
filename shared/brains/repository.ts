import { partitionName } from '../db/partitions.js';
import type { Queryable } from '../db/pool.js';
import { vectorCast } from '../vector-stores/repository.js';
import type { MemoryPolicy } from './policy.js';

/** SQL of brains, their entry versions and chunks (migrations/022_brains.sql). */
export interface BrainRow {
  id: string;
  developer_id: string;
  name: string;
  embedding_model: string;
  embedding_dims: number;
  encryption: 'none' | 'standard' | 'strict';
  wrapped_data_key: Buffer | null;
  tuning: 'auto' | 'manual';
  autotune_frozen: boolean;
  memory_policy: MemoryPolicy;
  active_space: number;
  write_seq: string;
  state: 'active' | 'deleting';
  created_at: Date;
  updated_at: Date;
}

export interface EntryRow {
  version_id: string;
  brain_id: string;
  entry_id: string;
  scope: string;
  class: 'reference' | 'memory' | 'policy';
  type: string | null;
  title: string | null;
  body: string | null;
  title_sealed: Buffer | null;
  body_sealed: Buffer | null;
  body_bytes: string;
  trust: 'high' | 'low';
  origin: 'native' | 'reference';
  source_mount_id: string | null;
  source: string | null;
  use_count: number;
  last_used: Date | null;
  created_at: Date;
  updated_at: Date;
  valid_from: Date;
  valid_to: Date | null;
  chunks: number;
}

/** A brain's ids are checked by the table's CHECK (brn_ and 24 base62 characters), so they are safe to name in DDL. */
const BRAIN_ID = /^brn_[0-9A-Za-z]{24}$/;
export const partitionOf = (brainId: string): string => partitionName('brain_chunks', brainId, BRAIN_ID, 4);

/** HNSW over the current chunks of one space: as_of reads scan history exactly instead. */
export const BRAIN_HNSW = { m: 16, efConstruction: 64 };

export async function insertBrain(q: Queryable, brain: Omit<BrainRow, 'active_space' | 'write_seq' | 'state' | 'created_at' | 'updated_at' | 'autotune_frozen'>, hnsw: boolean): Promise<BrainRow> {
  const { rows } = await q.query<BrainRow>(
    `INSERT INTO brains (id, developer_id, name, embedding_model, embedding_dims, encryption, wrapped_data_key, tuning, memory_policy)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
    [brain.id, brain.developer_id, brain.name, brain.embedding_model, brain.embedding_dims, brain.encryption, brain.wrapped_data_key, brain.tuning, JSON.stringify(brain.memory_policy)],
  );
  await q.query(`CREATE TABLE ${partitionOf(brain.id)} PARTITION OF brain_chunks FOR VALUES IN ('${brain.id}')`);
  await q.query(`CREATE INDEX ON ${partitionOf(brain.id)} (space, version_id)`);
  if (hnsw) await createSpaceIndex(q, brain.id, 1, brain.embedding_dims);
  return rows[0]!;
}

export async function createSpaceIndex(q: Queryable, brainId: string, space: number, dims: number): Promise<void> {
  const { cast, ops } = vectorCast(dims);
  await q.query(
    `CREATE INDEX IF NOT EXISTS ${partitionOf(brainId)}_s${Number(space)}_hnsw ON ${partitionOf(brainId)} USING hnsw ((embedding::${cast}) ${ops})
     WITH (m = ${BRAIN_HNSW.m}, ef_construction = ${BRAIN_HNSW.efConstruction}) WHERE space = ${Number(space)} AND valid_to IS NULL`,
  );
}

export async function dropSpace(q: Queryable, brainId: string, space: number): Promise<void> {
  await q.query(`DROP INDEX IF EXISTS ${partitionOf(brainId)}_s${Number(space)}_hnsw`);
  await q.query(`DELETE FROM ${partitionOf(brainId)} WHERE space = $1`, [space]);
}

export async function findBrain(q: Queryable, developerId: string, id: string, lock?: 'update'): Promise<BrainRow | undefined> {
  const { rows } = await q.query<BrainRow>(
    `SELECT * FROM brains WHERE id = $1 AND developer_id = $2 AND state = 'active'${lock ? ' FOR UPDATE' : ''}`,
    [id, developerId],
  );
  return rows[0];
}

export async function listBrains(q: Queryable, developerId: string, limit: number, offset: number): Promise<BrainRow[]> {
  const { rows } = await q.query<BrainRow>(
    `SELECT * FROM brains WHERE developer_id = $1 AND state = 'active' ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`,
    [developerId, limit + 1, offset],
  );
  return rows;
}

export async function updateBrain(q: Queryable, id: string, fields: { name?: string; encryption?: BrainRow['encryption']; wrapped_data_key?: Buffer | null; memory_policy?: MemoryPolicy; tuning?: string }): Promise<BrainRow> {
  const { rows } = await q.query<BrainRow>(
    `UPDATE brains SET name = coalesce($2, name),
       encryption = coalesce($3, encryption),
       wrapped_data_key = CASE WHEN $3::text IS NULL THEN wrapped_data_key ELSE $4 END,
       memory_policy = coalesce($5::jsonb, memory_policy),
       tuning = coalesce($6, tuning),
       updated_at = now()
     WHERE id = $1 RETURNING *`,
    [id, fields.name ?? null, fields.encryption ?? null, fields.wrapped_data_key ?? null, fields.memory_policy ? JSON.stringify(fields.memory_policy) : null, fields.tuning ?? null],
  );
  return rows[0]!;
}

export async function markDeleting(q: Queryable, id: string): Promise<void> {
  await q.query(`UPDATE brains SET state = 'deleting', updated_at = now() WHERE id = $1`, [id]);
}

/** Removes a deleting brain's content: its partition, then its rows (entries and jobs cascade). */
export async function purgeBrain(q: Queryable, id: string): Promise<void> {
  await q.query(`DROP TABLE IF EXISTS ${partitionOf(id)}`);
  await q.query(`DELETE FROM brains WHERE id = $1 AND state = 'deleting'`, [id]);
}

export async function hasEntries(q: Queryable, brainId: string): Promise<boolean> {
  const { rows } = await q.query(`SELECT 1 FROM brain_entries WHERE brain_id = $1 LIMIT 1`, [brainId]);
  return rows.length > 0;
}

export async function bumpWriteSeq(q: Queryable, brainId: string): Promise<void> {
  await q.query(`UPDATE brains SET write_seq = write_seq + 1 WHERE id = $1`, [brainId]);
}

export async function currentEntry(q: Queryable, brainId: string, entryId: string, lock?: 'update'): Promise<EntryRow | undefined> {
  const { rows } = await q.query<EntryRow>(
    `SELECT * FROM brain_entries WHERE brain_id = $1 AND entry_id = $2 AND valid_to IS NULL${lock ? ' FOR UPDATE' : ''}`,
    [brainId, entryId],
  );
  return rows[0];
}

export async function nextVersionId(q: Queryable): Promise<string> {
  const { rows } = await q.query<{ id: string }>(`SELECT nextval('brain_entries_version_id_seq')::text AS id`);
  return rows[0]!.id;
}

export type NewEntryVersion = Omit<EntryRow, 'valid_from' | 'valid_to' | 'updated_at'>;

/** Writes a version valid from now; `created_at` is the entry's first write. */
export async function insertEntryVersion(q: Queryable, entry: NewEntryVersion): Promise<EntryRow> {
  const { rows } = await q.query<EntryRow>(
    `INSERT INTO brain_entries (version_id, brain_id, entry_id, scope, class, type, title, body, title_sealed, body_sealed, body_bytes, trust, origin,
       source_mount_id, source, use_count, last_used, created_at, updated_at, valid_from, chunks)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, now(), now(), $19) RETURNING *`,
    [
      entry.version_id, entry.brain_id, entry.entry_id, entry.scope, entry.class, entry.type, entry.title, entry.body, entry.title_sealed, entry.body_sealed,
      entry.body_bytes, entry.trust, entry.origin, entry.source_mount_id, entry.source, entry.use_count, entry.last_used, entry.created_at, entry.chunks,
    ],
  );
  return rows[0]!;
}

/** Ends a version (an update or delete): it stays readable as of the instants it was valid. */
export async function closeVersion(q: Queryable, brainId: string, versionId: string): Promise<void> {
  await q.query(`UPDATE brain_entries SET valid_to = now() WHERE version_id = $1 AND valid_to IS NULL`, [versionId]);
  await q.query(`UPDATE ${partitionOf(brainId)} SET valid_to = now() WHERE version_id = $1 AND valid_to IS NULL`, [versionId]);
}

export interface NewChunk {
  chunk_index: number;
  content: string | null;
  content_sealed: Buffer | null;
  /** pgvector text form, or null when sealed. */
  embedding: string | null;
  embedding_sealed: Buffer | null;
}

export async function insertChunks(q: Queryable, brainId: string, space: number, version: Pick<EntryRow, 'version_id' | 'entry_id' | 'scope'>, chunks: NewChunk[]): Promise<void> {
  const batch = 500;
  for (let start = 0; start < chunks.length; start += batch) {
    const slice = chunks.slice(start, start + batch);
    await q.query(
      `INSERT INTO ${partitionOf(brainId)} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)
       SELECT $1, $2, $3, c.chunk_index, $4, $5, c.content, c.content_sealed, c.embedding::vector, c.embedding_sealed, now()
       FROM unnest($6::int[], $7::text[], $8::bytea[], $9::text[], $10::bytea[]) AS c(chunk_index, content, content_sealed, embedding, embedding_sealed)`,
      [
        brainId, space, version.version_id, version.entry_id, version.scope,
        slice.map((chunk) => chunk.chunk_index), slice.map((chunk) => chunk.content), slice.map((chunk) => chunk.content_sealed),
        slice.map((chunk) => chunk.embedding), slice.map((chunk) => chunk.embedding_sealed),
      ],
    );
  }
}

/** A scope-only move: the new version gets the old one's chunks (every space) as they are, under its scope. */
export async function copyChunks(q: Queryable, brainId: string, fromVersion: string, to: Pick<EntryRow, 'version_id' | 'scope'>): Promise<void> {
  await q.query(
    `INSERT INTO ${partitionOf(brainId)} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)
     SELECT brain_id, space, $2, chunk_index, entry_id, $3, content, content_sealed, embedding, embedding_sealed, now()
     FROM ${partitionOf(brainId)} WHERE version_id = $1`,
    [fromVersion, to.version_id, to.scope],
  );
}

export async function listEntries(q: Queryable, brainId: string, filter: { scope?: string; class?: string }, limit: number, offset: number): Promise<EntryRow[]> {
  const { rows } = await q.query<EntryRow>(
    `SELECT * FROM brain_entries WHERE brain_id = $1 AND valid_to IS NULL
       AND ($2::text IS NULL OR scope = $2) AND ($3::text IS NULL OR class = $3)
     ORDER BY updated_at DESC, version_id DESC LIMIT $4 OFFSET $5`,
    [brainId, filter.scope ?? null, filter.class ?? null, limit + 1, offset],
  );
  return rows;
}

/** Scopes at or below `scope` that hold current entries, with their counts. */
export async function listScopes(q: Queryable, brainId: string, scope: string, limit: number, offset: number): Promise<{ scope: string; entries: number }[]> {
  const { rows } = await q.query<{ scope: string; entries: string }>(
    `SELECT scope, count(*) AS entries FROM brain_entries
     WHERE brain_id = $1 AND valid_to IS NULL AND ($2 = '/' OR scope = $2 OR scope LIKE $3)
     GROUP BY scope ORDER BY scope LIMIT $4 OFFSET $5`,
    [brainId, scope, `${likePrefix(scope)}/%`, limit + 1, offset],
  );
  return rows.map((row) => ({ scope: row.scope, entries: Number(row.entries) }));
}

/** A scope as a LIKE prefix (its _ and % escaped). */
export const likePrefix = (scope: string) => scope.replace(/[\\_%]/g, (char) => `\\${char}`);

export interface ChunkCandidate {
  version_id: string;
  chunk_index: number;
  entry_id: string;
  scope: string;
  cosine: number;
}

/** Where recall looks: these scopes exactly, and everything beneath `subtreeOf` when set. */
export interface ScopeFilter {
  scopes: string[];
  subtreeOf: string | null;
}

function scopeSql(filter: ScopeFilter, firstParam: number): { sql: string; params: unknown[] } {
  if (filter.subtreeOf === '/') return { sql: 'true', params: [] };
  if (filter.subtreeOf !== null) return { sql: `(c.scope = ANY($${firstParam}) OR c.scope LIKE $${firstParam + 1})`, params: [filter.scopes, `${likePrefix(filter.subtreeOf)}/%`] };
  return { sql: `c.scope = ANY($${firstParam})`, params: [filter.scopes] };
}

/**
 * The `limit` chunks nearest the query among the current chunks of a space (HNSW), or, as of an
 * instant, among the chunks valid then (an exact scan: history has no index).
 */
export async function nearestChunks(q: Queryable, brain: Pick<BrainRow, 'id' | 'embedding_dims'>, space: number, query: string, filter: ScopeFilter, limit: number, asOf: Date | null): Promise<ChunkCandidate[]> {
  const { cast } = vectorCast(brain.embedding_dims);
  const scopes = scopeSql(filter, 3);
  const validity = asOf === null ? 'c.valid_to IS NULL' : `c.valid_from <= $${3 + scopes.params.length} AND (c.valid_to IS NULL OR c.valid_to > $${3 + scopes.params.length})`;
  const params: unknown[] = [query, limit, ...scopes.params, ...(asOf === null ? [] : [asOf])];
  const { rows } = await q.query<ChunkCandidate>(
    `SELECT c.version_id, c.chunk_index, c.entry_id, c.scope, 1 - (c.embedding::${cast} <=> $1::${cast}) AS cosine
     FROM ${partitionOf(brain.id)} c
     WHERE c.space = ${Number(space)} AND ${validity} AND ${scopes.sql}
     ORDER BY c.embedding::${cast} <=> $1::${cast} LIMIT $2`,
    params,
  );
  return rows.map((row) => ({ ...row, cosine: Number(row.cosine) }));
}

export interface SealedChunk {
  version_id: string;
  chunk_index: number;
  entry_id: string;
  scope: string;
  embedding_sealed: Buffer;
}

/** A strict brain's sealed vectors in the recall's scopes, to be opened and scored in the CPU pool. */
export async function sealedChunks(q: Queryable, brainId: string, space: number, filter: ScopeFilter, asOf: Date | null): Promise<SealedChunk[]> {
  const scopes = scopeSql(filter, 1);
  const validity = asOf === null ? 'c.valid_to IS NULL' : `c.valid_from <= $${1 + scopes.params.length} AND (c.valid_to IS NULL OR c.valid_to > $${1 + scopes.params.length})`;
  const { rows } = await q.query<SealedChunk>(
    `SELECT c.version_id, c.chunk_index, c.entry_id, c.scope, c.embedding_sealed FROM ${partitionOf(brainId)} c
     WHERE c.space = ${Number(space)} AND ${validity} AND ${scopes.sql}`,
    [...scopes.params, ...(asOf === null ? [] : [asOf])],
  );
  return rows;
}

export async function versionsByIds(q: Queryable, versionIds: string[]): Promise<Map<string, EntryRow>> {
  if (versionIds.length === 0) return new Map();
  const { rows } = await q.query<EntryRow>(`SELECT * FROM brain_entries WHERE version_id = ANY($1::bigint[])`, [versionIds]);
  return new Map(rows.map((row) => [String(row.version_id), row]));
}

export async function chunkContents(q: Queryable, brainId: string, space: number, keys: { version_id: string; chunk_index: number }[]): Promise<Map<string, { content: string | null; content_sealed: Buffer | null }>> {
  if (keys.length === 0) return new Map();
  const { rows } = await q.query<{ version_id: string; chunk_index: number; content: string | null; content_sealed: Buffer | null }>(
    `SELECT c.version_id, c.chunk_index, c.content, c.content_sealed FROM ${partitionOf(brainId)} c
     JOIN unnest($2::bigint[], $3::int[]) AS k(version_id, chunk_index) ON k.version_id = c.version_id AND k.chunk_index = c.chunk_index
     WHERE c.space = $1`,
    [space, keys.map((key) => key.version_id), keys.map((key) => key.chunk_index)],
  );
  return new Map(rows.map((row) => [`${row.version_id}:${row.chunk_index}`, row]));
}
