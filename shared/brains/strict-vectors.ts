import type { Db } from '../db/pool.js';
import type { CpuPool } from '../platform/cpu-pool.js';
import { graphFactor, type QueryGraph } from '../scoring/composite.js';
import { dot, normalise } from '../scoring/vector-index.js';
import { openVectorInto, type StoreKeys } from '../vector-stores/crypto.js';
import { vectorAad } from './aad.js';
import { frozenTierWeight, rankingOf, tunedWeight, type MemoryPolicy, type Tier } from './policy.js';
import * as repo from './repository.js';

/**
 * The current vectors of strict brains, opened once per process. A strict brain's vectors are
 * sealed, so PostgreSQL cannot rank them: a brain's current chunks are opened under its key into
 * one SharedArrayBuffer of unit vectors, beside what ranks each (its entry's class and type,
 * anchors and use count), and the CPU pool computes the composite of every row in the recall's
 * scopes in place, keeping the best: exact, in one pass (split across its threads when large). The brain's
 * write_seq moves with every write, so a changed one sends the cache to PostgreSQL for the
 * current keys only: rows that ended are masked out, new ones are opened and appended (the
 * buffer doubles when full), and nothing already open is opened again. A use counted moves only
 * the brain's usage_seq: the use counts and last uses of the versions marked since the one held
 * are read (one indexed statement) and put in place, not every key again. A reindex's swap (a
 * new space) opens the brain afresh. Within a memory budget, the brain recalled least recently goes
 * first. Recall as_of reads history and does not come here.
 *
 * Past IVF_MIN_ROWS live rows an exact pass costs too much for a request (about 70 ms a 30,000
 * rows of 1,536 dimensions on this project's 2-core machine), so the brain gets IVF lists:
 * k-means on the pool's build thread once a recall has its answer (recall keeps scanning exactly
 * meanwhile, sharing the cores with the build), then a recall
 * scores the rows of the lists nearest the query plus every row opened since. Lists are rebuilt
 * once a fifth of the rows arrived after them.
 */
const IVF_MIN_ROWS = 10_000;
const IVF_REBUILD_SHARE = 0.2;
/** Of the lists, the share a recall scans (at least MIN_PROBES). */
const PROBE_SHARE = 0.1;
const MIN_PROBES = 8;
interface OpenedBrain {
  space: number;
  writeSeq: string;
  usageSeq: string;
  dims: number;
  /** Rows used; the buffer holds `capacity`. */
  count: number;
  capacity: number;
  vectors: Float32Array;
  live: Uint8Array;
  versionIds: string[];
  chunkIndexes: Int32Array;
  entryIds: string[];
  scopes: string[];
  position: Map<string, number>;
  /**
   * What ranks each row: its kind (class, type and, for a row a materialize mount imported, the
   * mount: an index into `kinds`), anchors and use count, in shared buffers.
   */
  kind: Int32Array;
  kinds: { class: string; type: string | null; mount: string | null }[];
  createdAt: Float64Array;
  updatedAt: Float64Array;
  lastUsedAt: Float64Array;
  useCount: Int32Array;
  /** IVF lists over the rows opened when they were built (each row's list; -1 for rows since, always scanned). */
  ivf?: { centroids: Float32Array; lists: number; listOf: Int32Array; builtRows: number };
}

const keyOf = (versionId: string, chunkIndex: number) => `${versionId}:${chunkIndex}`;

export class StrictBrainVectors {
  private readonly opened = new Map<string, OpenedBrain>();
  private readonly refreshing = new Map<string, Promise<OpenedBrain>>();
  private readonly buildingIvf = new Map<string, Promise<void>>();
  private readonly keyReads = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly cpu: CpuPool,
    private readonly budgetBytes: number,
  ) {}

  /**
   * The `limit` current chunks of best composite within the scope filter, best first (each with its
   * cosine). `graph`, when the query names entities, gives each row its entry's graph factor.
   * Rows a materialize mount of `mounts` imported rank as pack rows: by their version's frozen
   * weights, with recency and usage 1.
   */
  async best(brain: repo.BrainRow, keys: StoreKeys, query: number[], filter: repo.ScopeFilter, limit: number, now: number, graph: QueryGraph | null = null, mounts: ReadonlyMap<string, FrozenRanking> = new Map()): Promise<repo.ChunkCandidate[]> {
    const opened = await this.brain(brain, keys);
    if (opened.count === 0) return [];
    const allowed = new Uint8Array(opened.capacity);
    const inScope = new Map<string, boolean>();
    for (let row = 0; row < opened.count; row++) {
      if (!opened.live[row]) continue;
      const scope = opened.scopes[row]!;
      let ok = inScope.get(scope);
      if (ok === undefined) inScope.set(scope, (ok = repo.scopeMatches(filter, scope)));
      if (ok) allowed[row] = 1;
    }
    const unit = Float32Array.from(query);
    normalise(unit);
    const rankings = opened.kinds.map((kind) => {
      const ranking = rankingOf(brain.memory_policy, kind.class, kind.type);
      const mount = kind.mount === null ? undefined : mounts.get(kind.mount);
      return mount ? { ...ranking, weight: frozenTierWeight(mount, kind.class, kind.type), fixed: 1 } : { ...ranking, weight: tunedWeight(brain, ranking.tier, ranking.weight), fixed: 0 };
    });
    const probed = opened.ivf ? probeRows(opened, unit) : undefined;
    const graphs = graph === null ? undefined : graphOfRows(opened, allowed, graph);
    const best = await this.cpu.compositeTopK({
      vectors: opened.vectors,
      dims: opened.dims,
      query: unit,
      k: limit,
      allowed,
      ...(probed && { rows: probed }),
      kind: opened.kind,
      kindWeight: Float64Array.from(rankings, (ranking) => ranking.weight),
      kindFixed: Uint8Array.from(rankings, (ranking) => ranking.fixed),
      kindHalfLife: Float64Array.from(rankings, (ranking) => ranking.halfLifeDays ?? -1),
      kindAnchor: Uint8Array.from(rankings, (ranking) => ANCHORS.indexOf(ranking.anchor)),
      createdAt: opened.createdAt,
      updatedAt: opened.updatedAt,
      lastUsedAt: opened.lastUsedAt,
      useCount: opened.useCount,
      ...(graphs && { graph: graphs }),
      now,
    });
    this.buildIvfIfDue(brain.id, opened);
    return Array.from(best.indices, (row, i) => ({
      version_id: opened.versionIds[row]!,
      chunk_index: opened.chunkIndexes[row]!,
      entry_id: opened.entryIds[row]!,
      scope: opened.scopes[row]!,
      cosine: best.cosines[i]!,
    }));
  }

  /** Times each brain's current chunk keys were read whole (for tests and metrics). */
  wholeReads(brainId: string): number {
    return this.keyReads.get(brainId) ?? 0;
  }

  /** The brain's vectors as of its write_seq and usage_seq; one refresh of a brain at a time, since refreshes append to the same buffer. */
  private async brain(brain: repo.BrainRow, keys: StoreKeys): Promise<OpenedBrain> {
    for (;;) {
      const cached = this.opened.get(brain.id);
      const sameContent = cached !== undefined && cached.space === brain.active_space && cached.writeSeq === brain.write_seq;
      if (sameContent && BigInt(cached.usageSeq) >= BigInt(brain.usage_seq)) {
        // Most recently used last: the first entry is the one to evict.
        this.opened.delete(brain.id);
        this.opened.set(brain.id, cached);
        return cached;
      }
      const inFlight = this.refreshing.get(brain.id);
      if (inFlight) {
        await inFlight.catch(() => undefined);
        continue;
      }
      const base = cached && cached.space === brain.active_space ? cached : undefined;
      const refresh = (sameContent ? this.refreshUse(brain, cached) : this.refresh(brain, keys, base))
        .then((opened) => {
          this.opened.delete(brain.id);
          this.opened.set(brain.id, opened);
          this.evictOverBudget();
          return opened;
        })
        .finally(() => this.refreshing.delete(brain.id));
      this.refreshing.set(brain.id, refresh);
      return refresh;
    }
  }

  /** Brings `base`'s use counts and last uses up to the brain's usage_seq, in place: a version's chunks are its rows 0, 1, ... */
  private async refreshUse(brain: repo.BrainRow, base: OpenedBrain): Promise<OpenedBrain> {
    const used = await repo.versionsUsedSince(this.db, brain.id, BigInt(base.usageSeq));
    for (const version of used.values()) {
      for (let chunk = 0; ; chunk++) {
        const row = base.position.get(keyOf(String(version.version_id), chunk));
        if (row === undefined) break;
        base.useCount[row] = version.use_count;
        base.lastUsedAt[row] = version.last_used?.getTime() ?? Number.NaN;
      }
    }
    return { ...base, usageSeq: brain.usage_seq };
  }

  /** Brings `base` (or nothing) up to the brain's current chunks. */
  private async refresh(brain: repo.BrainRow, keys: StoreKeys, base: OpenedBrain | undefined): Promise<OpenedBrain> {
    this.keyReads.set(brain.id, this.wholeReads(brain.id) + 1);
    const current = await repo.currentChunkKeys(this.db, brain.id, brain.active_space);
    const ranking = new Map(current.map((row) => [row.version_id, row]));
    // The cached state stays as it was until this one replaces it (a failed refresh leaves it whole).
    const opened = base
      ? { ...base, live: Uint8Array.from(base.live), versionIds: [...base.versionIds], entryIds: [...base.entryIds], scopes: [...base.scopes], position: new Map(base.position), kinds: [...base.kinds] }
      : emptyBrain(brain, current.length);
    const wanted = new Set(current.map((row) => keyOf(row.version_id, row.chunk_index)));
    for (const [key, row] of opened.position) if (!wanted.has(key)) opened.live[row] = 0;
    // A version's use (count, last use) can move without a new version: brought up to date in place.
    for (const chunk of current) {
      const row = opened.position.get(keyOf(chunk.version_id, chunk.chunk_index));
      if (row === undefined) continue;
      opened.useCount[row] = chunk.use_count;
      opened.lastUsedAt[row] = chunk.last_used?.getTime() ?? Number.NaN;
    }
    const fresh = current.filter((row) => !opened.position.has(keyOf(row.version_id, row.chunk_index)));
    const grown = grow(opened, opened.count + fresh.length);
    for await (const page of repo.sealedVectorsOf(this.db, brain.id, brain.active_space, fresh)) {
      for (const chunk of page) {
        const row = grown.count++;
        openVectorInto(keys, chunk.embedding_sealed, vectorAad(brain.id, brain.active_space, chunk.entry_id, chunk.chunk_index), grown.vectors, row * grown.dims);
        normalise(grown.vectors, row * grown.dims, grown.dims);
        grown.live[row] = 1;
        grown.versionIds[row] = String(chunk.version_id);
        grown.chunkIndexes[row] = chunk.chunk_index;
        grown.entryIds[row] = chunk.entry_id;
        grown.scopes[row] = chunk.scope;
        const entry = ranking.get(String(chunk.version_id))!;
        grown.kind[row] = kindOf(grown, entry.class, entry.type, entry.source_mount_id);
        grown.createdAt[row] = entry.created_at.getTime();
        grown.updatedAt[row] = entry.updated_at.getTime();
        grown.lastUsedAt[row] = entry.last_used?.getTime() ?? Number.NaN;
        grown.useCount[row] = entry.use_count;
        grown.position.set(keyOf(String(chunk.version_id), chunk.chunk_index), row);
      }
    }
    return { ...grown, writeSeq: brain.write_seq, usageSeq: brain.usage_seq };
  }

  /** Starts a background IVF build when the brain has grown past what an exact pass serves well. */
  private buildIvfIfDue(brainId: string, opened: OpenedBrain): void {
    if (opened.count < IVF_MIN_ROWS || this.buildingIvf.has(brainId)) return;
    if (opened.ivf && opened.count - opened.ivf.builtRows <= opened.count * IVF_REBUILD_SHARE) return;
    const builtRows = opened.count;
    const liveRows = Int32Array.from({ length: builtRows }, (_, row) => row).filter((row) => opened.live[row] === 1);
    if (liveRows.length < IVF_MIN_ROWS) return;
    const lists = Math.max(8, Math.round(Math.sqrt(liveRows.length) / 3));
    const sampleSize = Math.min(liveRows.length, lists * 64);
    const sampleRows = Int32Array.from({ length: sampleSize }, (_, i) => liveRows[Math.floor((i * liveRows.length) / sampleSize)]!);
    const building = this.cpu
      .kMeans({ vectors: opened.vectors.subarray(0, builtRows * opened.dims), dims: opened.dims, lists, sampleRows, iterations: 8 })
      .then(({ centroids, assignments }) => {
        // Rows keep their numbers across refreshes, so the lists apply to whatever the cache holds now.
        const current = this.opened.get(brainId);
        if (!current || current.space !== opened.space) return;
        const listOf = new Int32Array(current.capacity).fill(-1);
        listOf.set(assignments.subarray(0, builtRows));
        current.ivf = { centroids, lists: centroids.length / current.dims, listOf, builtRows };
      })
      .catch(() => undefined)
      .finally(() => this.buildingIvf.delete(brainId));
    this.buildingIvf.set(brainId, building);
  }

  /** Settles when the brain's IVF build in progress (if any) has ended: for benchmarks that measure the steady state. */
  async listsSettled(brainId: string): Promise<void> {
    await this.buildingIvf.get(brainId);
  }

  private evictOverBudget(): void {
    let total = [...this.opened.values()].reduce((sum, brain) => sum + brain.vectors.byteLength, 0);
    for (const [brainId, brain] of this.opened) {
      if (total <= this.budgetBytes || this.opened.size === 1) break;
      this.opened.delete(brainId);
      total -= brain.vectors.byteLength;
    }
  }
}

/** Rows to allocate for `rows`: some room to append before the next copy. */
const roomFor = (rows: number) => rows + Math.max(256, Math.ceil(rows / 8));

function emptyBrain(brain: repo.BrainRow, rows: number): OpenedBrain {
  const capacity = roomFor(rows);
  return {
    space: brain.active_space,
    writeSeq: brain.write_seq,
    usageSeq: brain.usage_seq,
    dims: brain.embedding_dims,
    count: 0,
    capacity,
    vectors: new Float32Array(new SharedArrayBuffer(capacity * brain.embedding_dims * 4)),
    live: new Uint8Array(capacity),
    versionIds: [],
    chunkIndexes: new Int32Array(capacity),
    entryIds: [],
    scopes: [],
    position: new Map(),
    ...rankingBuffers(capacity),
    kinds: [],
  };
}

/**
 * Room for `rows`: the same buffers when they have it (a recall scoring meanwhile masks out every
 * row past its own count, so appending there is invisible to it), else larger copies.
 */
function grow(opened: OpenedBrain, rows: number): OpenedBrain {
  if (rows <= opened.capacity) return opened;
  const capacity = roomFor(rows);
  const vectors = new Float32Array(new SharedArrayBuffer(capacity * opened.dims * 4));
  vectors.set(opened.vectors.subarray(0, opened.count * opened.dims));
  const live = new Uint8Array(capacity);
  live.set(opened.live.subarray(0, opened.count));
  const chunkIndexes = new Int32Array(capacity);
  chunkIndexes.set(opened.chunkIndexes.subarray(0, opened.count));
  const buffers = rankingBuffers(capacity);
  for (const name of ['kind', 'createdAt', 'updatedAt', 'lastUsedAt', 'useCount'] as const) buffers[name].set(opened[name].subarray(0, opened.count) as never);
  let ivf = opened.ivf;
  if (ivf) {
    const listOf = new Int32Array(capacity).fill(-1);
    listOf.set(ivf.listOf.subarray(0, opened.count));
    ivf = { ...ivf, listOf };
  }
  return { ...opened, capacity, vectors, live, chunkIndexes, ...buffers, ...(ivf && { ivf }) };
}

/** The per-row ranking inputs, in SharedArrayBuffers the pool reads without a copy. */
function rankingBuffers(capacity: number) {
  return {
    kind: new Int32Array(new SharedArrayBuffer(capacity * 4)),
    createdAt: new Float64Array(new SharedArrayBuffer(capacity * 8)),
    updatedAt: new Float64Array(new SharedArrayBuffer(capacity * 8)),
    lastUsedAt: new Float64Array(new SharedArrayBuffer(capacity * 8)),
    useCount: new Int32Array(new SharedArrayBuffer(capacity * 4)),
  };
}

const ANCHORS = ['created', 'updated', 'last_used'] as const;

/** What ranks a mounted row: its pack version's frozen policy and tier multipliers. */
interface FrozenRanking {
  memory_policy: MemoryPolicy;
  tier_multipliers: Partial<Record<Tier, number>>;
}

function kindOf(opened: OpenedBrain, entryClass: string, type: string | null, mount: string | null): number {
  const at = opened.kinds.findIndex((kind) => kind.class === entryClass && kind.type === type && kind.mount === mount);
  if (at >= 0) return at;
  opened.kinds.push({ class: entryClass, type, mount });
  return opened.kinds.length - 1;
}

/** Each allowed row's graph factor, by its entry (a row not scored keeps 1). */
function graphOfRows(opened: OpenedBrain, allowed: Uint8Array, graph: QueryGraph): Float32Array {
  const factors = new Float32Array(opened.capacity).fill(1);
  for (let row = 0; row < opened.count; row++) if (allowed[row]) factors[row] = graphFactor(graph, opened.entryIds[row]!);
  return factors;
}

/** The live rows of the lists nearest the query, plus every live row opened since the lists were built. */
function probeRows(opened: OpenedBrain, query: Float32Array): Int32Array {
  const { centroids, lists, listOf } = opened.ivf!;
  const probes = Math.min(lists, Math.max(MIN_PROBES, Math.ceil(lists * PROBE_SHARE)));
  const nearest = Array.from({ length: lists }, (_, list) => ({ list, score: dot(centroids, list * opened.dims, query, opened.dims) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, probes);
  const chosen = new Uint8Array(lists);
  for (const { list } of nearest) chosen[list] = 1;
  const rows: number[] = [];
  for (let row = 0; row < opened.count; row++) {
    if (!opened.live[row]) continue;
    const list = listOf[row]!;
    if (list < 0 || chosen[list]) rows.push(row);
  }
  return Int32Array.from(rows);
}
