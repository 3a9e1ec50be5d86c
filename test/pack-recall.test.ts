import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkEntities } from '../shared/brains/entities.js';
import { mountsForRecall, NativeTitles } from '../shared/brains/mounted-recall.js';
import { openNearestPackChunks, versionPartitionOf } from '../shared/brains/pack-repository.js';
import { VectorLiteral } from '../shared/brains/repository.js';
import { remapScope, sourceScopesFor } from '../shared/brains/scope-map.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { brainApi } from './support/brain-api.js';
import type { TestDeveloper, TestPlatform } from './support/test-platform.js';

/**
 * Recall with mounts against the real services (spec 2, "Recall with mounts"): pack rows from a
 * reference mount (read live from the version) and from a materialize mount (imported rows) join
 * the brain's own in one ranked list, at their scope_map targets, with pack provenance; they rank
 * without recency or usage and by the version's frozen tier weights; a native twin suppresses its
 * pack row; native rows above the relevance threshold keep their reserved places.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000));
  workers = await startInProcessWorkers(gateway.platform);
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const { send, newBrain, write } = brainApi(() => gateway.baseUrl, () => developer.key);

async function ok(method: string, path: string, json?: unknown) {
  const answer = await send(method, path, json);
  expect(answer.status, `${method} ${path}: ${JSON.stringify(answer.body)}`).toBe(200);
  return answer.body;
}

interface Hit {
  entry_id: string;
  scope: string;
  content: string;
  score: number;
  source: { store: 'native' | 'pack'; pack_id?: string; version?: number; mount_id?: string; entry_id: string };
  factors?: { cosine: number; tier_weight: number; recency: number; usage: number; graph: number; score: number };
}

const recall = async (brainId: string, body: Record<string, unknown>): Promise<Hit[]> => (await ok('POST', `/v1/brains/${brainId}/recall`, body)).data;

/** A source brain with these entries, published: the pack id and version. */
async function packOf(entries: Record<string, unknown>[], brain: Record<string, unknown> = {}) {
  const source = await newBrain(brain);
  for (const entry of entries) await write(source, entry);
  const published = await ok('POST', `/v1/brains/${source}/publish`, {});
  expect(published.status).toBe('ready');
  return { source, packId: published.pack_id as string, version: published.version as number };
}

const SHIPPING = 'Orders ship from the Rotterdam warehouse within two business days.';
const RETURNS = 'Customers may return unworn shoes within thirty days for a full refund.';

describe('a reference mount', () => {
  it('joins recall with pack provenance at its scope_map target; rows no key covers stay out', async () => {
    const pack = await packOf([
      { entry_id: 'shipping', scope: '/docs/logistics', title: 'Shipping', body: SHIPPING },
      { entry_id: 'internal', scope: '/internal', title: 'Returns', body: RETURNS },
    ]);
    const consumer = await newBrain();
    await write(consumer, { entry_id: 'own', scope: '/kb', title: 'Support hours', body: 'Support answers chats from nine to five on weekdays.' });
    const mount = await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: pack.packId, scope_map: { '/docs': '/kb' } });
    expect(mount.status).toBe('ready');

    const hits = await recall(consumer, { query: 'Where do orders ship from?', scope: '/kb/logistics', explain: true, top_k: 5 });
    const shipped = hits.find((hit) => hit.source.store === 'pack');
    expect(shipped).toMatchObject({ entry_id: 'shipping', scope: '/kb/logistics', content: SHIPPING, source: { store: 'pack', pack_id: pack.packId, version: 1, mount_id: mount.id, entry_id: 'shipping' } });
    // Rule 1: recency and usage are 1 for a mounted row; the composite is cosine x tier weight x graph.
    expect(shipped!.factors).toMatchObject({ recency: 1, usage: 1 });
    expect(shipped!.factors!.score).toBeCloseTo(shipped!.factors!.cosine * shipped!.factors!.tier_weight * shipped!.factors!.graph, 5);
    expect(hits.find((hit) => hit.entry_id === 'own')).toMatchObject({ source: { store: 'native', entry_id: 'own' } });
    // The version's entries are kept by the process (a version never changes): the recalls below rank from memory.
    const { rows } = await gateway.platform.db.query(`SELECT id FROM brain_pack_versions WHERE pack_id = $1 AND version = 1`, [pack.packId]);
    expect(gateway.platform.packEntryFacts.keptFor(rows[0].id)).toBeGreaterThan(0);

    // A scope outside the target sees none of it; the target's subtree does; /internal is covered by no key of the scope_map: never mounted.
    expect((await recall(consumer, { query: 'Where do orders ship from?', scope: '/other' })).some((hit) => hit.source.store === 'pack')).toBe(false);
    expect((await recall(consumer, { query: 'Where do orders ship from?', scope: '/kb', subtree: true })).map((hit) => hit.entry_id).sort()).toEqual(['own', 'shipping']);
    const everything = await recall(consumer, { query: 'Can I return shoes?', scope: '/', subtree: true, top_k: 10 });
    expect(everything.some((hit) => hit.content === RETURNS)).toBe(false);
  });

  it("ranks a pack row by its version's frozen taxonomy, not the consumer's policy", async () => {
    const taxonomy = [{ type: 'fact', tier: 'B', weight: 0.4 }];
    const pack = await packOf([{ entry_id: 'warehouse', class: 'memory', type: 'fact', body: SHIPPING }], { memory_policy: { type_taxonomy: taxonomy } });
    const consumer = await newBrain();
    await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: pack.packId });
    // The consumer's own taxonomy changing later does not touch the pack row's weight either.
    await ok('PATCH', `/v1/brains/${consumer}`, { memory_policy: { type_taxonomy: [{ type: 'fact', tier: 'A', weight: 1 }] } });
    const [hit] = await recall(consumer, { query: 'Where do orders ship from?', explain: true });
    expect(hit).toMatchObject({ entry_id: 'warehouse', source: { store: 'pack' }, factors: { tier_weight: 0.4, recency: 1, usage: 1 } });
  });

  it('a native twin suppresses its pack row: the same entry id, or the same scope and title', async () => {
    const pack = await packOf([
      { entry_id: 'shipping', title: 'Shipping', body: SHIPPING },
      { entry_id: 'returns', scope: '/policies', title: 'Returns policy', body: RETURNS },
      { entry_id: 'sizes', scope: '/policies', title: 'Sizing', body: 'Our shoes run half a size small; order one size up.' },
    ]);
    const consumer = await newBrain();
    await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: pack.packId });
    const before = await recall(consumer, { query: 'What is the returns policy for shoes?', scope: '/', subtree: true, top_k: 10 });
    expect(before.filter((hit) => hit.source.store === 'pack').map((hit) => hit.entry_id).sort()).toEqual(['returns', 'shipping', 'sizes']);

    // Supersedes by entry id, and a differently-worded native entry with the pack row's title in its scope.
    await write(consumer, { entry_id: 'shipping', body: 'Orders now ship from the Antwerp warehouse within one business day.' });
    await write(consumer, { entry_id: 'our-returns', scope: '/policies', title: 'returns  POLICY', body: 'Returns are accepted for sixty days, worn or not.' });
    const after = await recall(consumer, { query: 'What is the returns policy for shoes?', scope: '/', subtree: true, top_k: 10 });
    expect(after.filter((hit) => hit.source.store === 'pack').map((hit) => hit.entry_id)).toEqual(['sizes']);
    expect(after.filter((hit) => hit.source.store === 'native').map((hit) => hit.entry_id).sort()).toEqual(['our-returns', 'shipping']);

    // Twins are looked for only among rows that could be shown, a window at a time, until enough rows that are none:
    // with one place, or one place and ten misses, no twin is shown either way.
    const one = await recall(consumer, { query: 'What is the returns policy for shoes?', scope: '/', subtree: true, top_k: 1 });
    expect(one).toHaveLength(1);
    expect(one[0]!.source.store === 'pack' && ['returns', 'shipping'].includes(one[0]!.entry_id)).toBe(false);
    const explained = await ok('POST', `/v1/brains/${consumer}/recall`, { query: 'What is the returns policy for shoes?', scope: '/', subtree: true, top_k: 1, explain_misses: true, misses_top_k: 10 });
    const shown = [...explained.data, ...explained.misses] as Hit[];
    expect(shown.filter((hit) => hit.source.store === 'pack').map((hit) => hit.entry_id)).toEqual(['sizes']);
    expect(shown.filter((hit) => hit.source.store === 'native').map((hit) => hit.entry_id).sort()).toEqual(['our-returns', 'shipping']);
  });

  it("reads the twin check's native titles as draws come in, and any entry no draw asked for when the check needs it", async () => {
    const brain = await newBrain();
    await write(brain, { entry_id: 'drawn', title: 'Shipping', body: SHIPPING });
    await write(brain, { entry_id: 'unasked', title: 'Returns', body: RETURNS });
    const titles = new NativeTitles(brain);
    titles.prefetch(gateway.platform.db, ['drawn']);
    const read = await titles.of(gateway.platform.db, ['drawn', 'unasked']);
    expect([...read.values()].map((entry) => [entry.entry_id, entry.title]).sort()).toEqual([['drawn', 'Shipping'], ['unasked', 'Returns']]);
  });

  it('draws deeper into the version when its best composite lies past the first batch', async () => {
    // 300 near copies of the question at a frozen weight of 0.02 fill the version's first batches; the answer sits just past them by cosine.
    const source = await newBrain({ memory_policy: { type_taxonomy: [{ type: 'echo', tier: 'C', weight: 0.02 }, { type: 'decision', tier: 'A', weight: 1 }] } });
    const entries = [
      ...Array.from({ length: 300 }, (_, i) => ({ entry_id: `echo${i}`, class: 'memory', type: 'echo', body: `How often are the database credentials rotated? Asked again, time ${i}.` })),
      { entry_id: 'answer', class: 'memory', type: 'decision', body: 'The platform team rotates database credentials every ninety days.' },
    ];
    for (let at = 0; at < entries.length; at += 20) await Promise.all(entries.slice(at, at + 20).map((entry) => write(source, entry)));
    const published = await ok('POST', `/v1/brains/${source}/publish`, {});
    expect(published.status).toBe('ready');
    const consumer = await newBrain();
    await write(consumer, { entry_id: 'own', body: 'Lunch is served at noon in the canteen.' });
    await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: published.pack_id });

    const hits = await recall(consumer, { query: 'How often are the database credentials rotated?', explain: true });
    expect(hits[0]).toMatchObject({ entry_id: 'answer', source: { store: 'pack', entry_id: 'answer' } });
    const echoes = hits.filter((hit) => hit.entry_id.startsWith('echo'));
    expect(echoes.length).toBeGreaterThan(0);
    // The premise: the echoes drawn are nearer the question than the answer is.
    expect(Math.min(...echoes.map((hit) => hit.factors!.cosine))).toBeGreaterThan(hits[0]!.factors!.cosine);
  }, 60_000);

  it('a relevant native row keeps a reserved place when pack rows score higher', async () => {
    const pack = await packOf([
      { entry_id: 'p1', title: 'Returns one', body: RETURNS },
      { entry_id: 'p2', title: 'Returns two', body: `${RETURNS} Keep the receipt.` },
      { entry_id: 'p3', title: 'Returns three', body: `${RETURNS} Refunds take five days.` },
    ]);
    const consumer = await newBrain({ memory_policy: { type_taxonomy: [{ type: 'status', tier: 'D', weight: 0.35 }] } });
    // A native status memory scores well under the pack's references (tier weight 0.35), yet it is relevant.
    await write(consumer, { entry_id: 'mine', class: 'memory', type: 'status', body: 'The returns desk for shoes is closed this week; refunds are delayed.' });
    // Mounted under /pack, the pack rows are no twins of the native row at / (they share its entities, but not its scope).
    await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: pack.packId, scope_map: { '/': '/pack' } });
    const hits = await recall(consumer, { query: 'Can customers return shoes for a refund?', scope: '/pack', top_k: 2, explain: true });
    const native = hits.find((hit) => hit.entry_id === 'mine');
    expect(native?.source.store).toBe('native');
    expect(native!.factors!.cosine).toBeGreaterThanOrEqual(0.3);
    expect(hits).toHaveLength(2);
    // Without the reservation it would have lost its place to every pack row.
    const packScores = hits.filter((hit) => hit.source.store === 'pack').map((hit) => hit.score);
    expect(packScores.every((score) => score > native!.score)).toBe(true);
  });
});

describe('a version without a graph', () => {
  it('is searched exactly with JIT off: the disabled plans would otherwise cost enough to compile every search', async () => {
    // A version published with its call (1,000 entries or fewer) has no HNSW index: a reference
    // mount's search is a scan and a sort, whose cost the disabled plan kinds inflate past
    // PostgreSQL's JIT threshold. JIT compiled each such search of 1,000 chunks for about 220 ms.
    const source = await newBrain();
    await write(source, { entry_id: 'shipping', title: 'Shipping', body: SHIPPING });
    await write(source, { entry_id: 'returns', title: 'Returns', body: RETURNS });
    const published = await ok('POST', `/v1/brains/${source}/publish`, {});
    const partition = versionPartitionOf(published.id);
    const db = gateway.platform.db;
    const { rows: indexes } = await db.query<{ indexdef: string }>(`SELECT indexdef FROM pg_indexes WHERE tablename = $1`, [partition]);
    expect(indexes.some((index) => /hnsw/i.test(index.indexdef))).toBe(false);
    const { rows: [chunk] } = await db.query<{ entry_id: string; query: string; dims: number }>(`SELECT entry_id, embedding::text AS query, vector_dims(embedding) AS dims FROM ${partition} WHERE entry_id = 'returns'`);
    const cursor = await openNearestPackChunks(db, published.id, chunk!.dims, new VectorLiteral(JSON.parse(chunk!.query) as number[]), null, 10);
    try {
      expect((await cursor.client.query<{ jit: string }>(`SELECT current_setting('jit') AS jit`)).rows[0]!.jit).toBe('off');
      const drawn = await cursor.draw(10);
      expect(drawn.map((row) => row.entry_id)).toEqual(['returns', 'shipping']);
      expect(drawn[0]!.cosine).toBeCloseTo(1, 5);
    } finally {
      await cursor.close();
    }
  });
});

describe('a materialize mount', () => {
  it("serves its imported rows with pack provenance and the pack's entry ids; unmounted, they are gone", async () => {
    const pack = await packOf([{ entry_id: 'shipping', scope: '/docs', title: 'Shipping', body: SHIPPING }]);
    const consumer = await newBrain({ encryption: 'standard' });
    const mount = await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: pack.packId, mode: 'materialize', scope_map: { '/': '/shared' } });
    await pollUntil(async () => (await ok('GET', `/v1/brains/${consumer}/mounts`)).data[0], (found: { status: string }) => found.status === 'ready', { timeoutMs: 60_000 });
    const [hit] = await recall(consumer, { query: 'Where do orders ship from?', scope: '/shared/docs', explain: true });
    expect(hit).toMatchObject({ scope: '/shared/docs', content: SHIPPING, source: { store: 'pack', pack_id: pack.packId, version: 1, mount_id: mount.id, entry_id: 'shipping' }, factors: { recency: 1, usage: 1 } });

    await ok('DELETE', `/v1/brains/${consumer}/mounts/${mount.id}`);
    expect(await recall(consumer, { query: 'Where do orders ship from?', scope: '/shared/docs' })).toEqual([]);
  });
});

describe("a pack row's graph factor", () => {
  const QUERY = 'when is the budget review with Dana';

  for (const { mode, encryption } of [{ mode: 'reference', encryption: 'none' }, { mode: 'materialize', encryption: 'strict' }] as const) {
    it(`${mode} into a ${encryption} brain: from the version's entity graph (named 1, neighbour 0.9, the rest 0.8), with the frozen weights`, async () => {
      const source = await newBrain({ memory_policy: { type_taxonomy: [{ type: 'fact', tier: 'B', weight: 0.7 }] } });
      await write(source, { entry_id: 'unrelated', body: 'The budget review is on Friday.' });
      await write(source, { entry_id: 'named', body: "Dana's budget review notes are shared." });
      await write(source, { entry_id: 'neighbour', class: 'memory', type: 'fact', body: 'Acme budget review.' });
      await linkEntities(gateway.platform.db, source, '/', 'named', [{ name: 'Dana' }, { name: 'Acme Corp', aliases: ['Acme'] }], [{ from: 'Dana', relation: 'works at', to: 'Acme' }]);
      await linkEntities(gateway.platform.db, source, '/', 'neighbour', [{ name: 'Acme' }], []);
      const published = await ok('POST', `/v1/brains/${source}/publish`, {});

      const consumer = await newBrain({ encryption });
      // A consumer memory of the same type, at another scope (no twin): it keeps the consumer's weight and its own recency and usage.
      await write(consumer, { entry_id: 'own', scope: '/mine', class: 'memory', type: 'fact', body: 'Acme budget review minutes.' });
      await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: published.pack_id, mode });
      await pollUntil(async () => (await ok('GET', `/v1/brains/${consumer}/mounts`)).data[0], (found: { status: string }) => found.status === 'ready', { timeoutMs: 60_000 });

      const hits = await recall(consumer, { query: QUERY, scope: '/', subtree: true, explain: true, top_k: 10 });
      const factors = Object.fromEntries(hits.map((hit) => [hit.source.entry_id, hit.factors!]));
      expect(Object.fromEntries(Object.entries(factors).map(([id, f]) => [id, f.graph]))).toEqual({ named: 1, neighbour: 0.9, unrelated: 0.8, own: 0.8 });
      expect(factors.neighbour).toMatchObject({ tier_weight: 0.7, recency: 1, usage: 1 });
      expect(factors.own!.tier_weight).toBe(0.9);
      expect(factors.own!.usage).toBe(0.75);
      for (const f of Object.values(factors)) expect(f.score).toBeCloseTo(f.cosine * f.tier_weight * f.recency * f.usage * f.graph, 5);
      expect(hits.map((hit) => hit.score)).toEqual([...hits.map((hit) => hit.score)].sort((a, b) => b - a));

      // A query naming no entity of either graph leaves every factor at 1.
      const plain = await recall(consumer, { query: 'when is the budget review', scope: '/', subtree: true, explain: true, top_k: 10 });
      expect(plain.map((hit) => hit.factors!.graph)).toEqual(plain.map(() => 1));
    });
  }
});

describe('without packs', () => {
  it('recall reads no mount while SVC_BRAIN_PACKS_ENABLED is off', async () => {
    const pack = await packOf([{ entry_id: 'shipping', body: SHIPPING }]);
    const consumer = await newBrain();
    await ok('POST', `/v1/brains/${consumer}/mounts`, { pack_id: pack.packId });
    expect(await mountsForRecall(gateway.platform, consumer)).toHaveLength(1);
    expect(await mountsForRecall({ db: gateway.platform.db, config: { ...gateway.platform.config, SVC_BRAIN_PACKS_ENABLED: false } }, consumer)).toEqual([]);
  });
});

describe('scope maps', () => {
  it('remap by the longest covering prefix, and nothing no key covers', () => {
    const map = { '/': '/all', '/docs': '/kb', '/docs/api': '/reference' };
    expect(remapScope(map, '/docs/api/v2')).toBe('/reference/v2');
    expect(remapScope(map, '/docs/guides')).toBe('/kb/guides');
    expect(remapScope(map, '/docs')).toBe('/kb');
    expect(remapScope(map, '/')).toBe('/all');
    expect(remapScope(map, '/misc')).toBe('/all/misc');
    expect(remapScope({ '/docs': '/' }, '/docs/api')).toBe('/api');
    expect(remapScope({ '/docs': '/kb' }, '/documents')).toBeNull();
  });

  it("name the source scopes a recall's scopes can draw from", () => {
    expect(sourceScopesFor({ '/docs': '/kb' }, { scopes: ['/kb/api'], subtreeOf: null })).toEqual({ scopes: ['/docs/api'], prefixes: [] });
    expect(sourceScopesFor({ '/docs': '/kb' }, { scopes: ['/kb'], subtreeOf: '/kb' })).toEqual({ scopes: ['/docs'], prefixes: ['/docs'] });
    // A recall above the target reads the whole source subtree.
    expect(sourceScopesFor({ '/docs': '/kb/shared' }, { scopes: ['/kb'], subtreeOf: '/kb' })).toEqual({ scopes: ['/docs'], prefixes: ['/docs'] });
    expect(sourceScopesFor({ '/': '/' }, { scopes: ['/'], subtreeOf: '/' })).toBeNull();
  });
});
