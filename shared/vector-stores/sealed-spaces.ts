import type { Db } from '../db/pool.js';
import type { CpuPool } from '../platform/cpu-pool.js';
import { dot, normalise } from '../scoring/vector-index.js';
import { open, seal, vectorAad, type StoreKeys } from './crypto.js';
import * as repo from './repository.js';

/**
 * Searches of stores whose vectors are sealed (vector_sealing full). PostgreSQL cannot index what
 * it cannot read, so a store's space is opened under its key once per process into one
 * SharedArrayBuffer of unit vectors, grouped by IVF list when the store has lists, and scored on
 * a CPU-pool thread in place: exactly (flat), or over the lists nearest the query (ivf). An
 * opened space is kept while its completed files and lists are unchanged, within a memory budget
 * (least recently searched goes first). The key check happens before: a locked byok store never
 * reaches this cache.
 */
export interface SealedCandidate {
  file_id: string;
  chunk_index: number;
}

interface OpenedSpace {
  fingerprint: string;
  dims: number;
  vectors: Float32Array;
  fileIds: string[];
  chunkIndexes: Int32Array;
  /** IVF: rows are ordered by list; list c holds rows listStart[c] .. listStart[c+1]-1; rows from listStart[lists] on have no list yet. */
  ivf?: { centroids: Float32Array; listStart: Int32Array; lists: number };
  bytes: number;
}

/** Of the lists, the share a query scans (at least MIN_PROBES): recall against exact search stays high on real embeddings. */
const PROBE_SHARE = 0.1;
const MIN_PROBES = 8;

export class SealedSpaces {
  private readonly opened = new Map<string, OpenedSpace>();
  private readonly opening = new Map<string, Promise<OpenedSpace>>();

  constructor(
    private readonly db: Db,
    private readonly cpu: CpuPool,
    private readonly budgetBytes: number,
  ) {}

  async nearest(store: repo.VectorStoreRow, keys: StoreKeys, vector: number[], limit: number, allowedFiles: Set<string> | null): Promise<SealedCandidate[]> {
    const space = await this.space(store, keys);
    const rows = space.fileIds.length;
    if (rows === 0) return [];
    const query = Float32Array.from(vector);
    normalise(query);
    let allowed: Uint8Array | undefined;
    if (allowedFiles) {
      allowed = new Uint8Array(rows);
      for (let row = 0; row < rows; row++) if (allowedFiles.has(space.fileIds[row]!)) allowed[row] = 1;
    }
    const probed = space.ivf && !allowedFiles ? probeRows(space, query) : undefined;
    const { indices } = await this.cpu.dotTopK({ vectors: space.vectors, dims: space.dims, query, k: limit, ...(probed && { rows: probed }), ...(allowed && { allowed }) });
    return Array.from(indices, (row) => ({ file_id: space.fileIds[row]!, chunk_index: space.chunkIndexes[row]! }));
  }

  /** Forgets a store's opened vectors (deleted, migrated, or its lease ended). */
  forget(storeId: string): void {
    this.opened.delete(storeId);
  }

  private async space(store: repo.VectorStoreRow, keys: StoreKeys): Promise<OpenedSpace> {
    const fingerprint = await repo.sealedSpaceFingerprint(this.db, store.id, store.active_space);
    const cached = this.opened.get(store.id);
    if (cached?.fingerprint === fingerprint) {
      // Most recently used last: the first entry is the one to evict.
      this.opened.delete(store.id);
      this.opened.set(store.id, cached);
      return cached;
    }
    const key = `${store.id}:${fingerprint}`;
    let opening = this.opening.get(key);
    if (!opening) {
      opening = openSpace(this.db, store, keys, fingerprint).finally(() => this.opening.delete(key));
      this.opening.set(key, opening);
    }
    const space = await opening;
    this.opened.set(store.id, space);
    this.evictOverBudget();
    return space;
  }

  private evictOverBudget(): void {
    let total = [...this.opened.values()].reduce((sum, space) => sum + space.bytes, 0);
    for (const [storeId, space] of this.opened) {
      if (total <= this.budgetBytes || this.opened.size === 1) break;
      this.opened.delete(storeId);
      total -= space.bytes;
    }
  }
}

async function openSpace(db: Db, store: repo.VectorStoreRow, keys: StoreKeys, fingerprint: string): Promise<OpenedSpace> {
  const space = store.active_space;
  const dims = store.dimensions;
  const rows = await repo.sealedVectorIndex(db, store.id, space);
  const vectors = await openVectors(db, store, keys, rows, { allFiles: false });
  const chunkIndexes = Int32Array.from(rows, (row) => row.chunk_index);
  const fileIds = rows.map((row) => row.file_id);
  const opened: OpenedSpace = { fingerprint, dims, vectors, fileIds, chunkIndexes, bytes: vectors.byteLength + rows.length * 64 };
  const ivf = store.vector_index === 'ivf' ? await repo.findIvf(db, store.id, space) : undefined;
  if (ivf && ivf.dimensions === dims) {
    const centroids = new Float32Array(Uint8Array.from(open(keys.vectors, ivf.centroids_sealed, ivfAad(store.id, space))).buffer);
    // sealedVectorIndex orders rows by list, unassigned last.
    const listStart = new Int32Array(ivf.lists + 1).fill(rows.length);
    for (let i = rows.length - 1; i >= 0; i--) {
      const list = rows[i]!.ivf_list;
      if (list !== null && list < ivf.lists) listStart[list] = i;
    }
    for (let c = ivf.lists - 1; c >= 0; c--) if (listStart[c]! > listStart[c + 1]!) listStart[c] = listStart[c + 1]!;
    opened.ivf = { centroids, listStart, lists: ivf.lists };
  }
  return opened;
}

/**
 * Opens the sealed vectors of `rows` into one SharedArrayBuffer of unit vectors, row i at i * dims,
 * reading them a page at a time. A row that went away meanwhile stays zero (it scores 0); one that
 * arrived meanwhile is left for the next opening (the space's fingerprint has changed).
 */
async function openVectors(db: Db, store: repo.VectorStoreRow, keys: StoreKeys, rows: repo.SealedVectorMeta[], options: { allFiles: boolean }): Promise<Float32Array> {
  const { id: storeId, active_space: space, dimensions: dims } = store;
  const vectors = new Float32Array(new SharedArrayBuffer(rows.length * dims * 4));
  const position = new Map(rows.map((row, i) => [`${row.file_id}\u0000${row.chunk_index}`, i]));
  for await (const page of repo.sealedVectorPages(db, storeId, space, options)) {
    for (const row of page) {
      const i = position.get(`${row.file_id}\u0000${row.chunk_index}`);
      if (i === undefined) continue;
      // The opened bytes are little-endian float32, copied straight into the row.
      const bytes = open(keys.vectors, row.embedding_sealed, vectorAad(storeId, space, row.file_id, row.chunk_index));
      new Uint8Array(vectors.buffer, vectors.byteOffset + i * dims * 4, dims * 4).set(bytes.subarray(0, dims * 4));
      normalise(vectors, i * dims, dims);
    }
  }
  return vectors;
}

/** The rows of the lists nearest the query, plus every row not in a list yet. */
function probeRows(space: OpenedSpace, query: Float32Array): Int32Array {
  const { centroids, listStart, lists } = space.ivf!;
  const probes = Math.min(lists, Math.max(MIN_PROBES, Math.ceil(lists * PROBE_SHARE)));
  const scored = Array.from({ length: lists }, (_, c) => ({ c, score: dot(centroids, c * space.dims, query, space.dims) })).sort((a, b) => b.score - a.score);
  const chosen = scored.slice(0, probes).map((entry) => entry.c);
  const total = space.fileIds.length;
  let count = total - listStart[lists]!;
  for (const c of chosen) count += listStart[c + 1]! - listStart[c]!;
  const rows = new Int32Array(count);
  let at = 0;
  for (const c of chosen) for (let row = listStart[c]!; row < listStart[c + 1]!; row++) rows[at++] = row;
  for (let row = listStart[lists]!; row < total; row++) rows[at++] = row;
  return rows;
}

export const ivfAad = (storeId: string, space: number) => `ivf centroids ${storeId}/${space}`;

/** Below this many chunks an exact scan is as fast as lists. */
const IVF_MIN_CHUNKS = 1_000;
/** Lists are rebuilt once this share of the space has arrived since the last build. */
const IVF_REBUILD_SHARE = 0.2;

/**
 * Builds (or rebuilds) a sealed store's IVF lists: k-means on the CPU pool over a sample of its
 * opened vectors, then every chunk's list written back, and the centroids sealed. Skipped while
 * the lists are fresh enough. Returns what it did.
 */
export async function buildIvfLists(db: Db, cpu: CpuPool, store: repo.VectorStoreRow, keys: StoreKeys, options: { force?: boolean } = {}): Promise<{ lists: number; chunks: number; rebuilt: boolean }> {
  const space = store.active_space;
  const dims = store.dimensions;
  const existing = await repo.findIvf(db, store.id, space);
  const rows = await repo.sealedVectorIndex(db, store.id, space, { allFiles: true });
  const unassigned = rows.filter((row) => row.ivf_list === null).length;
  const fresh = existing && existing.dimensions === dims && unassigned <= rows.length * IVF_REBUILD_SHARE;
  if (rows.length < IVF_MIN_CHUNKS || (fresh && !options.force)) return { lists: existing?.lists ?? 0, chunks: rows.length, rebuilt: false };

  const vectors = await openVectors(db, store, keys, rows, { allFiles: true });
  const lists = Math.max(8, Math.round(Math.sqrt(rows.length) / 3));
  const sampleSize = Math.min(rows.length, lists * 64);
  const sampleRows = Int32Array.from({ length: sampleSize }, (_, i) => Math.floor((i * rows.length) / sampleSize));
  const { centroids, assignments } = await cpu.kMeans({ vectors, dims, lists, sampleRows, iterations: 8 });
  await repo.writeIvf(db, store.id, space, {
    lists,
    dims,
    centroidsSealed: seal(keys.vectors, Buffer.from(centroids.buffer, centroids.byteOffset, centroids.byteLength), ivfAad(store.id, space)),
    assignments: rows.map((row, i) => ({ fileId: row.file_id, chunkIndex: row.chunk_index, list: assignments[i]! })),
  });
  return { lists, chunks: rows.length, rebuilt: true };
}
