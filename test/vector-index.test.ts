import { describe, expect, it } from 'vitest';
import { CpuPool } from '../shared/platform/cpu-pool.js';
import { compositeTopK } from '../shared/scoring/composite.js';
import { dotTopK, kMeans, normalise } from '../shared/scoring/vector-index.js';

/** The CPU pool's kernels for sealed stores, against brute force on seeded random data. */
function randomUnitVectors(rows: number, dims: number, seed: number): Float32Array {
  let state = seed;
  const next = () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  const vectors = new Float32Array(rows * dims);
  for (let i = 0; i < vectors.length; i++) vectors[i] = next();
  for (let row = 0; row < rows; row++) normalise(vectors, row * dims, dims);
  return vectors;
}

function bruteForce(vectors: Float32Array, dims: number, query: Float32Array, k: number, allowedRow: (row: number) => boolean = () => true): number[] {
  const scores: { row: number; score: number }[] = [];
  for (let row = 0; row < vectors.length / dims; row++) {
    if (!allowedRow(row)) continue;
    let score = 0;
    for (let d = 0; d < dims; d++) score += vectors[row * dims + d]! * query[d]!;
    scores.push({ row, score });
  }
  return scores.sort((a, b) => b.score - a.score).slice(0, k).map((entry) => entry.row);
}

describe('dotTopK', () => {
  const dims = 37; // not a multiple of the unrolling
  const vectors = randomUnitVectors(500, dims, 7);
  const query = randomUnitVectors(1, dims, 99);

  it('returns the same rows as brute force, best first, with their scores', () => {
    const { indices, scores } = dotTopK({ vectors, dims, query: query.slice(), k: 10 });
    expect([...indices]).toEqual(bruteForce(vectors, dims, query, 10));
    for (let i = 1; i < scores.length; i++) expect(scores[i]!).toBeLessThanOrEqual(scores[i - 1]!);
  });

  it('scores only the given rows and only allowed rows', () => {
    const rows = Int32Array.from({ length: 100 }, (_, i) => i * 5);
    expect([...dotTopK({ vectors, dims, query: query.slice(), k: 5, rows }).indices]).toEqual(bruteForce(vectors, dims, query, 5, (row) => row % 5 === 0));
    const allowed = Uint8Array.from({ length: 500 }, (_, row) => (row % 2 === 1 ? 1 : 0));
    expect([...dotTopK({ vectors, dims, query: query.slice(), k: 5, allowed }).indices]).toEqual(bruteForce(vectors, dims, query, 5, (row) => row % 2 === 1));
  });

  it('returns fewer than k when there are fewer rows', () => {
    expect(dotTopK({ vectors: vectors.subarray(0, dims * 3), dims, query: query.slice(), k: 10 }).indices).toHaveLength(3);
  });
});

describe('kMeans', () => {
  it('assigns every row to its nearest centroid, and clustered data to its own cluster', () => {
    const dims = 16;
    const centres = randomUnitVectors(4, dims, 3);
    const noise = randomUnitVectors(400, dims, 11);
    const vectors = new Float32Array(400 * dims);
    for (let row = 0; row < 400; row++) {
      for (let d = 0; d < dims; d++) vectors[row * dims + d] = centres[(row % 4) * dims + d]! + 0.05 * noise[row * dims + d]!;
      normalise(vectors, row * dims, dims);
    }
    const { centroids, assignments } = kMeans({ vectors, dims, lists: 4, sampleRows: Int32Array.from({ length: 400 }, (_, i) => i), iterations: 10 });
    for (let row = 0; row < 400; row++) {
      const nearest = bruteForce(centroids, dims, vectors.subarray(row * dims, row * dims + dims), 1)[0];
      expect(assignments[row]).toBe(nearest);
    }
    // Rows of one generating cluster share a list.
    for (let cluster = 0; cluster < 4; cluster++) {
      const lists = new Set(Array.from({ length: 100 }, (_, i) => assignments[i * 4 + cluster]));
      expect(lists.size).toBe(1);
    }
  });
});

describe("the CPU pool's split scan", () => {
  it('finds across two threads exactly what one scan finds, over all rows, probed rows and allowed rows', async () => {
    const dims = 24;
    const rows = 45_001; // shares of unequal size
    const shared = new Float32Array(new SharedArrayBuffer(rows * dims * 4));
    shared.set(randomUnitVectors(rows, dims, 5));
    const query = randomUnitVectors(1, dims, 17);
    const probed = Int32Array.from({ length: 30_000 }, (_, i) => (i * 7) % rows);
    const allowed = Uint8Array.from({ length: rows }, (_, row) => (row % 3 === 0 ? 1 : 0));
    const pool = new CpuPool(2);
    try {
      for (const input of [{}, { rows: probed }, { allowed }, { rows: probed, allowed }]) {
        const single = dotTopK({ vectors: shared, dims, query: query.slice(), k: 10, ...input });
        const split = await pool.dotTopK({ vectors: shared, dims, query: query.slice(), k: 10, ...(input.rows && { rows: input.rows.slice() }), ...(input.allowed && { allowed: input.allowed.slice() }) });
        expect([...split.indices]).toEqual([...single.indices]);
        expect([...split.scores]).toEqual([...single.scores]);
      }
    } finally {
      await pool.close();
    }
  });

  it("keeps a strict brain's composite top k exactly across two threads, whole or probed, with cosines", async () => {
    const dims = 24;
    const rows = 12_001;
    const day = 86_400_000;
    const now = Date.UTC(2026, 10, 28);
    const shared = new Float32Array(new SharedArrayBuffer(rows * dims * 4));
    shared.set(randomUnitVectors(rows, dims, 9));
    const query = randomUnitVectors(1, dims, 23);
    // Three kinds (an evergreen one, one decaying by its last use, one fixed like a pack row), ages and uses that vary by row.
    const ranking = {
      kind: Int32Array.from({ length: rows }, (_, row) => row % 3),
      kindWeight: Float64Array.from([1, 0.75, 0.9]),
      kindHalfLife: Float64Array.from([-1, 30, -1]),
      kindAnchor: Uint8Array.from([0, 2, 0]),
      kindFixed: Uint8Array.from([0, 0, 1]),
      createdAt: Float64Array.from({ length: rows }, (_, row) => now - (row % 90) * day),
      updatedAt: Float64Array.from({ length: rows }, (_, row) => now - (row % 60) * day),
      lastUsedAt: Float64Array.from({ length: rows }, (_, row) => (row % 5 === 0 ? Number.NaN : now - (row % 40) * day)),
      useCount: Int32Array.from({ length: rows }, (_, row) => row % 7),
      now,
    };
    const allowed = Uint8Array.from({ length: rows }, (_, row) => (row % 4 === 0 ? 0 : 1));
    const probed = Int32Array.from({ length: 9_000 }, (_, i) => (i * 11) % rows);
    const pool = new CpuPool(2);
    try {
      for (const input of [{}, { rows: probed }]) {
        const single = compositeTopK({ vectors: shared, dims, query: query.slice(), k: 12, allowed: allowed.slice(), ...ranking, ...input });
        const split = await pool.compositeTopK({ vectors: shared, dims, query: query.slice(), k: 12, allowed: allowed.slice(), ...ranking, ...(input.rows && { rows: input.rows.slice() }) });
        expect([...split.indices]).toEqual([...single.indices]);
        expect([...split.scores]).toEqual([...single.scores]);
        expect([...split.cosines]).toEqual([...single.cosines]);
      }
    } finally {
      await pool.close();
    }
  });
});
