import type { HiveServices } from '../composition/hive.js';
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
  let vector: number[] | null = null;
  let tokens = 0;
  try {
    const embedded = await embedWith(hive.providers, model, [input.query], AbortSignal.timeout(10_000));
    [vector = null] = embedded.embeddings;
    tokens = embedded.usage.inputTokens;
  } catch (error) {
    hive.logger.warn({ err: error }, 'hive recall could not embed its query; ranking by text alone');
  }

  const pool = Math.min(100, input.limit * 5);
  // Charged beside the search, never refused: a recall is a read, and reads work while suspended.
  const [hits] = await Promise.all([repo.recallHits(hive.db, {
    tokenId: credential.tokenId,
    text: input.query,
    nodePaths,
    scope: input.scope ?? null,
    kinds: input.kinds ?? null,
    vector,
    model: model.id,
    meaningFloor: MEANING_FLOOR,
    pool,
  }), chargeRecall(hive.db, hive.config, credential.orgId, tokens)]);

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
async function resolveSupersession(hive: Pick<HiveServices, 'db'>, credential: HiveCredential, hits: repo.RecallHit[]): Promise<Map<string, string>> {
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
