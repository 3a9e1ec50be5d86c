import { toSql } from 'pgvector';
import type { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { graphFactor, type CompositeFactors, type QueryGraph } from '../scoring/composite.js';
import { openText, openVectorInto, type StoreKeys } from '../vector-stores/crypto.js';
import { brainKeys, brainOf } from './brains.js';
import { chunkAad, vectorAad } from './aad.js';
import { queryGraph } from './entities.js';
import { embedQuery } from './entries.js';
import { rankingOf, tunedWeight } from './policy.js';
import * as repo from './repository.js';
import type { recallBody } from './schemas.js';

/**
 * Recall (spec 2): the chunks nearest the query in the scopes the call may see, ranked by the
 * composite score cosine x tier weight x recency x usage x graph (graph favours entries linked to
 * the entities the query names: entities.ts). Every factor is at most 1, so
 * no chunk scores above its cosine: candidates are drawn nearest first until the next one's
 * cosine cannot beat the last place kept, and the ranking equals scoring every chunk (up to the
 * approximate nearest-neighbour search itself). Recall reads only: use_count and last_used stay.
 */
export const DEFAULT_TOP_K = 8;
export const MAX_TOP_K = 100;
const FIRST_DRAW = 256;
const MAX_DRAW = 4_096;

type DroppedBy = 'class_filter' | 'min_score' | 'top_k';

interface Scored {
  candidate: repo.ChunkCandidate;
  entry: repo.RankedVersion;
  factors: CompositeFactors;
  droppedBy: DroppedBy | null;
}

export async function recall(platform: GatewayServices, developerId: string, call: MeteredCall, brainId: string, body: z.output<typeof recallBody>) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const topK = Math.min(body.top_k ?? DEFAULT_TOP_K, MAX_TOP_K);
  const asOf = body.as_of ? new Date(body.as_of) : null;
  const explainMisses = body.explain_misses === true && asOf === null;
  const missesTopK = Math.min(body.misses_top_k ?? topK, MAX_TOP_K);
  const scope = body.scope ?? '/';
  const filter = scopeFilter(scope, body.inherit ?? true, body.subtree ?? false);
  const keys = await brainKeys(platform, brain);
  // The entities the query names are looked up while the query is embedded.
  const [query, graph] = await Promise.all([embedQuery(platform, call, brain, body.query), queryGraph(platform.db, brain.id, filter, body.query)]);
  const now = asOf?.getTime() ?? Date.now();
  // Enough places to rank: the hits, and the misses that would be shown.
  const places = topK + (explainMisses ? missesTopK : 0);

  const passesFilters = (entry: repo.RankedVersion) =>
    (!body.classes || body.classes.includes(entry.class)) && (!body.types || entry.class === 'policy' || (entry.type !== null && body.types.includes(entry.type)));

  let scored: Scored[] = [];
  const strict = brain.encryption === 'strict';
  const strictHistory = strict && asOf !== null ? await openStrictHistory(platform, brain, keys!, query, filter, asOf) : null;
  for (let draw = FIRST_DRAW; ; draw *= 4) {
    const candidates = strictHistory
      ? strictHistory.slice(0, draw)
      : strict
        ? await platform.strictBrains.best(brain, keys!, query, filter, draw, now, graph)
        : await repo.nearestChunks(platform.db, brain, brain.active_space, toSql(query), filter, draw, asOf);
    scored = await score(platform, brain, candidates, now, graph);
    const exhausted = candidates.length < draw || draw >= MAX_DRAW;
    const kept = scored.filter((item) => passesFilters(item.entry)).map((item) => item.factors.score).sort((a, b) => b - a);
    // Drawn by composite (a strict brain's current chunks), the first places that pass the filters are the answer;
    // drawn by cosine, nothing not yet drawn scores above the cosine of the last chunk drawn.
    const enough = strict && !strictHistory ? kept.length >= places : kept.length >= places && kept[places - 1]! >= candidates[candidates.length - 1]!.cosine;
    if (exhausted || enough) break;
  }

  for (const item of scored) if (!passesFilters(item.entry)) item.droppedBy = 'class_filter';
  const eligible = scored.filter((item) => item.droppedBy === null).sort(byScore);
  // A chunk pointing away from the query (score 0) is no match, whatever min_score says.
  for (const item of eligible) if (item.factors.score <= 0 || (body.min_score !== undefined && item.factors.score < body.min_score)) item.droppedBy = 'min_score';
  const hits = eligible.filter((item) => item.droppedBy === null).slice(0, topK);
  for (const item of eligible) if (item.droppedBy === null && !hits.includes(item)) item.droppedBy = 'top_k';

  const misses = explainMisses
    ? (['class_filter', 'min_score', 'top_k'] as const).flatMap((reason) => scored.filter((item) => item.droppedBy === reason).sort(byScore)).slice(0, missesTopK)
    : [];
  const contents = await repo.chunkContents(platform.db, brain.id, brain.active_space, [...hits, ...misses].map((item) => item.candidate));
  const format = (item: Scored, miss: boolean) => {
    const stored = contents.get(`${item.candidate.version_id}:${item.candidate.chunk_index}`);
    const content = stored?.content ?? (stored?.content_sealed ? openText(keys!, stored.content_sealed, chunkAad(brain.id, item.entry.entry_id, item.candidate.chunk_index)) : '');
    const explore = filter.subtreeOf !== null && item.entry.scope !== scope && isBelow(item.entry.scope, scope);
    return {
      entry_id: item.entry.entry_id,
      chunk_index: item.candidate.chunk_index,
      content,
      score: round(item.factors.score),
      class: item.entry.class,
      type: item.entry.type,
      trust: item.entry.trust,
      scope: item.entry.scope,
      source: { store: 'native' as const, entry_id: item.entry.entry_id, scope: item.entry.scope, ...(item.entry.source && { provenance: item.entry.source }) },
      ...(explore && { explore: true }),
      ...((body.explain || miss) && { factors: roundFactors(item.factors) }),
      ...(miss && { dropped_by: item.droppedBy }),
    };
  };
  return {
    object: 'list' as const,
    brain_id: brain.id,
    data: hits.map((item) => format(item, false)),
    ...(explainMisses && { misses: misses.map((item) => format(item, true)) }),
    ...(asOf && { as_of: asOf.toISOString() }),
  };
}

/** inherit: the scope and its ancestors (else the leaf alone); subtree: also everything beneath. */
export function scopeFilter(scope: string, inherit: boolean, subtree: boolean): repo.ScopeFilter {
  const scopes = inherit ? ancestorsOf(scope) : [scope];
  return { scopes, subtreeOf: subtree ? scope : null };
}

export function ancestorsOf(scope: string): string[] {
  if (scope === '/') return ['/'];
  const segments = scope.split('/').slice(1);
  return ['/', ...segments.map((_, i) => `/${segments.slice(0, i + 1).join('/')}`)];
}

const isBelow = (scope: string, parent: string) => (parent === '/' ? scope !== '/' : scope.startsWith(`${parent}/`));
const byScore = (a: Scored, b: Scored) => b.factors.score - a.factors.score || a.candidate.entry_id.localeCompare(b.candidate.entry_id) || a.candidate.chunk_index - b.candidate.chunk_index;
const round = (value: number) => Math.round(value * 1e6) / 1e6;
const roundFactors = (factors: CompositeFactors) => Object.fromEntries(Object.entries(factors).map(([key, value]) => [key, round(value)]));

/** The composite of each candidate, computed in the CPU pool from its entry's tier, age, use and links to the query's entities. */
async function score(platform: GatewayServices, brain: repo.BrainRow, candidates: repo.ChunkCandidate[], now: number, graph: QueryGraph | null): Promise<Scored[]> {
  const entries = await repo.versionsByIds(platform.db, [...new Set(candidates.map((candidate) => String(candidate.version_id)))]);
  const rows = candidates.map((candidate) => ({ candidate, entry: entries.get(String(candidate.version_id))! }));
  const factors = await platform.cpu.compositeRank({
    now,
    candidates: rows.map(({ candidate, entry }) => {
      const ranking = rankingOf(brain.memory_policy, entry.class, entry.type);
      const anchor = ranking.anchor === 'created' ? entry.created_at : ranking.anchor === 'updated' ? entry.updated_at : (entry.last_used ?? entry.updated_at);
      return { cosine: candidate.cosine, tierWeight: tunedWeight(brain, ranking.tier, ranking.weight), halfLifeDays: ranking.halfLifeDays, anchorAt: anchor.getTime(), useCount: entry.use_count, graph: graphFactor(graph, entry.entry_id) };
    }),
  });
  return rows.map((row, i) => ({ ...row, factors: factors[i]!, droppedBy: null }));
}

/**
 * A strict brain's chunks as of an instant, nearest first: the vectors valid then, opened for
 * this call and scored in the CPU pool (history is not kept open; current vectors are).
 */
async function openStrictHistory(platform: GatewayServices, brain: repo.BrainRow, keys: StoreKeys, query: number[], filter: repo.ScopeFilter, asOf: Date): Promise<repo.ChunkCandidate[]> {
  const sealed = await repo.sealedChunks(platform.db, brain.id, brain.active_space, filter, asOf);
  if (sealed.length === 0) return [];
  const dims = brain.embedding_dims;
  const block = new Float32Array(sealed.length * dims);
  sealed.forEach((chunk, row) => openVectorInto(keys, chunk.embedding_sealed, vectorAad(brain.id, brain.active_space, chunk.entry_id, chunk.chunk_index), block, row * dims));
  const best = await platform.cpu.cosineTopK({ query: Float32Array.from(query), candidates: block, dims, k: Math.min(sealed.length, MAX_DRAW) });
  return Array.from(best.indices, (row, i) => {
    const chunk = sealed[row]!;
    return { version_id: String(chunk.version_id), chunk_index: chunk.chunk_index, entry_id: chunk.entry_id, scope: chunk.scope, cosine: best.scores[i]! };
  });
}
