import type { Queryable } from '../db/pool.js';
import * as packs from './pack-repository.js';
import { partitionOf, type EntryRow } from './repository.js';

/** SQL of mounts (brain_mounts, migrations/025_brain_packs.sql) and of what a materialize mount imports. */

export interface MountRow {
  id: string;
  brain_id: string;
  pack_id: string;
  mode: 'reference' | 'materialize';
  pinned_version: number;
  follow_latest: boolean;
  /** Source scope path to target scope path. */
  scope_map: Record<string, string>;
  status: 'pending' | 'ready';
  materialized_version: number | null;
  created_at: Date;
  updated_at: Date;
}

export async function insertMount(q: Queryable, mount: Pick<MountRow, 'id' | 'brain_id' | 'pack_id' | 'mode' | 'pinned_version' | 'follow_latest' | 'scope_map' | 'status'>): Promise<MountRow> {
  const { rows } = await q.query<MountRow>(
    `INSERT INTO brain_mounts (id, brain_id, pack_id, mode, pinned_version, follow_latest, scope_map, status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [mount.id, mount.brain_id, mount.pack_id, mount.mode, mount.pinned_version, mount.follow_latest, JSON.stringify(mount.scope_map), mount.status],
  );
  return rows[0]!;
}

export async function mountOf(q: Queryable, brainId: string, mountId: string, lock?: 'update'): Promise<MountRow | undefined> {
  const { rows } = await q.query<MountRow>(`SELECT * FROM brain_mounts WHERE id = $1 AND brain_id = $2${lock ? ' FOR UPDATE' : ''}`, [mountId, brainId]);
  return rows[0];
}

export async function mountById(q: Queryable, mountId: string, lock?: 'update'): Promise<MountRow | undefined> {
  const { rows } = await q.query<MountRow>(`SELECT * FROM brain_mounts WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [mountId]);
  return rows[0];
}

export async function mountsOfBrain(q: Queryable, brainId: string): Promise<MountRow[]> {
  const { rows } = await q.query<MountRow>(`SELECT * FROM brain_mounts WHERE brain_id = $1 ORDER BY created_at, id`, [brainId]);
  return rows;
}

/** What the caps of a new mount count: the brain's mounts, its reference mounts, and whether this pack is one of them. */
export async function mountCounts(q: Queryable, brainId: string, packId: string): Promise<{ total: number; reference: number; of_pack: number }> {
  const { rows } = await q.query<{ total: number; reference: number; of_pack: number }>(
    `SELECT count(*)::int AS total, count(*) FILTER (WHERE mode = 'reference')::int AS reference, count(*) FILTER (WHERE pack_id = $2)::int AS of_pack
     FROM brain_mounts WHERE brain_id = $1`,
    [brainId, packId],
  );
  return rows[0]!;
}

export async function hasMounts(q: Queryable, brainId: string): Promise<boolean> {
  const { rows } = await q.query(`SELECT 1 FROM brain_mounts WHERE brain_id = $1 LIMIT 1`, [brainId]);
  return rows.length > 0;
}

export async function updateMount(q: Queryable, mountId: string, fields: Partial<Pick<MountRow, 'pinned_version' | 'follow_latest' | 'status'>>): Promise<MountRow> {
  const { rows } = await q.query<MountRow>(
    `UPDATE brain_mounts SET pinned_version = coalesce($2, pinned_version), follow_latest = coalesce($3, follow_latest), status = coalesce($4, status), updated_at = now()
     WHERE id = $1 RETURNING *`,
    [mountId, fields.pinned_version ?? null, fields.follow_latest ?? null, fields.status ?? null],
  );
  return rows[0]!;
}

export async function markMaterialized(q: Queryable, mountId: string, version: number): Promise<void> {
  await q.query(`UPDATE brain_mounts SET status = 'ready', materialized_version = $2, updated_at = now() WHERE id = $1`, [mountId, version]);
}

export async function deleteMount(q: Queryable, mountId: string): Promise<void> {
  await q.query(`DELETE FROM brain_mounts WHERE id = $1`, [mountId]);
}

/**
 * The mounts a new ready version of a pack moves (follow_latest, behind it), locked: those of
 * brains that are not being deleted and whose owner still reaches the pack (owns it or holds a
 * grant; a revoked grantee keeps what it has, and gets nothing newer).
 */
export async function followingMounts(q: Queryable, packId: string, version: number): Promise<MountRow[]> {
  const { rows } = await q.query<MountRow>(
    `SELECT m.* FROM brain_mounts m JOIN brains b ON b.id = m.brain_id JOIN brain_packs p ON p.id = m.pack_id
     WHERE m.pack_id = $1 AND m.follow_latest AND m.pinned_version < $2 AND b.state = 'active'
       AND (b.developer_id = p.developer_id OR EXISTS (SELECT 1 FROM brain_pack_grants g WHERE g.pack_id = p.id AND g.account_id = b.developer_id))
     ORDER BY m.id FOR UPDATE OF m`,
    [packId, version],
  );
  return rows;
}

/** Whether a version's content is still needed: a reference mount pins it, or a materialize mount is importing it. */
export async function versionInUse(q: Queryable, packId: string, version: number): Promise<boolean> {
  const { rows } = await q.query(
    `SELECT 1 FROM brain_mounts WHERE pack_id = $1 AND pinned_version = $2 AND (mode = 'reference' OR materialized_version IS DISTINCT FROM pinned_version) LIMIT 1`,
    [packId, version],
  );
  return rows.length > 0;
}

const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Drops a version's content (its chunk partition, entries and graph) and marks it dropped; the
 * version row stays. Runs inside the caller's transaction. A partition still being read (an
 * import, a recall) is waited on for `waitMs` at most; past that the content stays, and false says so.
 */
export async function dropVersionContent(q: Queryable, versionId: string, waitMs = 2_000): Promise<boolean> {
  await q.query('SAVEPOINT drop_version_content');
  try {
    await q.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(waitMs))}`);
    const partition = packs.versionPartitionOf(versionId);
    // Without a partition (a build that never began) there is no chunk to drop, only the rest and the mark.
    const { rows } = await q.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [partition]);
    if (rows[0]!.present) await q.query(`LOCK TABLE ${partition} IN ACCESS EXCLUSIVE MODE`);
    await packs.clearVersionContent(q, versionId);
    await q.query(`UPDATE brain_pack_versions SET content_dropped_at = now() WHERE id = $1`, [versionId]);
    await q.query('SET LOCAL lock_timeout = DEFAULT');
    await q.query('RELEASE SAVEPOINT drop_version_content');
    return true;
  } catch (error) {
    await q.query('ROLLBACK TO SAVEPOINT drop_version_content');
    if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) return false;
    throw error;
  }
}

/** Serializes the imports of one mount (a retried activity and its killed predecessor's transaction, say) until the transaction ends. */
export async function lockMountImport(q: Queryable, mountId: string): Promise<void> {
  await q.query(`SELECT pg_advisory_xact_lock(hashtextextended('brain-mount-import ' || $1, 0))`, [mountId]);
}

export type PackEntry = Omit<EntryRow, 'version_id' | 'brain_id' | 'origin' | 'source_mount_id' | 'use_count' | 'last_used' | 'valid_from' | 'valid_to'>;

/** A version's entries, a page at a time in entry order. */
export async function versionEntries(q: Queryable, versionId: string, afterEntryId: string, limit: number): Promise<PackEntry[]> {
  const { rows } = await q.query<PackEntry>(
    `SELECT entry_id, scope, class, type, title, body, title_sealed, body_sealed, body_bytes, trust, source, created_at, updated_at, chunks
     FROM brain_pack_entries WHERE version_id = $1 AND entry_id > $2 ORDER BY entry_id LIMIT $3`,
    [versionId, afterEntryId, limit],
  );
  return rows;
}

export interface PackChunk {
  entry_id: string;
  chunk_index: number;
  content: string | null;
  content_sealed: Buffer | null;
  embedding: number[] | null;
  embedding_sealed: Buffer | null;
}

/** The chunks of these entries of a version, in entry and chunk order. */
export async function versionChunks(q: Queryable, versionId: string, entryIds: string[]): Promise<PackChunk[]> {
  const { rows } = await q.query<PackChunk>(
    `SELECT entry_id, chunk_index, content, content_sealed, embedding, embedding_sealed FROM ${packs.versionPartitionOf(versionId)}
     WHERE version_id = $1 AND entry_id = ANY($2) ORDER BY entry_id, chunk_index`,
    [versionId, entryIds],
  );
  return rows;
}

export type ImportedEntry = Pick<EntryRow, 'entry_id' | 'scope' | 'class' | 'type' | 'title' | 'body' | 'title_sealed' | 'body_sealed' | 'body_bytes' | 'trust' | 'source' | 'created_at' | 'updated_at' | 'chunks'>;

/** Imported entries land as current versions of origin reference; returns each one's version id and validity. */
export async function insertImportedEntries(q: Queryable, brainId: string, mountId: string, entries: ImportedEntry[]): Promise<Map<string, Pick<EntryRow, 'version_id' | 'valid_from'>>> {
  if (entries.length === 0) return new Map();
  const { rows } = await q.query<Pick<EntryRow, 'version_id' | 'entry_id' | 'valid_from'>>(
    `INSERT INTO brain_entries (brain_id, entry_id, scope, class, type, title, body, title_sealed, body_sealed, body_bytes, trust, origin, source_mount_id, source,
       use_count, last_used, created_at, updated_at, valid_from, chunks)
     SELECT $1, e.entry_id, e.scope, e.class, e.type, e.title, e.body, e.title_sealed, e.body_sealed, e.body_bytes, e.trust, 'reference', $2, e.source,
       0, NULL, e.created_at, e.updated_at, now(), e.chunks
     FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bytea[], $10::bytea[], $11::bigint[], $12::text[], $13::text[], $14::timestamptz[], $15::timestamptz[], $16::int[])
       AS e(entry_id, scope, class, type, title, body, title_sealed, body_sealed, body_bytes, trust, source, created_at, updated_at, chunks)
     RETURNING version_id::text AS version_id, entry_id, valid_from`,
    [
      brainId, mountId,
      entries.map((e) => e.entry_id), entries.map((e) => e.scope), entries.map((e) => e.class), entries.map((e) => e.type), entries.map((e) => e.title),
      entries.map((e) => e.body), entries.map((e) => e.title_sealed), entries.map((e) => e.body_sealed), entries.map((e) => e.body_bytes), entries.map((e) => e.trust),
      entries.map((e) => e.source), entries.map((e) => e.created_at), entries.map((e) => e.updated_at), entries.map((e) => e.chunks),
    ],
  );
  return new Map(rows.map((row) => [row.entry_id, { version_id: row.version_id, valid_from: row.valid_from }]));
}

/** A chunk as a materialize mount imports it: as a snapshot holds one, valid from its entry's import. */
export interface ImportedChunk extends packs.SnapshotChunk {
  valid_from: Date;
}

export async function insertImportedChunks(q: Queryable, brainId: string, space: number, chunks: ImportedChunk[]): Promise<void> {
  const batch = 500;
  for (let start = 0; start < chunks.length; start += batch) {
    const slice = chunks.slice(start, start + batch);
    await q.query(
      `INSERT INTO ${partitionOf(brainId)} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)
       SELECT $1, $2, c.version_id, c.chunk_index, c.entry_id, c.scope, c.content, c.content_sealed, c.embedding::vector, c.embedding_sealed, c.valid_from
       FROM unnest($3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[], $8::bytea[], $9::text[], $10::bytea[], $11::timestamptz[])
         AS c(version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)`,
      [
        brainId, space,
        slice.map((c) => c.version_id), slice.map((c) => c.chunk_index), slice.map((c) => c.entry_id), slice.map((c) => c.scope), slice.map((c) => c.content),
        slice.map((c) => c.content_sealed), slice.map((c) => c.embedding), slice.map((c) => c.embedding_sealed), slice.map((c) => c.valid_from),
      ],
    );
  }
}

/** The entry ids a mount imported into its brain (any version of theirs). */
export async function importedEntryIds(q: Queryable, brainId: string, mountId: string): Promise<string[]> {
  const { rows } = await q.query<{ entry_id: string }>(`SELECT DISTINCT entry_id FROM brain_entries WHERE brain_id = $1 AND source_mount_id = $2`, [brainId, mountId]);
  return rows.map((row) => row.entry_id);
}
