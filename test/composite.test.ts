import { describe, expect, it } from 'vitest';
import { compositeFactors, compositeTopK } from '../shared/scoring/composite.js';

/** The strict brain's one-pass composite top k equals scoring every row with the recall formula and sorting. */
describe('compositeTopK', () => {
  it('keeps exactly the k best composites among the allowed rows', () => {
    let seed = 11;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const dims = 16;
    const rows = 2_000;
    const now = Date.UTC(2026, 10, 25);
    const vectors = new Float32Array(rows * dims).map(() => random() - 0.3);
    for (let row = 0; row < rows; row++) {
      const norm = Math.hypot(...vectors.subarray(row * dims, (row + 1) * dims));
      for (let i = 0; i < dims; i++) vectors[row * dims + i]! /= norm;
    }
    const query = Float32Array.from({ length: dims }, () => random());
    const queryNorm = Math.hypot(...query);
    for (let i = 0; i < dims; i++) query[i]! /= queryNorm;
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
