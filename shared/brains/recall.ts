import type { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { compositeFactors, graphFactor, type CompositeFactors } from '../scoring/composite.js';
import { openText, openVectorInto, type StoreKeys } from '../vector-stores/crypto.js';
import { brainKeys, recalledBrainOf } from './brains.js';
import { chunkAad, vectorAad } from './aad.js';
import { queryGraph } from './entities.js';
import { embedQuery, type RetriedRecall } from './entries.js';
import { mountedGraphs, mountsForRecall, NativeTitles, openMountDraw, selectWithMounts, type MountCursor, type MountDraw, type MountedGraphs, type RecallMount, type Scored } from './mounted-recall.js';
import { packChunkContents } from './pack-repository.js';
import { packEntryIdOf } from './mounts.js';
import { frozenTierWeight, frozenWeightCeiling, rankingOf, tunedWeight, weightCeiling } from './policy.js';
import * as repo from './repository.js';
import type { recallBody } from './schemas.js';

/**
 * Recall (spec 2): the chunks nearest the query in the scopes the call may see, ranked by the
 * composite score cosine x tier weight x recency x usage x graph (graph favours entries linked to
 * the entities the query names: entities.ts). Recency, usage and graph are at most 1, so no chunk
 * scores above its cosine times the highest tier weight a row of its store can have
 * (weightCeiling): candidates are drawn nearest first until that bound of the next one cannot beat
 * the last place kept, and the ranking equals scoring every chunk (up to the approximate
 * nearest-neighbour search itself). Recall reads only: use_count and last_used stay.
 */
export const DEFAULT_TOP_K = 8;
export const MAX_TOP_K = 100;
const DRAW_GROWTH = 2;
export const MAX_DRAW = 4_096;

/**
 * The draw after `size`: first the rest of the search's beam, which its first walk already holds
 * (256 of a beam of 400 drawn, the next 144 are read, not searched for), then doubling, each
 * further draw walking the graph on. At 100,000 entries 28 % of recalls need more than 256 rows
 * and 1 % more than 400 (an experiment over the bench's queries).
 */
export const nextDraw = (size: number, beam: number) => (size < beam ? beam : size * DRAW_GROWTH);

/** `retried`: a recall inside work that retries and reports its cost (a learn pass); see embedQuery. */
export async function recall(platform: GatewayServices, developerId: string, call: MeteredCall, brainId: string, body: z.output<typeof recallBody>, retried?: RetriedRecall) {
  const brain = await recalledBrainOf(platform.db, developerId, brainId);
  const topK = Math.min(body.top_k ?? DEFAULT_TOP_K, MAX_TOP_K);
  const asOf = body.as_of ? new Date(body.as_of) : null;
  const explainMisses = body.explain_misses === true && asOf === null;
  const missesTopK = Math.min(body.misses_top_k ?? topK, MAX_TOP_K);
  const scope = body.scope ?? '/';
  const filter = scopeFilter(scope, body.inherit ?? true, body.subtree ?? false);
  const keys = await brainKeys(platform, brain);
  // The entry versions a brain's candidates rank by are kept whole per process once it is recalled, and brought up to its usage_seq (row-cache.ts).
  const versionSource = repo.rankedVersionSource(platform.db, brain.id);
  platform.rankedVersions.keepWhole(brain.id, brain.usage_seq, versionSource, (error) =>
    platform.logger.warn({ err: error, brain_id: brain.id }, "a brain's ranked versions could not be kept whole; recall reads them by id"),
  );
  // The mounts, and the entities the query names, are looked up while the query is embedded. The
  // searches open once the query and the mounts are known; the entities are awaited where the
  // first draw is scored (their lookup often ended after the embedding, and held the searches).
  const mountsRead = mountsForRecall(platform, brain.id);
  const nativeGraph = brain.has_entities ? queryGraph(platform.db, brain.id, filter, body.query) : null;
  const graphsRead = Promise.all([nativeGraph, mountsRead]).then(([native, mounts]) =>
    mounts.length === 0 ? { store: native, ofVersion: () => null } : mountedGraphs(platform, native, mounts, filter, body.query),
  );
  // Awaited below, where a failure is thrown; this only keeps it from counting as unhandled meanwhile.
  void graphsRead.catch(() => undefined);
  const embedded = await embedQuery(platform, call, brain, body.query, retried);
  // The query's charge is recorded while its candidates are searched: the recall answers, or fails, once it is.
  return onceCharged(embedded.charged, (async () => {
    const query = embedded.vector;
    const mounts = await mountsRead;
    const now = asOf?.getTime() ?? Date.now();
    // Enough places to rank: the hits, and the misses that would be shown.
    const places = topK + (explainMisses ? missesTopK : 0);

    const passesFilters = (entry: repo.RankedVersion) =>
      (!body.classes || body.classes.includes(entry.class)) && (!body.types || entry.class === 'policy' || (entry.type !== null && body.types.includes(entry.type)));

    const references = mounts.filter((mount) => mount.mode === 'reference' && mount.encryption_at_publish === 'none');
    const materialized = new Map(mounts.filter((mount) => mount.mode === 'materialize').map((mount) => [mount.mount_id, mount]));
    // No row a source has not given yet can score above its cosine times the highest weight a row of
    // that source can have: the brain's own rows (its imports among them) by its policy and theirs.
    const nativeCeiling = Math.max(weightCeiling(brain.memory_policy, brain), ...[...materialized.values()].map(frozenWeightCeiling));
    const strict = brain.encryption === 'strict';
    const strictHistory = strict && asOf !== null ? await openStrictHistory(platform, brain, keys!, query, filter, asOf) : null;
    const queryLiteral = new repo.VectorLiteral(query);
    // With mounts, the twin check reads the titles and entity names of every native candidate: each native draw's are asked for as it comes in.
    const titles = mounts.length > 0 ? new NativeTitles(brain.id) : null;
    // Candidates are drawn from every source in growing batches, each source from its own first draw
    // (a small space's is smaller), until each is done; a source done is drawn from no more.
    const drawAndScore = async (native: Pick<repo.NearestCursor<repo.ChunkCandidate>, 'draw' | 'firstDraw' | 'beam' | 'client'>, fromReferences: MountCursor[]): Promise<Scored[]> => {
      const versions = new Map<string, repo.RankedVersion>();
      const own = { size: native.firstDraw, beam: native.beam, rows: [] as repo.ChunkCandidate[], done: false };
      const references = fromReferences.map((cursor) => ({ cursor, size: cursor.firstDraw, beam: cursor.beam, drawn: undefined as MountDraw | undefined, done: false }));
      // Each draw returns every row so far; a row is scored once, the first time it comes.
      const scoredByKey = new Map<string, Scored>();
      // A native draw's entry versions are read on its connection while the reference mounts draw on theirs.
      const drawNative = async () => {
        own.rows = await native.draw(own.size);
        const unread = [...new Set(own.rows.map((candidate) => String(candidate.version_id)))].filter((id) => !versions.has(id));
        const read = await platform.rankedVersions.read(brain.id, brain.usage_seq, unread, (missing) => repo.versionsByIds(native.client, missing), versionSource);
        for (const [id, version] of read) versions.set(id, version);
        titles?.prefetch(native.client, [...read.values()].filter((entry) => entry.source_mount_id === null).map((entry) => entry.entry_id));
      };
      for (;;) {
        await Promise.all([
          own.done ? undefined : drawNative(),
          ...references.filter((source) => !source.done).map(async (source) => void (source.drawn = await source.cursor.draw(source.size))),
        ]);
        const nativeRows = own.rows.filter((candidate) => !scoredByKey.has(nativeKey(candidate)));
        const referenceRows = references.flatMap((source) => source.drawn!.rows).filter((row) => !scoredByKey.has(candidateKey(row)));
        for (const item of score(versions, brain, nativeRows, referenceRows, materialized, now, await graphsRead)) scoredByKey.set(candidateKey(item), item);
        const scored = [...scoredByKey.values()];
        const last = lastPlaceScore(scored, places, passesFilters);
        // A source is done when it ran out, or when nothing it has not given yet can beat the last place kept (which
        // only rises as more is drawn): drawn by composite (a strict brain's current chunks), the composite of its
        // last row; drawn by cosine, that row's cosine times the source's ceiling. One drawn to MAX_DRAW stops there.
        own.done ||=
          own.rows.length < own.size ||
          own.size >= MAX_DRAW ||
          (strict && !strictHistory ? last >= lastComposite(scored) : last >= (own.rows.at(-1)?.cosine ?? 0) * nativeCeiling);
        for (const source of references) source.done ||= source.drawn!.drawn < source.size || source.size >= MAX_DRAW || last >= source.drawn!.lastCosine * source.cursor.ceiling;
        if (own.done && references.every((source) => source.done)) return scored;
        for (const source of [own, ...references]) if (!source.done) source.size = nextDraw(source.size, source.beam);
      }
    };
    // Every cursor opened is closed, whatever fails after it; after a recall's draws the closes
    // (each a COMMIT on its connection, which never fails: a connection that cannot commit is
    // dropped) run on while the hits are picked and their contents read.
    const cursors: { close(): Promise<void> }[] = [];
    const closeAll = () => Promise.all(cursors.map((cursor) => cursor.close()));
    let scored: Scored[];
    try {
      // The brain's own search (a plaintext brain's) opens beside its reference mounts' searches.
      const [[nativeOpened], mountsOpened] = await Promise.all([
        Promise.allSettled([strict ? null : repo.openNearestChunks(platform.db, brain, brain.active_space, queryLiteral, filter, asOf, MAX_DRAW)]),
        Promise.allSettled(references.map((mount) => openMountDraw(platform, mount, queryLiteral, filter, MAX_DRAW))),
      ]);
      const fromReferences = mountsOpened.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
      cursors.push(...fromReferences);
      const native = nativeOpened!.status === 'fulfilled' ? nativeOpened!.value : null;
      if (native) cursors.push(native);
      const failed = [nativeOpened!, ...mountsOpened].find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      // A strict brain's rows are ranked in memory, with no search beam: its draws simply double.
      const inMemory = { firstDraw: repo.BRAIN_HNSW.firstDraw, beam: repo.BRAIN_HNSW.firstDraw, client: platform.db };
      if (strictHistory) {
        scored = await drawAndScore({ ...inMemory, draw: async (draw) => strictHistory.slice(0, draw) }, fromReferences);
      } else if (strict) {
        scored = await drawAndScore({ ...inMemory, draw: async (draw) => platform.strictBrains.best(brain, keys!, query, filter, draw, now, (await graphsRead).store, materialized) }, fromReferences);
      } else {
        scored = await drawAndScore(native!, fromReferences);
      }
    } catch (error) {
      await closeAll();
      throw error;
    }
    const closed = closeAll();

    for (const item of scored) if (!passesFilters(item.entry)) item.droppedBy = 'class_filter';
    const eligible = scored.filter((item) => item.droppedBy === null).sort(byScore);
    // A chunk pointing away from the query (score 0) is no match, whatever min_score says.
    for (const item of eligible) if (item.factors.score <= 0 || (body.min_score !== undefined && item.factors.score < body.min_score)) item.droppedBy = 'min_score';
    const passing = eligible.filter((item) => item.droppedBy === null);
    // With mounts, the provenance rules pick the places (a native twin suppresses its pack row); without, the best top_k.
    const { hits, twins } = titles ? await selectWithMounts(platform, brain, keys, titles, passing, topK, places) : { hits: passing.slice(0, topK), twins: new Set<Scored>() };
    for (const item of passing) if (!hits.includes(item) && !twins.has(item)) item.droppedBy = 'top_k';

    const misses = explainMisses
      ? (['class_filter', 'min_score', 'top_k'] as const).flatMap((reason) => scored.filter((item) => item.droppedBy === reason).sort(byScore)).slice(0, missesTopK)
      : [];
    const shown = [...hits, ...misses];
    const [contents, liveContents] = await Promise.all([
      repo.chunkContents(platform.db, brain.id, brain.active_space, shown.filter((item) => !isLive(item)).map((item) => item.candidate)),
      liveMountContents(platform, shown.filter(isLive)),
      closed,
    ]);
    const format = (item: Scored, miss: boolean) => {
      const stored = isLive(item) ? liveContents.get(`${item.mount!.version_id}:${item.candidate.entry_id}:${item.candidate.chunk_index}`) : contents.get(`${item.candidate.version_id}:${item.candidate.chunk_index}`);
      const content = stored?.content ?? (stored?.content_sealed ? openText(keys!, stored.content_sealed, chunkAad(brain.id, item.entry.entry_id, item.candidate.chunk_index)) : '');
      const explore = filter.subtreeOf !== null && item.entry.scope !== scope && isBelow(item.entry.scope, scope);
      const provenance = item.mount
        ? { store: 'pack' as const, pack_id: item.mount.pack_id, version: item.mount.version, mount_id: item.mount.mount_id, entry_id: item.packEntryId ?? item.entry.entry_id, scope: item.entry.scope }
        : { store: 'native' as const, entry_id: item.entry.entry_id, scope: item.entry.scope };
      return {
        entry_id: item.entry.entry_id,
        chunk_index: item.candidate.chunk_index,
        content,
        score: round(item.factors.score),
        class: item.entry.class,
        type: item.entry.type,
        trust: item.entry.trust,
        scope: item.entry.scope,
        source: { ...provenance, ...(item.entry.source && { provenance: item.entry.source }) },
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
  })());
}

/** `answer`'s value once `charged` is recorded too: the answer's failure first, else the charge's. */
async function onceCharged<T>(charged: Promise<void>, answer: Promise<T>): Promise<T> {
  const [answered, charge] = await Promise.allSettled([answer, charged]);
  if (answered.status === 'rejected') throw answered.reason;
  if (charge.status === 'rejected') throw charge.reason;
  return answered.value;
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
/** Best score first, then by entry and chunk; compared, not subtracted: a difference of scores is a double, boxed on the heap at each comparison. */
const byScore = (a: Scored, b: Scored) =>
  a.factors.score !== b.factors.score ? (a.factors.score < b.factors.score ? 1 : -1) : a.candidate.entry_id.localeCompare(b.candidate.entry_id) || a.candidate.chunk_index - b.candidate.chunk_index;
const round = (value: number) => Math.round(value * 1e6) / 1e6;
const roundFactors = (factors: CompositeFactors) => Object.fromEntries(Object.entries(factors).map(([key, value]) => [key, round(value)]));

/**
 * The composite of each candidate from its entry's tier, age, use and links to the query's
 * entities. Pack rows (a reference mount's, or a materialize mount's import) rank by their
 * version's frozen taxonomy and multipliers, without recency or usage. It is a few multiplications
 * a candidate, so it runs here: handing a draw to the CPU pool copied the candidates to a thread
 * and their factors back, 0.68 ms for 64 candidates and 15.4 ms for 4,096 against 0.13 and 0.49
 * ms computed in place (measured on 2 cores), and the copying held the event loop too. One object
 * a candidate (its factors aside): dropping a draw's intermediate arrays cut what a recall
 * allocated by an eighth (1,143 to 999 KB), and every young-generation collection is a pause of
 * the recall it lands in. `versions`
 * holds the entry version of every native candidate (read as each draw came in).
 */
function score(
  versions: Map<string, repo.RankedVersion>,
  brain: repo.BrainRow,
  native: repo.ChunkCandidate[],
  fromReferences: Omit<Scored, 'factors' | 'droppedBy'>[],
  materialized: Map<string, RecallMount>,
  now: number,
  graphs: MountedGraphs,
): Scored[] {
  const scored: Scored[] = [];
  for (const candidate of native) {
    const entry = versions.get(String(candidate.version_id))!;
    const mount = entry.source_mount_id ? (materialized.get(entry.source_mount_id) ?? null) : null;
    scored.push(scoredRow(candidate, entry, mount, mount ? packEntryIdOf(mount.mount_id, entry.entry_id) : null, brain, now, graphs));
  }
  for (const row of fromReferences) scored.push(scoredRow(row.candidate, row.entry, row.mount, row.packEntryId, brain, now, graphs));
  return scored;
}

function scoredRow(candidate: repo.ChunkCandidate, entry: repo.RankedVersion, mount: RecallMount | null, packEntryId: string | null, brain: repo.BrainRow, now: number, graphs: MountedGraphs): Scored {
  // A reference mount's live row goes by its version's graph; the brain's own rows (materialized ones too) by the store's.
  const graph = graphFactor(mount?.mode === 'reference' ? graphs.ofVersion(mount.version_id) : graphs.store, entry.entry_id);
  let factors: CompositeFactors;
  if (mount) {
    factors = compositeFactors({ cosine: candidate.cosine, tierWeight: frozenTierWeight(mount, entry.class, entry.type), halfLifeDays: null, anchorAt: 0, useCount: 0, fixedRecencyAndUsage: true, graph }, now);
  } else {
    const ranking = rankingOf(brain.memory_policy, entry.class, entry.type);
    const anchor = ranking.anchor === 'created' ? entry.created_at : ranking.anchor === 'updated' ? entry.updated_at : (entry.last_used ?? entry.updated_at);
    factors = compositeFactors({ cosine: candidate.cosine, tierWeight: tunedWeight(brain, ranking.tier, ranking.weight), halfLifeDays: ranking.halfLifeDays, anchorAt: anchor.getTime(), useCount: entry.use_count, graph }, now);
  }
  return { candidate, entry, mount, packEntryId, factors, droppedBy: null };
}

/**
 * The score a row must beat to take a place: the `places`-th best of the items that pass the
 * filters, or 0 while fewer pass (an open place takes any row that scores; one that scores 0 is
 * no match). Sorted as numbers in place, without a comparator.
 */
function lastPlaceScore(items: Scored[], places: number, passes: (entry: repo.RankedVersion) => boolean): number {
  const scores = new Float64Array(items.length);
  let passing = 0;
  for (const item of items) if (passes(item.entry)) scores[passing++] = item.factors.score;
  if (passing < places) return 0;
  return scores.subarray(0, passing).sort()[passing - places]!;
}

/** A row's identity within one recall: a reference mount's by its mount and pack entry, any other by its chunk's version. */
const candidateKey = (row: Pick<Scored, 'candidate' | 'mount'>) =>
  row.mount?.mode === 'reference' ? `${row.mount.mount_id}:${row.candidate.entry_id}:${row.candidate.chunk_index}` : nativeKey(row.candidate);
const nativeKey = (candidate: repo.ChunkCandidate) => `${candidate.version_id}:${candidate.chunk_index}`;

/** The lowest composite among a strict draw's native rows: nothing the pass has not returned scores above it. */
const lastComposite = (scored: Scored[]) => Math.min(...scored.filter((item) => item.mount === null || item.mount.mode === 'materialize').map((item) => item.factors.score));

/** A reference mount's row is read from its version, not the brain's store. */
const isLive = (item: Scored) => item.mount !== null && item.mount.mode === 'reference';

async function liveMountContents(platform: GatewayServices, items: Scored[]) {
  const contents = new Map<string, { content: string | null; content_sealed: Buffer | null }>();
  for (const versionId of new Set(items.map((item) => item.mount!.version_id))) {
    const found = await packChunkContents(platform.db, versionId, items.filter((item) => item.mount!.version_id === versionId).map((item) => ({ entry_id: item.candidate.entry_id, chunk_index: item.candidate.chunk_index })));
    for (const [key, value] of found) contents.set(`${versionId}:${key}`, value);
  }
  return contents;
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
