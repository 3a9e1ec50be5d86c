/**
 * Cosine similarity of one query against a block of candidate vectors, keeping the best k.
 * Candidates arrive as one flat Float32Array (row-major, `dims` per row) so a CPU-pool thread
 * receives them by transfer rather than by copy.
 */
export interface CosineTopKInput {
  query: Float32Array;
  candidates: Float32Array;
  dims: number;
  k: number;
}

export interface CosineTopKResult {
  /** Row numbers of the best candidates, best first. */
  indices: Uint32Array;
  scores: Float32Array;
}

export function cosineTopK({ query, candidates, dims, k }: CosineTopKInput): CosineTopKResult {
  if (query.length !== dims) throw new RangeError(`query has ${query.length} dimensions, expected ${dims}`);
  if (candidates.length % dims !== 0) throw new RangeError('candidates are not a whole number of rows');
  const rows = candidates.length / dims;
  const keep = Math.max(0, Math.min(k, rows));
  const queryNorm = Math.sqrt(dot(query, query, 0, dims));

  // A small sorted buffer (worst first) beats sorting every score when k is much smaller than rows.
  const bestScores = new Float64Array(keep).fill(Number.NEGATIVE_INFINITY);
  const bestRows = new Int32Array(keep).fill(-1);
  for (let row = 0; row < rows; row++) {
    const offset = row * dims;
    const norm = Math.sqrt(dot(candidates, candidates, offset, dims, offset));
    const denominator = queryNorm * norm;
    const score = denominator === 0 ? 0 : dot(query, candidates, 0, dims, offset) / denominator;
    if (keep === 0 || score <= bestScores[0]!) continue;
    let slot = 0;
    while (slot + 1 < keep && bestScores[slot + 1]! < score) {
      bestScores[slot] = bestScores[slot + 1]!;
      bestRows[slot] = bestRows[slot + 1]!;
      slot++;
    }
    bestScores[slot] = score;
    bestRows[slot] = row;
  }

  const filled = bestRows.filter((row) => row >= 0).length;
  const indices = new Uint32Array(filled);
  const scores = new Float32Array(filled);
  for (let i = 0; i < filled; i++) {
    indices[i] = bestRows[keep - 1 - i]!;
    scores[i] = bestScores[keep - 1 - i]!;
  }
  return { indices, scores };
}

function dot(a: Float32Array, b: Float32Array, aOffset: number, length: number, bOffset = aOffset): number {
  let sum = 0;
  for (let i = 0; i < length; i++) sum += a[aOffset + i]! * b[bOffset + i]!;
  return sum;
}
