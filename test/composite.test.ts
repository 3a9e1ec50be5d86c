import { describe, expect, it } from 'vitest';
import { compositeFactors, compositeTopK, graphFactor, GRAPH_FACTOR } from '../shared/scoring/composite.js';

/** The strict brain's one-pass composite top k equals scoring every row with the recall formula and sorting. */
describe('compositeTopK', () => {
  it('keeps exactly the k best composites among the allowed rows', () => {
    const dims = 16;
    const rows = 2_000;
    const now = Date.UTC(2026, 10, 25);
    const { vectors, query, random } = randomUnitRows(11, rows, dims, 0.3);
    const kinds = [
      { weight: 1, halfLife: -1, anchor: 1 },
      { weight: 0.75, halfLife: 30, anchor: 2 },
      { weight: 0.6, halfLife: 3, anchor: 0 },
    ];
    const input = {
      vectors, dims, query: Float32Array.from(query), k: 10, now,
      allowed: Uint8Array.from({ length: rows }, () => (random() < 0.8 ? 1 : 0)),
      kind: Int32Array.from({ length: rows }, () => Math.floor(random() * 3)),
      kindWeight: Float64Array.from(kinds, (kind) => kind.weight),
      kindHalfLife: Float64Array.from(kinds, (kind) => kind.halfLife),
      kindAnchor: Uint8Array.from(kinds, (kind) => kind.anchor),
      createdAt: Float64Array.from({ length: rows }, () => now - random() * 90 * 86_400_000),
      updatedAt: Float64Array.from({ length: rows }, () => now - random() * 30 * 86_400_000),
      lastUsedAt: Float64Array.from({ length: rows }, () => (random() < 0.5 ? Number.NaN : now - random() * 10 * 86_400_000)),
      useCount: Int32Array.from({ length: rows }, () => Math.floor(random() * 5)),
    };
    const expected = Array.from({ length: rows }, (_, row) => row)
      .filter((row) => input.allowed[row] === 1)
      .map((row) => {
        const kind = kinds[input.kind[row]!]!;
        let cosine = 0;
        for (let i = 0; i < dims; i++) cosine += vectors[row * dims + i]! * query[i]!;
        const anchor = kind.anchor === 0 ? input.createdAt[row]! : kind.anchor === 2 && !Number.isNaN(input.lastUsedAt[row]!) ? input.lastUsedAt[row]! : input.updatedAt[row]!;
        return { row, score: compositeFactors({ cosine, tierWeight: kind.weight, halfLifeDays: kind.halfLife < 0 ? null : kind.halfLife, anchorAt: anchor, useCount: input.useCount[row]! }, now).score };
      })
      .sort((a, b) => b.score - a.score)
      .slice(0, 10);
    const found = compositeTopK(input);
    expect(Array.from(found.indices)).toEqual(expected.map((entry) => entry.row));
    found.scores.forEach((score, i) => expect(score).toBeCloseTo(expected[i]!.score, 5));

    // Given rows (IVF probes), only those are scored.
    const probed = Int32Array.from({ length: rows / 2 }, (_, i) => i * 2);
    const fromProbed = compositeTopK({ ...input, allowed: Uint8Array.from(input.allowed), query: Float32Array.from(query), rows: probed });
    expect(Array.from(fromProbed.indices).every((row) => row % 2 === 0)).toBe(true);
    expect(Array.from(fromProbed.indices)).toEqual(Array.from(fromProbed.indices).filter((row) => input.allowed[row] === 1));
    expect(fromProbed.indices).toHaveLength(10);
  });
});

describe('graph factor arithmetic', () => {
  it('is 1 without named entities, else 1 / 0.9 / 0.8 by link, and never lifts a composite above its cosine', () => {
    const graph = { named: new Set(['a']), neighbours: new Set(['a', 'b']) };
    expect([graphFactor(null, 'a'), graphFactor(graph, 'a'), graphFactor(graph, 'b'), graphFactor(graph, 'c')]).toEqual([1, 1, 0.9, 0.8]);
    expect(GRAPH_FACTOR).toEqual({ named: 1, neighbour: 0.9, unrelated: 0.8 });
    const factors = compositeFactors({ cosine: 0.5, tierWeight: 1, halfLifeDays: null, anchorAt: 0, useCount: 0, graph: 1.5 }, 0);
    expect(factors.graph).toBe(1);
    expect(compositeFactors({ cosine: 0.5, tierWeight: 1, halfLifeDays: null, anchorAt: 0, useCount: 0, graph: 0.8 }, 0).score).toBeCloseTo(0.5 * 0.75 * 0.8, 10);
  });

  it("compositeTopK (a strict brain's pass) ranks by each row's graph factor as scoring every row does", () => {
    const dims = 8;
    const rows = 500;
    const { vectors, query, random } = randomUnitRows(7, rows, dims, 0.2);
    const graph = Float32Array.from({ length: rows }, () => [1, 0.9, 0.8][Math.floor(random() * 3)]!);
    const input = () => ({
      vectors, dims, query: Float32Array.from(query), k: 10, now: 0,
      allowed: new Uint8Array(rows).fill(1),
      kind: new Int32Array(rows), kindWeight: Float64Array.of(1), kindHalfLife: Float64Array.of(-1), kindAnchor: Uint8Array.of(1),
      createdAt: new Float64Array(rows), updatedAt: new Float64Array(rows), lastUsedAt: new Float64Array(rows).fill(Number.NaN), useCount: new Int32Array(rows),
    });
    const expected = Array.from({ length: rows }, (_, row) => {
      let cosine = 0;
      for (let i = 0; i < dims; i++) cosine += vectors[row * dims + i]! * query[i]!;
      return { row, score: compositeFactors({ cosine, tierWeight: 1, halfLifeDays: null, anchorAt: 0, useCount: 0, graph: graph[row]! }, 0).score };
    }).sort((a, b) => b.score - a.score).slice(0, 10);
    const found = compositeTopK({ ...input(), graph });
    expect(Array.from(found.indices)).toEqual(expected.map((entry) => entry.row));
    found.scores.forEach((score, i) => expect(score).toBeCloseTo(expected[i]!.score, 5));
    // Without the graph the ten differ: the factor is what moved them.
    expect(Array.from(compositeTopK(input()).indices)).not.toEqual(Array.from(found.indices));
  });
});

describe('mounted rows', () => {
  it('compositeTopK gives kinds marked fixed recency and usage 1, as scoring a pack row does', () => {
    const dims = 8;
    const rows = 400;
    const now = 400 * 86_400_000;
    const { vectors, query, random } = randomUnitRows(5, rows, dims, 0.2);
    // Kind 0: a native type with a 3-day half-life; kind 1: the same type imported by a mount.
    const kind = Int32Array.from({ length: rows }, () => (random() < 0.5 ? 0 : 1));
    const updatedAt = Float64Array.from({ length: rows }, () => now - random() * 30 * 86_400_000);
    const useCount = Int32Array.from({ length: rows }, () => Math.floor(random() * 3));
    const found = compositeTopK({
      vectors, dims, query: Float32Array.from(query), k: 12, now,
      allowed: new Uint8Array(rows).fill(1), kind, kindWeight: Float64Array.of(0.6, 0.6), kindHalfLife: Float64Array.of(3, 3), kindAnchor: Uint8Array.of(1, 1), kindFixed: Uint8Array.of(0, 1),
      createdAt: updatedAt, updatedAt, lastUsedAt: new Float64Array(rows).fill(Number.NaN), useCount,
    });
    const expected = Array.from({ length: rows }, (_, row) => {
      let cosine = 0;
      for (let i = 0; i < dims; i++) cosine += vectors[row * dims + i]! * query[i]!;
      return { row, score: compositeFactors({ cosine, tierWeight: 0.6, halfLifeDays: 3, anchorAt: updatedAt[row]!, useCount: useCount[row]!, fixedRecencyAndUsage: kind[row] === 1 }, now).score };
    }).sort((a, b) => b.score - a.score).slice(0, 12);
    expect(Array.from(found.indices)).toEqual(expected.map((entry) => entry.row));
    found.scores.forEach((score, i) => expect(score).toBeCloseTo(expected[i]!.score, 5));
    // Aged and unused, the native rows lose to the mounted ones of a similar cosine.
    expect(Array.from(found.indices).filter((row) => kind[row] === 1).length).toBeGreaterThan(6);
  });
});

/** Seeded unit vectors (rows of `dims`, each component drawn in [-shift, 1 - shift)) and a unit query, with the generator for more. */
function randomUnitRows(seed: number, rows: number, dims: number, shift: number) {
  let state = seed;
  const random = () => ((state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  const vectors = new Float32Array(rows * dims).map(() => random() - shift);
  for (let row = 0; row < rows; row++) {
    const norm = Math.hypot(...vectors.subarray(row * dims, (row + 1) * dims));
    for (let i = 0; i < dims; i++) vectors[row * dims + i]! /= norm;
  }
  const query = Float32Array.from({ length: dims }, () => random());
  const queryNorm = Math.hypot(...query);
  for (let i = 0; i < dims; i++) query[i]! /= queryNorm;
  return { vectors, query, random };
}
