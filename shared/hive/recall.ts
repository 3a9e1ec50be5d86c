import type { HiveServices } from '../composition/hive.js';
import type { Db } from '../db/pool.js';
import { nodeWithRole, type HiveCredential } from './access.js';
import { embedWith, hiveEmbeddingModel } from './embedding.js';
import { formatMemory } from './memories.js';
import * as repo from './memory-repository.js';
import { chargeRecall } from './metering.js';
import type { MemoryKind } from './schemas.js';

/** Vector matches below this cosine similarity are not matches at all (else every memory would be one). */
export const MEANING_FLOOR = 0.25;
/** Longest chain of supersessions followed from a match to what replaced it. */
const MAX_RESOLUTION_STEPS = 10;

export interface RecallInput {
  query: string;
  nodes?: string[];
  scope?: string;
  kinds?: MemoryKind[];
  limit: number;
}

/**
 * Ranked retrieval over the nodes the credential reaches (or those of `nodes` and below, each of
 * which must be reachable). The query is embedded through the provider adapters; when that fails
 * the answer says so and ranks by text alone. A superseded match is resolved onto the memory that
 * replaced it (following the chain inside the reach), and each memory appears once.
 */
export async function recall(hive: Pick<HiveServices, 'db' | 'config' | 'providers' | 'logger'>, credential: HiveCredential, input: RecallInput) {
  const nodePaths = input.nodes ? await Promise.all(input.nodes.map(async (ref) => (await nodeWithRole(hive.db, credential, ref, 'reader')).path)) : null;
  const model = hiveEmbeddingModel(hive.config);
  const embedding = embedWith(hive.providers, model, [input.query], AbortSignal.timeout(10_000)).then(
    (embedded) => ({ vector: embedded.embeddings[0] ?? null, tokens: embedded.usage.inputTokens }),
    (error: unknown) => {
      hive.logger.warn({ err: error }, 'hive recall could not embed its query; ranking by text alone');
      return { vector: null, tokens: 0 };
    },
  );
  const reach = { tokenId: credential.tokenId, nodePaths, scope: input.scope ?? null, kinds: input.kinds ?? null };
  // Charged beside the search, never refused: a recall is a read, and reads work while suspended.
  const [hits] = await Promise.all([
    rankedHits(hive.db, reach, { text: input.query, vector: embedding.then((embedded) => embedded.vector), model: model.id, pool: Math.min(100, input.limit * 5) }),
    embedding.then(({ tokens }) => chargeRecall(hive.db, hive.config, credential.orgId, tokens)),
  ]);
  const { vector } = await embedding;

  const finalOf = await resolveSupersession(hive, credential, hits);
  const merged = new Map<string, { score: number; byText: boolean; byMeaning: boolean; similarity: number | null; resolvedFrom: string[] }>();
  for (const hit of hits) {
    const target = finalOf.get(hit.id) ?? hit.id;
    const entry = merged.get(target) ?? { score: 0, byText: false, byMeaning: false, similarity: null, resolvedFrom: [] };
    entry.score = Math.max(entry.score, hit.score);
    entry.byText ||= hit.by_text;
    entry.byMeaning ||= hit.by_meaning;
    if (hit.similarity !== null) entry.similarity = Math.max(entry.similarity ?? -1, hit.similarity);
    if (target !== hit.id) entry.resolvedFrom.push(hit.id);
    merged.set(target, entry);
  }
  const ranked = [...merged.entries()].sort((a, b) => b[1].score - a[1].score || a[0].localeCompare(b[0])).slice(0, input.limit);
  const rows = new Map((await repo.memoriesInReach(hive.db, credential.tokenId, ranked.map(([id]) => id))).map((row) => [row.id, row]));
  const data = ranked.flatMap(([id, entry]) => {
    const row = rows.get(id);
    if (!row || row.forgotten_at) return [];
    return [{
      memory: formatMemory(row),
      score: Number(entry.score.toFixed(6)),
      matched: { text: entry.byText, meaning: entry.byMeaning },
      similarity: entry.similarity === null ? null : Number(entry.similarity.toFixed(4)),
      resolved_from: entry.resolvedFrom,
    }];
  });
  return { object: 'list', query: input.query, ranking: { text: true, meaning: vector !== null }, data };
}

/**
 * For each superseded hit, the last live memory of its chain of replacements that the caller can
 * reach; a chain that leaves the reach, or ends in a tombstone, stops at the last memory before.
 */
async function resolveSupersession(hive: Pick<HiveServices, 'db'>, credential: HiveCredential, hits: RecallHit[]): Promise<Map<string, string>> {
  const finalOf = new Map<string, string>();
  let frontier = new Map<string, string>(); // origin -> next replacement to look up
  for (const hit of hits) if (hit.superseded_by) frontier.set(hit.id, hit.superseded_by);
  for (let step = 0; step < MAX_RESOLUTION_STEPS && frontier.size > 0; step++) {
    const rows = new Map((await repo.memoriesInReach(hive.db, credential.tokenId, [...new Set(frontier.values())])).map((row) => [row.id, row]));
    const next = new Map<string, string>();
    for (const [origin, candidate] of frontier) {
      const row = rows.get(candidate);
      if (!row || row.forgotten_at || candidate === origin) continue;
      finalOf.set(origin, candidate);
      if (row.superseded_by && row.superseded_by !== origin) next.set(origin, row.superseded_by);
    }
    frontier = next;
  }
  return finalOf;
}

export interface RecallHit {
  id: string;
  superseded_by: string | null;
  score: number;
  by_text: boolean;
  by_meaning: boolean;
  similarity: number | null;
}

/**
 * Ranked retrieval inside the reach: the best full-text matches and the nearest vectors above the
 * similarity floor, fused by reciprocal rank (k = 60), then boosted: pinned x1.5, recently written
 * up to x1.25 (30-day decay), recently verified up to x1.2 (90-day decay). The two sides run side
 * by side on their own connections, the text side while the query is still being embedded: one
 * statement ran them one after the other (bench/hive.ts). A null vector ranks by text alone.
 */
export async function rankedHits(db: Db, reach: repo.RecallReach, search: { text: string; vector: Promise<number[] | null> | number[] | null; model: string; pool: number }): Promise<RecallHit[]> {
  const [text, meaning] = await Promise.all([
    repo.textHits(db, reach, search.text, search.pool),
    Promise.resolve(search.vector).then((vector) => (vector ? repo.meaningHits(db, reach, { vector, model: search.model, meaningFloor: MEANING_FLOOR, pool: search.pool }) : [])),
  ]);
  const now = Date.now();
  const fused = new Map<string, RecallHit & { rrf: number; boost: number }>();
  for (const [hits, byText] of [[text, true], [meaning, false]] as const) {
    for (const hit of hits) {
      const entry = fused.get(hit.id) ?? { id: hit.id, superseded_by: hit.superseded_by, score: 0, by_text: false, by_meaning: false, similarity: null, rrf: 0, boost: boost(hit, now) };
      entry.rrf += 1 / (60 + hit.rnk);
      if (byText) entry.by_text = true;
      else entry.by_meaning = true;
      if (hit.similarity !== null) entry.similarity = Number(hit.similarity);
      fused.set(hit.id, entry);
    }
  }
  return [...fused.values()]
    .map(({ rrf, boost: factor, ...hit }) => ({ ...hit, score: rrf * factor }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(0, search.pool);
}

const DAY_MS = 86_400_000;
const boost = (hit: repo.SideHit, now: number) =>
  (hit.pinned ? 1.5 : 1) *
  (1 + 0.25 * Math.exp(-(now - hit.updated_at.getTime()) / (30 * DAY_MS))) *
  (hit.verified_at === null ? 1 : 1 + 0.2 * Math.exp(-(now - hit.verified_at.getTime()) / (90 * DAY_MS)));
