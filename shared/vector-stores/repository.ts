import { toSql } from 'pgvector';
import { partitionName } from '../db/partitions.js';
import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';
import type { ENCRYPTIONS, VECTOR_INDEXES, VECTOR_SEALINGS } from './schemas.js';

/** SQL of vector stores, their files, file batches and chunks. Every statement names the developer or a store already checked to be theirs. */

export interface VectorStoreRow {
  id: string;
  developer_id: string;
  name: string | null;
  description: string | null;
  embedding_model: string;
  dimensions: number;
  encryption: (typeof ENCRYPTIONS)[number];
  vector_sealing: (typeof VECTOR_SEALINGS)[number];
  vector_index: (typeof VECTOR_INDEXES)[number];
  /** The precision of the store's HNSW graph: half for stores created since migration 033. */
  hnsw_precision: 'single' | 'half';
  graphrag_enabled: boolean;
  metadata: Record<string, string> | null;
  wrapped_data_key: Buffer | null;
  kdf_salt: Buffer | null;
  state: 'active' | 'deleting' | 'deleted';
  suspended_at: Date | null;
  active_space: number;
  expires_after_days: number | null;
  last_active_at: Date;
  created_at: Date;
  updated_at: Date;
}

export interface FileCounts {
  in_progress: number;
  completed: number;
  failed: number;
  cancelled: number;
  total: number;
}

export interface StoreWithCounts extends VectorStoreRow {
  file_counts: FileCounts;
  usage_bytes: number;
}

const STORE_COLUMNS = `s.id, s.developer_id, s.name, s.description, s.embedding_model, s.dimensions, s.encryption, s.vector_sealing,
  s.vector_index, s.graphrag_enabled, s.metadata, s.wrapped_data_key, s.kdf_salt, s.state, s.suspended_at, s.active_space, s.expires_after_days,
  s.last_active_at, s.created_at, s.updated_at, s.hnsw_precision`;

// pending files count as in_progress, as OpenAI's file_counts have no pending.
const COUNTS = `LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE f.status IN ('pending', 'in_progress'))::int AS in_progress,
           count(*) FILTER (WHERE f.status = 'completed')::int AS completed,
           count(*) FILTER (WHERE f.status = 'failed')::int AS failed,
           count(*) FILTER (WHERE f.status = 'cancelled')::int AS cancelled,
           count(*)::int AS total,
           coalesce(sum(f.usage_bytes), 0)::bigint AS usage_bytes
    FROM vector_store_files f WHERE f.vector_store_id = s.id) c ON true`;

const WITH_COUNTS = `${STORE_COLUMNS}, json_build_object('in_progress', c.in_progress, 'completed', c.completed, 'failed', c.failed,
  'cancelled', c.cancelled, 'total', c.total) AS file_counts, c.usage_bytes`;

function withNumbers(row: StoreWithCounts): StoreWithCounts {
  return { ...row, usage_bytes: Number(row.usage_bytes) };
}

export type NewVectorStore = Pick<
  VectorStoreRow,
  'id' | 'name' | 'description' | 'embedding_model' | 'dimensions' | 'encryption' | 'vector_sealing' | 'vector_index' | 'graphrag_enabled' | 'metadata' | 'wrapped_data_key' | 'kdf_salt' | 'expires_after_days'
>;

/**
 * Every chunk statement names the store's partition itself, never the parent table: a query
 * through the parent would hold a lock on it that creating or detaching another store's
 * partition has to wait for.
 *
 * The store row and its chunk partition; `hnswDimensions` (stores whose vectors PostgreSQL may
 * read) also gets the HNSW index of the first embedding space.
 */
export async function insertStore(q: Queryable, developerId: string, store: NewVectorStore, hnswDimensions: number | null): Promise<void> {
  await q.query(
    `INSERT INTO vector_stores (id, developer_id, name, description, embedding_model, dimensions, encryption, vector_sealing, vector_index,
       graphrag_enabled, metadata, wrapped_data_key, kdf_salt, expires_after_days, hnsw_precision)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
    [
      store.id, developerId, store.name, store.description, store.embedding_model, store.dimensions, store.encryption, store.vector_sealing,
      store.vector_index, store.graphrag_enabled, store.metadata === null ? null : JSON.stringify(store.metadata), store.wrapped_data_key,
      store.kdf_salt, store.expires_after_days, NEW_STORE_HNSW_PRECISION,
    ],
  );
  await q.query(`CREATE TABLE ${partitionOf(store.id)} PARTITION OF vector_store_chunks FOR VALUES IN (${storeLiteral(store.id)})`);
  await q.query(`CREATE INDEX ON ${partitionOf(store.id)} USING gin (tsv)`);
  await q.query(`CREATE INDEX ON ${partitionOf(store.id)} USING gin (terms)`);
  if (hnswDimensions !== null) await createSpaceIndex(q, { id: store.id, hnsw_precision: NEW_STORE_HNSW_PRECISION }, 1, hnswDimensions);
  // Sealed vectors are read a page at a time in IVF-list order (sealedVectorPages).
  if (store.vector_sealing === 'full') await q.query(`CREATE INDEX ON ${partitionOf(store.id)} (space, (coalesce(ivf_list, ${UNLISTED})), file_id, chunk_index)`);
}

/** The HNSW index (cosine) over one embedding space of a store, in the store's precision. */
export async function createSpaceIndex(q: Queryable, store: Pick<VectorStoreRow, 'id' | 'hnsw_precision'>, space: number, dimensions: number): Promise<void> {
  const storeId = store.id;
  const { cast, ops } = hnswCast(store, dimensions);
  await q.query(
    `CREATE INDEX IF NOT EXISTS ${indexName(storeId, space)} ON ${partitionOf(storeId)} USING hnsw ((embedding::${cast}) ${ops}) WITH (m = ${HNSW.m}, ef_construction = ${HNSW.efConstruction}) WHERE space = ${Number(space)}`,
  );
}

/**
 * HNSW graph parameters, measured on 100,000 chunks of 1,536 dimensions (the bench's corpus) and on
 * 1,829 chunks written into a new store, 92 a statement, 8 at once:
 * - m 32, ef_construction 64: recall@10 0.961 at ef_search 200; 293 rows/s written.
 * - m 16, ef_construction 64: recall@10 0.903 at ef_search 200, 0.950 at 600; 845 rows/s.
 * - m 16, ef_construction 128: recall@10 0.986 at ef_search 300 (p95 10.4 ms); 644 rows/s.
 * A row written links into up to 2·m neighbours on the base layer and re-prunes each of their
 * lists, so the write costs grow with m much faster than with the build beam, while the wider beam
 * finds the better neighbours that recall needs.
 */
export const HNSW = { m: 16, efConstruction: 128 };

/**
 * New stores build their graph over halfvec: half the bytes per distance, so writes link in about
 * a fifth faster (689-702 against 546-570 rows/s above), recall@10 0.976 at ef_search 300.
 */
const NEW_STORE_HNSW_PRECISION = 'half' as const;

export async function dropSpaceIndex(q: Queryable, storeId: string, space: number): Promise<void> {
  await q.query(`DROP INDEX IF EXISTS ${indexName(storeId, space)}`);
}

/** What a store's HNSW graph is built over, and its searches order by: halfvec, or vector up to pgvector's 2,000-dimension limit for it. */
export function hnswCast(store: Pick<VectorStoreRow, 'hnsw_precision'>, dimensions: number): { cast: string; ops: string } {
  return store.hnsw_precision === 'half' ? { cast: `halfvec(${Number(dimensions)})`, ops: 'halfvec_cosine_ops' } : vectorCast(dimensions);
}

export function vectorCast(dimensions: number): { cast: string; ops: string } {
  const d = Number(dimensions);
  return d > 2000 ? { cast: `halfvec(${d})`, ops: 'halfvec_cosine_ops' } : { cast: `vector(${d})`, ops: 'vector_cosine_ops' };
}

/** Store ids are checked by the table's CHECK (vs_ and 24 base62 characters), so they are safe to name in DDL. */
const STORE_ID = /^vs_[0-9A-Za-z]{24}$/;
export const partitionOf = (storeId: string): string => partitionName('vector_store_chunks', storeId, STORE_ID, 3);
const indexName = (storeId: string, space: number) => `${partitionOf(storeId)}_s${Number(space)}_hnsw`;
const storeLiteral = (storeId: string) => {
  partitionOf(storeId);
  return `'${storeId}'`;
};
export async function findStore(q: Queryable, developerId: string, id: string): Promise<StoreWithCounts | undefined> {
  const { rows } = await q.query<StoreWithCounts>(`SELECT ${WITH_COUNTS} FROM vector_stores s ${COUNTS} WHERE s.developer_id = $1 AND s.id = $2`, [developerId, id]);
  return rows[0] && withNumbers(rows[0]);
}

/** The row alone, locked for a state change (FOR SHARE: many writers of files, none deleting). */
export async function lockStore(q: Queryable, developerId: string, id: string, mode: 'share' | 'update'): Promise<VectorStoreRow | undefined> {
  const { rows } = await q.query<VectorStoreRow>(
    `SELECT ${STORE_COLUMNS} FROM vector_stores s WHERE s.developer_id = $1 AND s.id = $2 FOR ${mode === 'share' ? 'SHARE' : 'UPDATE'}`,
    [developerId, id],
  );
  return rows[0];
}

export async function findStoreById(q: Queryable, id: string): Promise<VectorStoreRow | undefined> {
  const { rows } = await q.query<VectorStoreRow>(`SELECT ${STORE_COLUMNS} FROM vector_stores s WHERE s.id = $1`, [id]);
  return rows[0];
}

export interface ListPage {
  limit: number;
  after: CursorPosition | undefined;
  order: 'asc' | 'desc';
}

export async function listStores(q: Queryable, developerId: string, page: ListPage): Promise<StoreWithCounts[]> {
  const [cmp, dir] = page.order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
  const { rows } = await q.query<StoreWithCounts>(
    `SELECT ${WITH_COUNTS} FROM vector_stores s ${COUNTS}
     WHERE s.developer_id = $1 AND s.state = 'active'
       AND ($2::text IS NULL OR (s.created_at, s.id) ${cmp} (SELECT a.created_at, a.id FROM vector_stores a WHERE a.developer_id = $1 AND a.id = $2))
     ORDER BY s.created_at ${dir}, s.id ${dir}
     LIMIT $3`,
    [developerId, page.after?.id ?? null, page.limit + 1],
  );
  return rows.map(withNumbers);
}

export async function updateStore(
  q: Queryable,
  developerId: string,
  id: string,
  patch: { name?: string | null; description?: string | null; metadata?: Record<string, string> | null; expires_after_days?: number | null },
): Promise<void> {
  await q.query(
    `UPDATE vector_stores SET
       name = CASE WHEN $3 THEN $4 ELSE name END,
       description = CASE WHEN $5 THEN $6 ELSE description END,
       metadata = CASE WHEN $7 THEN $8::jsonb ELSE metadata END,
       expires_after_days = CASE WHEN $9 THEN $10::int ELSE expires_after_days END,
       last_active_at = now(), updated_at = now()
     WHERE developer_id = $1 AND id = $2`,
    [
      developerId, id,
      patch.name !== undefined, patch.name ?? null,
      patch.description !== undefined, patch.description ?? null,
      patch.metadata !== undefined, patch.metadata == null ? null : JSON.stringify(patch.metadata),
      patch.expires_after_days !== undefined, patch.expires_after_days ?? null,
    ],
  );
}

/** A store's row locked ahead of its suspension, first, as other paths lock it (store, then batch, then file). */
export async function lockStoreForSuspension(q: Queryable, id: string): Promise<void> {
  await q.query(`SELECT id FROM vector_stores WHERE id = $1 FOR NO KEY UPDATE`, [id]);
}

/** Suspends (true) or resumes (false) a store; returns whether that changed anything. */
export async function setSuspended(q: Queryable, id: string, suspended: boolean): Promise<boolean> {
  const { rowCount } = await q.query(
    suspended
      ? `UPDATE vector_stores SET suspended_at = now() WHERE id = $1 AND suspended_at IS NULL`
      : `UPDATE vector_stores SET suspended_at = NULL WHERE id = $1 AND suspended_at IS NOT NULL`,
    [id],
  );
  return (rowCount ?? 0) > 0;
}

export async function touchStore(q: Queryable, id: string): Promise<void> {
  await q.query(`UPDATE vector_stores SET last_active_at = now() WHERE id = $1 AND last_active_at < now() - interval '1 minute'`, [id]);
}

export async function setStoreState(q: Queryable, id: string, state: VectorStoreRow['state']): Promise<void> {
  await q.query(`UPDATE vector_stores SET state = $2, updated_at = now() WHERE id = $1`, [id, state]);
}

/**
 * Removes a deleted store's content: its chunk partition, facts and file attachments; the row
 * stays as a tombstone. The partition is detached CONCURRENTLY first (outside a transaction: `q`
 * is the pool), so searches of other stores never wait on the parent table's lock.
 */
export async function dropStoreContent(q: Queryable, id: string): Promise<void> {
  const attached = await q.query<{ pending: boolean }>(
    `SELECT inhdetachpending AS pending FROM pg_inherits WHERE inhrelid = to_regclass($1) AND inhparent = 'vector_store_chunks'::regclass`,
    [partitionOf(id)],
  );
  // A detach interrupted half-way (a worker killed) is finished rather than started again.
  if (attached.rows[0]) await q.query(`ALTER TABLE vector_store_chunks DETACH PARTITION ${partitionOf(id)} ${attached.rows[0].pending ? 'FINALIZE' : 'CONCURRENTLY'}`);
  await q.query(`DROP TABLE IF EXISTS ${partitionOf(id)}`);
  await q.query(`DELETE FROM vector_store_facts WHERE vector_store_id = $1`, [id]);
  await q.query(`DELETE FROM vector_store_files WHERE vector_store_id = $1`, [id]);
  await q.query(`UPDATE vector_stores SET state = 'deleted', wrapped_data_key = CASE WHEN encryption = 'none' THEN NULL ELSE wrapped_data_key END, updated_at = now() WHERE id = $1`, [id]);
}

// ---- files ------------------------------------------------------------------------------------

export interface StoreFileRow {
  vector_store_id: string;
  file_id: string;
  developer_id: string;
  payer_account_id: string;
  customer_id: string | null;
  batch_id: string | null;
  status: 'pending' | 'in_progress' | 'completed' | 'failed' | 'cancelled';
  attempt: number;
  attributes: Record<string, string | number | boolean> | null;
  chunking: { max_chunk_size_tokens: number; chunk_overlap_tokens: number; type: 'auto' | 'static' };
  chunk_count: number;
  usage_bytes: number;
  last_error_code: string | null;
  last_error_message: string | null;
  created_at: Date;
  updated_at: Date;
}

const FILE_COLUMNS = `vector_store_id, file_id, developer_id, payer_account_id, customer_id, batch_id, status, attempt, attributes, chunking, chunk_count,
  usage_bytes::float8 AS usage_bytes, last_error_code, last_error_message, created_at, updated_at`;

export interface NewStoreFile {
  fileId: string;
  customerId: string | null;
  batchId: string | null;
  attributes: StoreFileRow['attributes'];
  chunking: StoreFileRow['chunking'];
}

/**
 * Attaches files (again: a file attached before starts over as a new attempt). Returns the rows
 * that now wait for ingest, with their attempt.
 */
export async function upsertFiles(q: Queryable, payer: { developerId: string; payerAccountId: string }, storeId: string, files: NewStoreFile[]): Promise<StoreFileRow[]> {
  if (files.length === 0) return [];
  const { rows } = await q.query<StoreFileRow>(
    `INSERT INTO vector_store_files (vector_store_id, file_id, developer_id, payer_account_id, customer_id, batch_id, attributes, chunking)
     SELECT $1, f.file_id, $2, $4, f.customer_id, f.batch_id, f.attributes, f.chunking
     FROM jsonb_to_recordset($3::jsonb) AS f(file_id text, customer_id text, batch_id text, attributes jsonb, chunking jsonb)
     ON CONFLICT (vector_store_id, file_id) DO UPDATE SET
       status = 'pending', attempt = vector_store_files.attempt + 1, payer_account_id = excluded.payer_account_id, customer_id = excluded.customer_id, batch_id = excluded.batch_id,
       attributes = excluded.attributes, chunking = excluded.chunking, chunk_count = 0, usage_bytes = 0,
       last_error_code = NULL, last_error_message = NULL, updated_at = now()
     RETURNING ${FILE_COLUMNS}`,
    [
      storeId,
      payer.developerId,
      JSON.stringify(files.map((file) => ({ file_id: file.fileId, customer_id: file.customerId, batch_id: file.batchId, attributes: file.attributes, chunking: file.chunking }))),
      payer.payerAccountId,
    ],
  );
  return rows;
}

export async function findStoreFile(q: Queryable, storeId: string, fileId: string, lock = false): Promise<StoreFileRow | undefined> {
  const { rows } = await q.query<StoreFileRow>(`SELECT ${FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = $1 AND file_id = $2${lock ? ' FOR UPDATE' : ''}`, [storeId, fileId]);
  return rows[0];
}

export async function listStoreFiles(
  q: Queryable,
  storeId: string,
  page: ListPage,
  filter: { status?: string | undefined; batchId?: string | undefined },
): Promise<StoreFileRow[]> {
  const [cmp, dir] = page.order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
  // OpenAI's in_progress filter covers the files that have not started yet.
  const statuses = filter.status === 'in_progress' ? ['pending', 'in_progress'] : filter.status ? [filter.status] : null;
  const { rows } = await q.query<StoreFileRow>(
    `SELECT ${FILE_COLUMNS} FROM vector_store_files
     WHERE vector_store_id = $1
       AND ($2::text[] IS NULL OR status = ANY($2))
       AND ($3::text IS NULL OR batch_id = $3)
       AND ($4::text IS NULL OR (created_at, file_id) ${cmp} (SELECT a.created_at, a.file_id FROM vector_store_files a WHERE a.vector_store_id = $1 AND a.file_id = $4))
     ORDER BY created_at ${dir}, file_id ${dir}
     LIMIT $5`,
    [storeId, statuses, filter.batchId ?? null, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

export async function updateFileAttributes(q: Queryable, storeId: string, fileId: string, attributes: StoreFileRow['attributes']): Promise<StoreFileRow | undefined> {
  const { rows } = await q.query<StoreFileRow>(
    `UPDATE vector_store_files SET attributes = $3, updated_at = now() WHERE vector_store_id = $1 AND file_id = $2 RETURNING ${FILE_COLUMNS}`,
    [storeId, fileId, attributes === null ? null : JSON.stringify(attributes)],
  );
  return rows[0];
}

/** Moves a file of one attempt from one set of states to another; undefined when it was not in them (or a later attempt runs). */
export async function moveFile(
  q: Queryable,
  storeId: string,
  fileId: string,
  from: StoreFileRow['status'][],
  to: StoreFileRow['status'],
  options: { attempt?: number; error?: { code: string; message: string }; chunkCount?: number; usageBytes?: number } = {},
): Promise<StoreFileRow | undefined> {
  const { rows } = await q.query<StoreFileRow>(
    `UPDATE vector_store_files SET status = $4, updated_at = now(),
       attempt = CASE WHEN $4 = 'pending' THEN attempt + 1 ELSE attempt END,
       last_error_code = CASE WHEN $4 = 'failed' THEN $6 WHEN $4 = 'pending' THEN NULL ELSE last_error_code END,
       last_error_message = CASE WHEN $4 = 'failed' THEN $7 WHEN $4 = 'pending' THEN NULL ELSE last_error_message END,
       chunk_count = coalesce($8, chunk_count), usage_bytes = coalesce($9, usage_bytes)
     WHERE vector_store_id = $1 AND file_id = $2 AND status = ANY($3) AND ($5::int IS NULL OR attempt = $5)
     RETURNING ${FILE_COLUMNS}`,
    [storeId, fileId, from, to, options.attempt ?? null, options.error?.code ?? null, options.error?.message ?? null, options.chunkCount ?? null, options.usageBytes ?? null],
  );
  return rows[0];
}

/** Progress of an ingest: a stage started or a batch was embedded (the sweep looks for files without any). */
export async function touchFile(q: Queryable, storeId: string, fileId: string, attempt: number): Promise<void> {
  await q.query(`UPDATE vector_store_files SET updated_at = now() WHERE vector_store_id = $1 AND file_id = $2 AND attempt = $3`, [storeId, fileId, attempt]);
}

/** Files whose ingest made no progress for `seconds` (its queued job was lost), with their store's encryption. */
export async function stalledFiles(q: Queryable, seconds: number, limit: number): Promise<(StoreFileRow & { encryption: string })[]> {
  const { rows } = await q.query<StoreFileRow & { encryption: string }>(
    `SELECT ${FILE_COLUMNS}, encryption FROM (
       SELECT f.*, s.encryption FROM vector_store_files f JOIN vector_stores s ON s.id = f.vector_store_id
       WHERE f.status IN ('pending', 'in_progress') AND f.updated_at < now() - make_interval(secs => $1) AND s.state = 'active'
       ORDER BY f.updated_at LIMIT $2) stalled`,
    [seconds, limit],
  );
  return rows;
}

/** Stores left deleting for `seconds` (their deletion workflow was not started). */
export async function stalledDeletions(q: Queryable, seconds: number): Promise<string[]> {
  const { rows } = await q.query<{ id: string }>(`SELECT id FROM vector_stores WHERE state = 'deleting' AND updated_at < now() - make_interval(secs => $1) LIMIT 100`, [seconds]);
  return rows.map((row) => row.id);
}

export async function deleteStoreFile(q: Queryable, storeId: string, fileId: string): Promise<boolean> {
  const { rowCount } = await q.query(`DELETE FROM vector_store_files WHERE vector_store_id = $1 AND file_id = $2`, [storeId, fileId]);
  await deleteFileChunks(q, storeId, fileId);
  return (rowCount ?? 0) > 0;
}

/** A file's chunks of every space and its facts (a cancelled, detached or re-ingested file). */
export async function deleteFileChunks(q: Queryable, storeId: string, fileId: string): Promise<void> {
  await q.query(`DELETE FROM ${partitionOf(storeId)} WHERE file_id = $1`, [fileId]);
  await q.query(`DELETE FROM vector_store_facts WHERE vector_store_id = $1 AND file_id = $2`, [storeId, fileId]);
}

// ---- file batches -----------------------------------------------------------------------------

export interface FileBatchRow {
  id: string;
  vector_store_id: string;
  cancelled_at: Date | null;
  created_at: Date;
  file_counts: FileCounts;
}

export async function insertFileBatch(q: Queryable, developerId: string, storeId: string, id: string): Promise<void> {
  await q.query(`INSERT INTO vector_store_file_batches (id, vector_store_id, developer_id) VALUES ($1, $2, $3)`, [id, storeId, developerId]);
}

export async function findFileBatch(q: Queryable, storeId: string, id: string): Promise<FileBatchRow | undefined> {
  const { rows } = await q.query<FileBatchRow>(
    `SELECT b.id, b.vector_store_id, b.cancelled_at, b.created_at,
       json_build_object(
         'in_progress', count(*) FILTER (WHERE f.status IN ('pending', 'in_progress')),
         'completed', count(*) FILTER (WHERE f.status = 'completed'),
         'failed', count(*) FILTER (WHERE f.status = 'failed'),
         'cancelled', count(*) FILTER (WHERE f.status = 'cancelled'),
         'total', count(f.file_id)) AS file_counts
     FROM vector_store_file_batches b LEFT JOIN vector_store_files f ON f.batch_id = b.id AND f.vector_store_id = b.vector_store_id
     WHERE b.vector_store_id = $1 AND b.id = $2
     GROUP BY b.id`,
    [storeId, id],
  );
  return rows[0];
}

/**
 * Takes the row lock of the batch a file was attached by (none for a file attached alone), for a
 * transaction that finishes the file, before the file's own lock: two files finishing at once
 * then commit one after the other, so exactly one of them sees the other's commit and finishes the
 * batch (finishFileBatch). Every path takes batch before file.
 */
export async function lockBatchOfFile(q: Queryable, storeId: string, fileId: string): Promise<void> {
  await q.query(
    `SELECT b.id FROM vector_store_file_batches b JOIN vector_store_files f ON f.batch_id = b.id
     WHERE f.vector_store_id = $1 AND f.file_id = $2 FOR UPDATE OF b`,
    [storeId, fileId],
  );
}

/**
 * Marks a batch finished when none of its files is pending or running; returns it only to the call
 * that did it. The caller holds the batch's lock (lockBatchOfFile, or an update of the batch row).
 */
export async function finishFileBatch(q: Queryable, batchId: string): Promise<{ id: string; vector_store_id: string } | undefined> {
  const { rows } = await q.query<{ id: string; vector_store_id: string }>(
    `UPDATE vector_store_file_batches b SET finished_at = now()
     WHERE b.id = $1 AND b.finished_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM vector_store_files f WHERE f.batch_id = b.id AND f.status IN ('pending', 'in_progress'))
     RETURNING b.id, b.vector_store_id`,
    [batchId],
  );
  return rows[0];
}

/** Cancels a batch's files that have not finished; returns them. */
export async function cancelFileBatch(q: Queryable, storeId: string, id: string): Promise<StoreFileRow[]> {
  await q.query(`UPDATE vector_store_file_batches SET cancelled_at = coalesce(cancelled_at, now()) WHERE vector_store_id = $1 AND id = $2`, [storeId, id]);
  const { rows } = await q.query<StoreFileRow>(
    `UPDATE vector_store_files SET status = 'cancelled', updated_at = now()
     WHERE vector_store_id = $1 AND batch_id = $2 AND status IN ('pending', 'in_progress')
     RETURNING ${FILE_COLUMNS}`,
    [storeId, id],
  );
  return rows;
}

// ---- chunks -----------------------------------------------------------------------------------

export interface ChunkWrite {
  chunkIndex: number;
  tokens: number;
  text: string | null;
  textSealed: Buffer | null;
  terms: string[] | null;
}

/** Replaces a file's chunks of one space (a stage run again writes the same rows, never more). */
export async function replaceChunks(q: Queryable, storeId: string, space: number, fileId: string, chunks: ChunkWrite[]): Promise<void> {
  await q.query(`DELETE FROM ${partitionOf(storeId)} WHERE space = $1 AND file_id = $2`, [space, fileId]);
  if (chunks.length === 0) return;
  await q.query(
    `INSERT INTO ${partitionOf(storeId)} (vector_store_id, space, file_id, chunk_index, tokens, text, text_sealed, terms)
     SELECT $1, $2, $3, c.chunk_index, c.tokens, c.text, decode(c.text_sealed, 'base64'), c.terms
     FROM jsonb_to_recordset($4::jsonb) AS c(chunk_index int, tokens int, text text, text_sealed text, terms text[])`,
    [
      storeId,
      space,
      fileId,
      JSON.stringify(chunks.map((chunk) => ({ chunk_index: chunk.chunkIndex, tokens: chunk.tokens, text: chunk.text, text_sealed: chunk.textSealed?.toString('base64') ?? null, terms: chunk.terms }))),
    ],
  );
}

/** A chunk written whole, with its vector: each row enters the partition's indexes once. */
export interface EmbeddedChunkWrite extends ChunkWrite {
  embedding: number[] | null;
  embeddingSealed: Buffer | null;
}

/** Writes chunks with their vectors; a chunk already written (a batch run again) is left as it is. */
export async function insertEmbeddedChunks(q: Queryable, storeId: string, space: number, fileId: string, chunks: EmbeddedChunkWrite[]): Promise<void> {
  if (chunks.length === 0) return;
  await q.query(
    `INSERT INTO ${partitionOf(storeId)} (vector_store_id, space, file_id, chunk_index, tokens, text, text_sealed, terms, embedding, embedding_sealed)
     SELECT $1, $2, $3, c.chunk_index, c.tokens, c.text, decode(c.text_sealed, 'base64'), c.terms, c.embedding::vector, decode(c.embedding_sealed, 'base64')
     FROM jsonb_to_recordset($4::jsonb) AS c(chunk_index int, tokens int, text text, text_sealed text, terms text[], embedding text, embedding_sealed text)
     ON CONFLICT DO NOTHING`,
    [
      storeId,
      space,
      fileId,
      JSON.stringify(
        chunks.map((chunk) => ({
          chunk_index: chunk.chunkIndex,
          tokens: chunk.tokens,
          text: chunk.text,
          text_sealed: chunk.textSealed?.toString('base64') ?? null,
          terms: chunk.terms,
          embedding: chunk.embedding && toSql(chunk.embedding),
          embedding_sealed: chunk.embeddingSealed?.toString('base64') ?? null,
        })),
      ),
    ],
  );
}

export async function writtenChunkIndexes(q: Queryable, storeId: string, space: number, fileId: string): Promise<Set<number>> {
  const { rows } = await q.query<{ chunk_index: number }>(`SELECT chunk_index FROM ${partitionOf(storeId)} WHERE space = $1 AND file_id = $2`, [space, fileId]);
  return new Set(rows.map((row) => row.chunk_index));
}

export async function setChunkCount(q: Queryable, storeId: string, fileId: string, chunkCount: number): Promise<void> {
  await q.query(`UPDATE vector_store_files SET chunk_count = $3, updated_at = now() WHERE vector_store_id = $1 AND file_id = $2`, [storeId, fileId, chunkCount]);
}

export interface UnembeddedChunk {
  chunk_index: number;
  text: string | null;
  text_sealed: Buffer | null;
}

export async function unembeddedChunks(q: Queryable, storeId: string, space: number, fileId: string, limit: number): Promise<UnembeddedChunk[]> {
  const { rows } = await q.query<UnembeddedChunk>(
    `SELECT chunk_index, text, text_sealed FROM ${partitionOf(storeId)}
     WHERE space = $1 AND file_id = $2 AND embedding IS NULL AND embedding_sealed IS NULL
     ORDER BY chunk_index LIMIT $3`,
    [space, fileId, limit],
  );
  return rows;
}

export async function writeEmbeddings(
  q: Queryable,
  storeId: string,
  space: number,
  fileId: string,
  vectors: { chunkIndex: number; embedding: number[] | null; sealed: Buffer | null }[],
): Promise<void> {
  await q.query(
    `UPDATE ${partitionOf(storeId)} c SET embedding = v.embedding::vector, embedding_sealed = decode(v.sealed, 'base64')
     FROM jsonb_to_recordset($3::jsonb) AS v(chunk_index int, embedding text, sealed text)
     WHERE c.space = $1 AND c.file_id = $2 AND c.chunk_index = v.chunk_index`,
    [space, fileId, JSON.stringify(vectors.map((v) => ({ chunk_index: v.chunkIndex, embedding: v.embedding && toSql(v.embedding), sealed: v.sealed?.toString('base64') ?? null })))],
  );
}

export async function chunkTotals(q: Queryable, storeId: string, space: number, fileId: string): Promise<{ chunks: number; embedded: number; text_bytes: number }> {
  const { rows } = await q.query<{ chunks: number; embedded: number; text_bytes: number }>(
    `SELECT count(*)::int AS chunks,
            count(*) FILTER (WHERE embedding IS NOT NULL OR embedding_sealed IS NOT NULL)::int AS embedded,
            coalesce(sum(octet_length(coalesce(text, '')) + octet_length(coalesce(text_sealed, ''::bytea))), 0)::float8 AS text_bytes
     FROM ${partitionOf(storeId)} WHERE space = $1 AND file_id = $2`,
    [space, fileId],
  );
  return rows[0]!;
}

export interface StoredChunk {
  file_id: string;
  chunk_index: number;
  text: string | null;
  text_sealed: Buffer | null;
}

export async function fileChunks(q: Queryable, storeId: string, space: number, fileId: string): Promise<StoredChunk[]> {
  const { rows } = await q.query<StoredChunk>(
    `SELECT file_id, chunk_index, text, text_sealed FROM ${partitionOf(storeId)} WHERE space = $1 AND file_id = $2 ORDER BY chunk_index`,
    [space, fileId],
  );
  return rows;
}

export async function insertFacts(q: Queryable, storeId: string, fileId: string, facts: { chunkIndex: number; subject: string; predicate: string; object: string }[]): Promise<void> {
  await q.query(`DELETE FROM vector_store_facts WHERE vector_store_id = $1 AND file_id = $2`, [storeId, fileId]);
  if (facts.length === 0) return;
  await q.query(
    `INSERT INTO vector_store_facts (vector_store_id, file_id, chunk_index, subject, predicate, object)
     SELECT $1, $2, f.chunk_index, f.subject, f.predicate, f.object FROM jsonb_to_recordset($3::jsonb) AS f(chunk_index int, subject text, predicate text, object text)`,
    [storeId, fileId, JSON.stringify(facts.map((f) => ({ chunk_index: f.chunkIndex, subject: f.subject, predicate: f.predicate, object: f.object })))],
  );
}

// ---- migrations -------------------------------------------------------------------------------

export interface MigrationRow {
  id: string;
  vector_store_id: string;
  developer_id: string;
  payer_account_id: string;
  customer_id: string | null;
  from_model: string;
  from_dimensions: number;
  to_model: string;
  to_dimensions: number;
  from_space: number;
  to_space: number;
  status: 'in_progress' | 'completed' | 'failed';
  chunks_total: number;
  chunks_done: number;
  last_error: string | null;
  created_at: Date;
  completed_at: Date | null;
}

export async function insertMigration(q: Queryable, row: Omit<MigrationRow, 'status' | 'chunks_total' | 'chunks_done' | 'last_error' | 'created_at' | 'completed_at'>): Promise<MigrationRow> {
  const { rows } = await q.query<MigrationRow>(
    `INSERT INTO vector_store_migrations (id, vector_store_id, developer_id, payer_account_id, customer_id, from_model, from_dimensions, to_model, to_dimensions, from_space, to_space)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
    [row.id, row.vector_store_id, row.developer_id, row.payer_account_id, row.customer_id, row.from_model, row.from_dimensions, row.to_model, row.to_dimensions, row.from_space, row.to_space],
  );
  return rows[0]!;
}

export async function findMigration(q: Queryable, storeId: string, id: string): Promise<MigrationRow | undefined> {
  const { rows } = await q.query<MigrationRow>(`SELECT * FROM vector_store_migrations WHERE vector_store_id = $1 AND id = $2`, [storeId, id]);
  return rows[0];
}

export async function findMigrationById(q: Queryable, id: string): Promise<MigrationRow | undefined> {
  const { rows } = await q.query<MigrationRow>(`SELECT * FROM vector_store_migrations WHERE id = $1`, [id]);
  return rows[0];
}

/**
 * Copies into the new space every chunk of the old one it lacks (text, words, no vector yet):
 * at the start, and again before the flip for files ingested meanwhile. Returns the new space's
 * chunk count.
 */
export async function copyMissingChunks(q: Queryable, migration: MigrationRow): Promise<number> {
  const partition = partitionOf(migration.vector_store_id);
  await q.query(
    `INSERT INTO ${partition} (vector_store_id, space, file_id, chunk_index, tokens, text, text_sealed, terms)
     SELECT o.vector_store_id, $2, o.file_id, o.chunk_index, o.tokens, o.text, o.text_sealed, o.terms
     FROM ${partition} o WHERE o.space = $1
     ON CONFLICT DO NOTHING`,
    [migration.from_space, migration.to_space],
  );
  const { rows } = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${partition} WHERE space = $1`, [migration.to_space]);
  await q.query(`UPDATE vector_store_migrations SET chunks_total = $2 WHERE id = $1`, [migration.id, rows[0]!.n]);
  return rows[0]!.n;
}

export interface SpaceChunk {
  file_id: string;
  chunk_index: number;
  text: string | null;
  text_sealed: Buffer | null;
}

export async function unembeddedInSpace(q: Queryable, storeId: string, space: number, limit: number): Promise<SpaceChunk[]> {
  const { rows } = await q.query<SpaceChunk>(
    `SELECT file_id, chunk_index, text, text_sealed FROM ${partitionOf(storeId)}
     WHERE space = $1 AND embedding IS NULL AND embedding_sealed IS NULL ORDER BY file_id, chunk_index LIMIT $2`,
    [space, limit],
  );
  return rows;
}

export async function writeSpaceEmbeddings(q: Queryable, storeId: string, space: number, vectors: { fileId: string; chunkIndex: number; embedding: number[] | null; sealed: Buffer | null }[]): Promise<void> {
  await q.query(
    `UPDATE ${partitionOf(storeId)} c SET embedding = v.embedding::vector, embedding_sealed = decode(v.sealed, 'base64')
     FROM jsonb_to_recordset($2::jsonb) AS v(file_id text, chunk_index int, embedding text, sealed text)
     WHERE c.space = $1 AND c.file_id = v.file_id AND c.chunk_index = v.chunk_index`,
    [space, JSON.stringify(vectors.map((v) => ({ file_id: v.fileId, chunk_index: v.chunkIndex, embedding: v.embedding && toSql(v.embedding), sealed: v.sealed?.toString('base64') ?? null })))],
  );
}

export async function countEmbedded(q: Queryable, migration: MigrationRow): Promise<{ done: number; total: number }> {
  const { rows } = await q.query<{ done: number; total: number }>(
    `SELECT count(*) FILTER (WHERE embedding IS NOT NULL OR embedding_sealed IS NOT NULL)::int AS done, count(*)::int AS total
     FROM ${partitionOf(migration.vector_store_id)} WHERE space = $1`,
    [migration.to_space],
  );
  await q.query(`UPDATE vector_store_migrations SET chunks_done = $2, chunks_total = $3 WHERE id = $1`, [migration.id, rows[0]!.done, rows[0]!.total]);
  return rows[0]!;
}

/** The flip: searches read the new space from this commit on. */
export async function flipSpace(q: Queryable, migration: MigrationRow): Promise<void> {
  await q.query(
    `UPDATE vector_stores SET active_space = $2, embedding_model = $3, dimensions = $4, updated_at = now() WHERE id = $1`,
    [migration.vector_store_id, migration.to_space, migration.to_model, migration.to_dimensions],
  );
  await q.query(`UPDATE vector_store_migrations SET status = 'completed', completed_at = now() WHERE id = $1`, [migration.id]);
}

export async function failMigration(q: Queryable, migration: MigrationRow, error: string): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE vector_store_migrations SET status = 'failed', last_error = $2, completed_at = now() WHERE id = $1 AND status = 'in_progress'`,
    [migration.id, error.slice(0, 1_000)],
  );
  return (rowCount ?? 0) > 0;
}

export async function deleteSpace(q: Queryable, storeId: string, space: number): Promise<void> {
  const partition = await q.query<{ table: string | null }>(`SELECT to_regclass($1) AS table`, [partitionOf(storeId)]);
  if (!partition.rows[0]?.table) return;
  await q.query(`DELETE FROM ${partitionOf(storeId)} WHERE space = $1`, [space]);
}

// ---- sealed spaces and their IVF lists ----------------------------------------------------------

export interface SealedVectorMeta {
  file_id: string;
  chunk_index: number;
  ivf_list: number | null;
}

export interface SealedVectorRow extends SealedVectorMeta {
  embedding_sealed: Buffer;
}

/** What an opened sealed space depends on: its completed files, their chunks, and its lists. */
export async function sealedSpaceFingerprint(q: Queryable, storeId: string, space: number): Promise<string> {
  const { rows } = await q.query<{ fingerprint: string }>(
    `SELECT concat_ws(':', $2::int, count(*), coalesce(sum(chunk_count), 0), max(updated_at),
       (SELECT built_at FROM vector_store_ivf WHERE vector_store_id = $1 AND space = $2)) AS fingerprint
     FROM vector_store_files WHERE vector_store_id = $1 AND status = 'completed'`,
    [storeId, space],
  );
  return rows[0]!.fingerprint;
}

const UNLISTED = 2_147_483_647;
const listOrder = (alias: string) => `coalesce(${alias}.ivf_list, ${UNLISTED}), ${alias}.file_id, ${alias}.chunk_index`;
const completedOnly = (allFiles: boolean | undefined) =>
  allFiles ? '' : `JOIN vector_store_files f ON f.vector_store_id = c.vector_store_id AND f.file_id = c.file_id AND f.status = 'completed'`;

/** Which chunks a space's sealed vectors belong to, grouped by IVF list (unassigned last); of completed files only unless `allFiles`. */
export async function sealedVectorIndex(q: Queryable, storeId: string, space: number, options: { allFiles?: boolean } = {}): Promise<SealedVectorMeta[]> {
  const { rows } = await q.query<SealedVectorMeta>(
    `SELECT c.file_id, c.chunk_index, c.ivf_list FROM ${partitionOf(storeId)} c ${completedOnly(options.allFiles)}
     WHERE c.space = $1 AND c.embedding_sealed IS NOT NULL ORDER BY ${listOrder('c')}`,
    [space],
  );
  return rows;
}

/**
 * The sealed vectors themselves, a page at a time in the same order: a whole space at once would
 * arrive as hex text several times its size in the process's heap.
 */
export async function* sealedVectorPages(q: Queryable, storeId: string, space: number, options: { allFiles?: boolean; pageSize?: number } = {}): AsyncGenerator<SealedVectorRow[]> {
  let after: SealedVectorMeta | undefined;
  for (;;) {
    const params: unknown[] = [space, options.pageSize ?? 2_000];
    const seek: string = after ? `AND (coalesce(c.ivf_list, ${UNLISTED}), c.file_id, c.chunk_index) > ($3, $4, $5)` : '';
    if (after) params.push(after.ivf_list ?? UNLISTED, after.file_id, after.chunk_index);
    const { rows }: { rows: SealedVectorRow[] } = await q.query<SealedVectorRow>(
      `SELECT c.file_id, c.chunk_index, c.ivf_list, c.embedding_sealed FROM ${partitionOf(storeId)} c ${completedOnly(options.allFiles)}
       WHERE c.space = $1 AND c.embedding_sealed IS NOT NULL ${seek} ORDER BY ${listOrder('c')} LIMIT $2`,
      params,
    );
    if (rows.length === 0) return;
    yield rows;
    after = rows[rows.length - 1];
  }
}

export interface IvfRow {
  lists: number;
  dimensions: number;
  centroids_sealed: Buffer;
  chunks: number;
  built_at: Date;
}

export async function findIvf(q: Queryable, storeId: string, space: number): Promise<IvfRow | undefined> {
  const { rows } = await q.query<IvfRow>(`SELECT lists, dimensions, centroids_sealed, chunks, built_at FROM vector_store_ivf WHERE vector_store_id = $1 AND space = $2`, [storeId, space]);
  return rows[0];
}

export async function writeIvf(
  q: Queryable,
  storeId: string,
  space: number,
  ivf: { lists: number; dims: number; centroidsSealed: Buffer; assignments: { fileId: string; chunkIndex: number; list: number }[] },
): Promise<void> {
  const partition = partitionOf(storeId);
  const BATCH = 10_000;
  for (let from = 0; from < ivf.assignments.length; from += BATCH) {
    const part = ivf.assignments.slice(from, from + BATCH);
    await q.query(
      `UPDATE ${partition} c SET ivf_list = a.list
       FROM unnest($2::text[], $3::int[], $4::int[]) AS a(file_id, chunk_index, list)
       WHERE c.space = $1 AND c.file_id = a.file_id AND c.chunk_index = a.chunk_index`,
      [space, part.map((a) => a.fileId), part.map((a) => a.chunkIndex), part.map((a) => a.list)],
    );
  }
  await q.query(
    `INSERT INTO vector_store_ivf (vector_store_id, space, lists, dimensions, centroids_sealed, chunks)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (vector_store_id, space) DO UPDATE SET lists = excluded.lists, dimensions = excluded.dimensions,
       centroids_sealed = excluded.centroids_sealed, chunks = excluded.chunks, built_at = now()`,
    [storeId, space, ivf.lists, ivf.dims, ivf.centroidsSealed, ivf.assignments.length],
  );
}
