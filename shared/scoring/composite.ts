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

export function compositeFactors(candidate: CompositeCandidate, now: number): CompositeFactors {
  const cosine = Math.min(1, Math.max(0, candidate.cosine));
  const fixed = candidate.fixedRecencyAndUsage === true;
  const r = fixed ? 1 : recency(candidate.halfLifeDays, candidate.anchorAt, now);
  const u = fixed ? 1 : usage(candidate.useCount);
  const graph = 1;
  return { cosine, tier_weight: candidate.tierWeight, recency: r, usage: u, graph, score: cosine * candidate.tierWeight * r * u * graph };
}

export interface CompositeRankInput {
  candidates: CompositeCandidate[];
  now: number;
}

/** Every candidate's factors, in input order (the caller sorts and filters, keeping its own order of drops). */
export function compositeRank({ candidates, now }: CompositeRankInput): CompositeFactors[] {
  return candidates.map((candidate) => compositeFactors(candidate, now));
}
