import { finish, seedOf, textFeatures, tokenize } from './text-features.js';

/**
 * The emulator's embeddings: deterministic feature hashing, so that texts sharing words lie close
 * together and retrieval can be tested on them. Each feature of the text (text-features.ts) adds
 * its weight to two components of the vector, chosen and signed by its hash in the model's own
 * space; the sum is L2-normalised. A shortened embedding (`dimensions`) is hashed straight into the
 * requested size, so it ranks like the full one.
 */
const seeds = new Map<string, number>();

function modelSeed(model: string): number {
  let seed = seeds.get(model);
  if (seed === undefined) {
    seed = seedOf(model);
    seeds.set(model, seed);
  }
  return seed;
}

/** A deterministic embedding: unit length, the same for the same input and model, near for shared words. */
export function deterministicEmbedding(model: string, input: string, dimensions: number): number[] {
  const vector = new Float64Array(dimensions);
  for (const { hash, weight } of textFeatures(input, modelSeed(model))) {
    const share = weight * Math.SQRT1_2;
    const second = finish(hash ^ 0x9e3779b9);
    vector[hash % dimensions]! += hash & 0x80000000 ? -share : share;
    vector[second % dimensions]! += second & 0x80000000 ? -share : share;
  }
  let norm = 0;
  for (let i = 0; i < dimensions; i++) norm += vector[i]! * vector[i]!;
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  return Array.from(vector, (value) => value * scale);
}

/**
 * A rerank relevance score in [0, 1]: the cosine of the two texts' feature weights (in one shared
 * space), so documents that share the query's words, and better its phrases, rank first.
 */
export function relevance(query: string, document: string): number {
  if (tokenize(query).length === 0 || tokenize(document).length === 0) return 0;
  const seed = modelSeed('rerank');
  const weights = (text: string) => {
    const map = new Map<number, number>();
    for (const { hash, weight } of textFeatures(text, seed)) map.set(hash, (map.get(hash) ?? 0) + weight);
    return map;
  };
  const q = weights(query);
  const d = weights(document);
  let dot = 0;
  for (const [hash, weight] of q) dot += weight * (d.get(hash) ?? 0);
  const norm = (map: Map<number, number>) => Math.sqrt([...map.values()].reduce((sum, weight) => sum + weight * weight, 0));
  const score = dot / (norm(q) * norm(d) || 1);
  return Math.round(Math.min(1, Math.max(0, score)) * 1e6) / 1e6;
}
