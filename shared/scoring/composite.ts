import { dot, mergeTopK, TopKHeap } from './vector-index.js';

/**
 * A brain's recall score (spec 2): composite = cosine x tier weight x recency x usage x graph, in
 * [0, 1]. Pure arithmetic over the candidates that vector search found, so it runs the same in the
 * CPU pool (workers/tasks) and in tests and the bench's brute-force reference.
 */
export interface CompositeCandidate {
  /** Cosine similarity of the chunk to the query, clamped to [0, 1] (opposite directions are no match). */
  cosine: number;
  tierWeight: number;
  /** Half-life in days of the entry's type; null for evergreen tiers. */
  halfLifeDays: number | null;
  /** Epoch milliseconds of the entry's decay anchor (created, updated or last used). */
  anchorAt: number;
  useCount: number;
  /** Mounted pack rows skip recency and usage (spec 2, recall with mounts). */
  fixedRecencyAndUsage?: boolean;
  /** The entry's graph factor (graphFactor); 1 when absent. */
  graph?: number;
}

export interface CompositeFactors {
  cosine: number;
  tier_weight: number;
  recency: number;
  usage: number;
  graph: number;
  score: number;
}

const DAY_MS = 86_400_000;

/** Halves every half-life since the anchor; evergreen entries keep 1. */
export function recency(halfLifeDays: number | null, anchorAt: number, now: number): number {
  if (halfLifeDays === null) return 1;
  const ageDays = Math.max(0, now - anchorAt) / DAY_MS;
  return Math.pow(0.5, ageDays / halfLifeDays);
}

/** Unused entries rank at 0.75 and approach 1 as they are used (the learn pass counts uses). */
export function usage(useCount: number): number {
  return 0.75 + 0.25 * (1 - 1 / (1 + Math.max(0, useCount)));
}

/**
 * The graph factor boosts entries linked to entities the query names. The boost is relative, so
 * no factor exceeds 1 (the composite never beats the cosine, which recall's early stop relies on):
 * when the query names an entity of the brain, entries linked to it keep 1, entries linked to an
 * entity one edge away from it get 0.9, and every other entry 0.8. A query that names none
 * leaves every entry at 1.
 */
export const GRAPH_FACTOR = { named: 1, neighbour: 0.9, unrelated: 0.8 } as const;

/** The entries a query's named entities reach: linked to a named entity, or to an entity one edge from one. */
export interface QueryGraph {
  named: ReadonlySet<string>;
  neighbours: ReadonlySet<string>;
}

/** An entry's graph factor for a query; `graph` is null when the query names no entity of the brain. */
export function graphFactor(graph: QueryGraph | null, entryId: string): number {
  if (graph === null) return 1;
  if (graph.named.has(entryId)) return GRAPH_FACTOR.named;
  if (graph.neighbours.has(entryId)) return GRAPH_FACTOR.neighbour;
  return GRAPH_FACTOR.unrelated;
}

export function compositeFactors(candidate: CompositeCandidate, now: number): CompositeFactors {
  const cosine = Math.min(1, Math.max(0, candidate.cosine));
  const fixed = candidate.fixedRecencyAndUsage === true;
  const r = fixed ? 1 : recency(candidate.halfLifeDays, candidate.anchorAt, now);
  const u = fixed ? 1 : usage(candidate.useCount);
  const graph = Math.min(1, Math.max(0, candidate.graph ?? 1));
  return { cosine, tier_weight: candidate.tierWeight, recency: r, usage: u, graph, score: cosine * candidate.tierWeight * r * u * graph };
}

/**
 * A strict brain's recall in one pass over its opened vectors: every allowed row's composite,
 * the `k` best kept. Rows carry a kind (class and type, whose weight, half-life and decay anchor
 * the policy gives) and their anchors and use count, all in shared buffers the pool reads in
 * place, and, when the query names entities, a graph factor of this recall's own. A row whose
 * cosine times its weight and graph factor cannot beat the k-th best so far is not aged.
 */
export interface CompositeTopKInput {
  vectors: Float32Array;
  dims: number;
  /** A unit vector. */
  query: Float32Array;
  k: number;
  /** 1 for rows in the recall's scopes (and current). */
  allowed: Uint8Array;
  /** Score only these rows (IVF probes); all rows when absent. */
  rows?: Int32Array;
  kind: Int32Array;
  kindWeight: Float64Array;
  /** Half-life in days; -1 for evergreen. */
  kindHalfLife: Float64Array;
  /** 0 created, 1 updated, 2 last used (updated until first used). */
  kindAnchor: Uint8Array;
  /** 1 for kinds of mounted rows, whose recency and usage are 1 (spec 2, recall with mounts); every kind 0 when absent. */
  kindFixed?: Uint8Array;
  createdAt: Float64Array;
  updatedAt: Float64Array;
  /** NaN until first used. */
  lastUsedAt: Float64Array;
  useCount: Int32Array;
  /** Each row's graph factor, at most 1 (graphFactor); every row 1 when absent. */
  graph?: Float32Array;
  now: number;
}

export interface CompositeTopK {
  /** Row numbers, best composite first. */
  indices: Int32Array;
  cosines: Float32Array;
  scores: Float32Array;
}

export function compositeTopK(input: CompositeTopKInput): CompositeTopK {
  const { vectors, dims, query, k, allowed } = input;
  const total = input.rows ? input.rows.length : Math.min(allowed.length, vectors.length / dims);
  const best = new TopKHeap(k);
  for (let i = 0; i < total; i++) {
    const row = input.rows ? input.rows[i]! : i;
    if (allowed[row] === 0) continue;
    const kind = input.kind[row]!;
    const weight = input.kindWeight[kind]!;
    const floor = Math.max(0, best.floor);
    const cosine = clampedCosine(vectors, row, query, dims);
    // The graph factor is at most 1, so cosine x weight still bounds the row's composite.
    const graph = input.graph ? Math.min(1, Math.max(0, input.graph[row]!)) : 1;
    if (cosine * weight * graph <= floor) continue;
    if (input.kindFixed?.[kind] === 1) {
      best.offer(row, cosine * weight * graph);
      continue;
    }
    const halfLife = input.kindHalfLife[kind]!;
    const anchorKind = input.kindAnchor[kind];
    const anchor = anchorKind === 0 ? input.createdAt[row]! : anchorKind === 1 || Number.isNaN(input.lastUsedAt[row]!) ? input.updatedAt[row]! : input.lastUsedAt[row]!;
    best.offer(row, cosine * weight * graph * recency(halfLife < 0 ? null : halfLife, anchor, input.now) * usage(input.useCount[row]!));
  }
  const { indices, scores } = best.sorted();
  // The k cosines again, rather than a third array carried through every swap of the heap.
  return { indices, scores, cosines: Float32Array.from(indices, (row) => clampedCosine(vectors, row, query, dims)) };
}

/** The k best of several shares' top k (each best first), as one scan of all their rows would keep them. */
export function mergeCompositeTopK(parts: CompositeTopK[], k: number): CompositeTopK {
  const cosines = new Map<number, number>();
  for (const part of parts) part.indices.forEach((row, i) => cosines.set(row, part.cosines[i]!));
  const { indices, scores } = mergeTopK(parts, k);
  return { indices, scores, cosines: Float32Array.from(indices, (row) => cosines.get(row)!) };
}

const clampedCosine = (vectors: Float32Array, row: number, query: Float32Array, dims: number) => Math.min(1, Math.max(0, dot(vectors, row * dims, query, dims)));
