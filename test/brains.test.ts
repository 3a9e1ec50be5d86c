import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countUses } from '../shared/brains/learning-repository.js';
import { RowCache, type OwnerSource } from '../shared/brains/row-cache.js';
import { nextDraw } from '../shared/brains/recall.js';
import { BRAIN_HNSW, currentVersionPages, partitionOf, SMALL_SPACE, VectorLiteral, versionsByIds, versionsUsedSince, type RankedVersion } from '../shared/brains/repository.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Brains (spec 2) end to end against the real services and the emulator's embeddings (which rank
 * related text first): brains, entries and their versions, recall's composite ranking, scopes,
 * explain and misses, as_of, sealing, the flag, and cross-tenant 404s.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let other: TestDeveloper;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000));
  other = await createDeveloper(gateway.platform, { creditMicros: 5_000_000, scopes: ['admin'] });
  workers = await startInProcessWorkers(gateway.platform);
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const as = (key: string, headers: Record<string, string> = {}) => ({ ...bearer(key), ...headers });
const send = (method: string, path: string, json?: unknown, headers: Record<string, string> = as(developer.key)) => call(gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers });
const post = (path: string, json: unknown, headers?: Record<string, string>) => send('POST', path, json, headers);
const put = (path: string, json: unknown, headers?: Record<string, string>) => send('PUT', path, json, headers);
const patch = (path: string, json: unknown, headers?: Record<string, string>) => send('PATCH', path, json, headers);
const get = (path: string, headers?: Record<string, string>) => send('GET', path, undefined, headers);
const del = (path: string, headers?: Record<string, string>) => send('DELETE', path, undefined, headers);

async function newBrain(body: Record<string, unknown> = {}) {
  const created = await post('/v1/brains', { name: `brain ${Math.random()}`, ...body });
  expect(created.status).toBe(200);
  return created.body as { id: string; encryption: string; memory_policy: any; embedding_model: string; embedding_dims: number };
}

async function write(brainId: string, entry: Record<string, unknown>, headers?: Record<string, string>) {
  const written = await put(`/v1/brains/${brainId}/entries`, entry, headers);
  expect(written.status, JSON.stringify(written.body)).toBe(200);
  return written.body as { entry_id: string; chunks: number; scope: string };
}

const recall = (brainId: string, body: Record<string, unknown>) => post(`/v1/brains/${brainId}/recall`, body);

describe('brains', () => {
  it('creates with defaults merged under a partial policy, lists, reads, renames and deletes', async () => {
    const brain = await newBrain({ embedding_model: 'openai/text-embedding-3-small', memory_policy: { consolidate_at: 20, chunking: { strategy: 'paragraph', max_chars: 500 } } });
    expect(brain).toMatchObject({ object: 'brain', embedding_model: 'openai/text-embedding-3-small', embedding_dims: 1536, encryption: 'none', tuning: 'auto', autotune_frozen: false });
    expect(brain.memory_policy).toMatchObject({ consolidate_at: 20, prune_grace_days: 45, decay_anchor: 'last_used', on_unfunded: 'fallback', chunking: { strategy: 'paragraph', max_chars: 500 } });
    expect(brain.memory_policy.type_taxonomy.length).toBeGreaterThan(3);
    const bare = await newBrain({ embedding_model: 'text-embedding-3-large' });
    expect(bare).toMatchObject({ embedding_model: 'openai/text-embedding-3-large', embedding_dims: 3072 });

    const listed = (await get('/v1/brains?limit=1')).body;
    expect(listed).toMatchObject({ object: 'list', has_more: true, limit: 1, offset: 0 });
    expect((await get(`/v1/brains/${brain.id}`)).body.id).toBe(brain.id);
    expect((await patch(`/v1/brains/${brain.id}`, { name: 'renamed' })).body.name).toBe('renamed');

    expect((await del(`/v1/brains/${bare.id}`)).body).toEqual({ id: bare.id, object: 'brain.deleted', deleted: true });
    expectError(await get(`/v1/brains/${bare.id}`), 404, 'not_found');
    // The workflow drops its content: the partition goes, then the row.
    await pollUntil(() => gateway.platform.db.query(`SELECT 1 FROM brains WHERE id = $1`, [bare.id]), (result) => result.rows.length === 0, { timeoutMs: 30_000 });
    const partition = await gateway.platform.db.query(`SELECT to_regclass($1) AS t`, [partitionOf(bare.id)]);
    expect(partition.rows[0].t).toBeNull();
  });

  it('refuses bad input with the spec codes, and another tenant sees 404', async () => {
    expectError(await post('/v1/brains', { name: 'x', encryption: 'paranoid' }), 400, 'invalid_encryption');
    expectError(await post('/v1/brains', { name: 'x', embedding_model: 'gpt-4o' }), 400, 'invalid_embedding_model');
    expectError(await post('/v1/brains', {}), 400, 'invalid_request');
    const brain = await newBrain();
    expectError(await get(`/v1/brains/${brain.id}`, as(other.key)), 404, 'not_found');
    expectError(await recall(brain.id, { query: 'x' }).then(() => post(`/v1/brains/${brain.id}/recall`, { query: 'x' }, as(other.key))), 404, 'not_found');
    expectError(await put(`/v1/brains/${brain.id}/entries`, { body: 'x' }, as(other.key)), 404, 'not_found');
    expectError(await put(`/v1/brains/${brain.id}/entries`, { body: 'x', scope: 'no-slash' }), 400, 'invalid_brain_scope');
    expectError(await put(`/v1/brains/${brain.id}/entries`, { body: 'x', class: 'memory', type: 'gossip' }), 400, 'invalid_request', { param: 'type' });
    await write(brain.id, { body: 'now it holds something' });
    expectError(await patch(`/v1/brains/${brain.id}`, { encryption: 'standard' }), 409, 'brain_not_empty');
  });

  it('emits brain.policy.changed with the entries and types a policy change re-ranks', async () => {
    const brain = await newBrain();
    await write(brain.id, { class: 'memory', type: 'observation', body: 'The build takes nine minutes.' });
    await write(brain.id, { class: 'memory', type: 'fact', body: 'The API is written in TypeScript.' });
    const taxonomy = brain.memory_policy.type_taxonomy.map((entry: { type: string; weight: number }) => (entry.type === 'observation' ? { ...entry, weight: 0.2 } : entry));
    expect((await patch(`/v1/brains/${brain.id}`, { memory_policy: { type_taxonomy: taxonomy } })).status).toBe(200);
    const events = await gateway.platform.db.query(`SELECT data AS payload FROM outbox_events WHERE type = 'brain.policy.changed' AND data->>'id' = $1`, [brain.id]);
    expect(events.rows.map((row) => row.payload)).toEqual([expect.objectContaining({ affected_entries: 1, changed_types: ['observation'] })]);
  });
});

describe('entries', () => {
  it('chunks reference entries by paragraph, keeps memories whole, lists newest first and deletes', async () => {
    const brain = await newBrain({ memory_policy: { chunking: { strategy: 'paragraph', max_chars: 300 } } });
    const paragraphs = Array.from({ length: 6 }, (_, i) => `Paragraph ${i} about the deployment pipeline. `.repeat(4));
    const reference = await write(brain.id, { title: 'Deploy guide', body: paragraphs.join('\n\n'), scope: '/ops' });
    expect(reference.chunks).toBeGreaterThan(2);
    const memory = await write(brain.id, { class: 'memory', type: 'decision', body: 'We deploy on Tuesdays only.\n\nNever on Fridays.', scope: '/ops' });
    expect(memory.chunks).toBe(1);
    const listed = (await get(`/v1/brains/${brain.id}/entries?scope=/ops`)).body;
    expect(listed.data.map((entry: { entry_id: string }) => entry.entry_id)).toEqual([memory.entry_id, reference.entry_id]);
    expect((await get(`/v1/brains/${brain.id}/entries?class=memory`)).body.data).toHaveLength(1);
    const one = (await get(`/v1/brains/${brain.id}/entries/${reference.entry_id}`)).body;
    expect(one).toMatchObject({ title: 'Deploy guide', class: 'reference', scope: '/ops', use_count: 0, origin: 'native' });
    expect((await del(`/v1/brains/${brain.id}/entries/${memory.entry_id}`)).body).toMatchObject({ object: 'brain.entry.deleted', deleted: true });
    expectError(await get(`/v1/brains/${brain.id}/entries/${memory.entry_id}`), 404, 'not_found');
  });

  it('replaces in place by entry_id, and PATCH re-embeds only for title, body or class', async () => {
    const brain = await newBrain();
    const first = await write(brain.id, { entry_id: 'runbook-1', body: 'Restart the queue worker when it stalls.' });
    expect(first.entry_id).toBe('runbook-1');
    await write(brain.id, { entry_id: 'runbook-1', body: 'Restart the queue worker when it stalls, then check the dead letters.' });
    expect((await get(`/v1/brains/${brain.id}/entries`)).body.data).toHaveLength(1);

    const moved = await patch(`/v1/brains/${brain.id}/entries/runbook-1`, { scope: '/ops/queues' });
    expect(moved.body).toMatchObject({ scope: '/ops/queues', reindexed: false, chunks: 1, body: 'Restart the queue worker when it stalls, then check the dead letters.' });
    const rewritten = await patch(`/v1/brains/${brain.id}/entries/runbook-1`, { body: 'Drain the queue before restarting the worker.' });
    expect(rewritten.body).toMatchObject({ reindexed: true, scope: '/ops/queues' });
    const hits = (await recall(brain.id, { query: 'drain the queue before restarting', scope: '/ops/queues' })).body.data;
    expect(hits[0]).toMatchObject({ entry_id: 'runbook-1', content: 'Drain the queue before restarting the worker.' });
  });

  it('keeps entries that came with a pack read-only: 409 entry_read_only on PATCH, DELETE and PUT over them', async () => {
    const brain = await newBrain();
    await write(brain.id, { entry_id: 'from-pack', body: 'A pack says the office opens at nine.' });
    // Packs arrive with a later issue; the row is marked as a mounted pack's would be.
    await gateway.platform.db.query(`UPDATE brain_entries SET origin = 'reference' WHERE brain_id = $1 AND entry_id = 'from-pack'`, [brain.id]);
    expectError(await patch(`/v1/brains/${brain.id}/entries/from-pack`, { body: 'Changed.' }), 409, 'entry_read_only');
    expectError(await del(`/v1/brains/${brain.id}/entries/from-pack`), 409, 'entry_read_only');
    expectError(await put(`/v1/brains/${brain.id}/entries`, { entry_id: 'from-pack', body: 'Replaced.' }), 409, 'entry_read_only');
    expect((await get(`/v1/brains/${brain.id}/entries/from-pack`)).body).toMatchObject({ origin: 'reference', body: 'A pack says the office opens at nine.' });
  });

  it('replays an Idempotency-Key with the same body and refuses it with another', async () => {
    const brain = await newBrain();
    const headers = as(developer.key, { 'Idempotency-Key': `entry-${brain.id}` });
    const first = await put(`/v1/brains/${brain.id}/entries`, { body: 'Idempotent memory.' }, headers);
    const again = await put(`/v1/brains/${brain.id}/entries`, { body: 'Idempotent memory.' }, headers);
    expect(again.body.entry_id).toBe(first.body.entry_id);
    expect((await get(`/v1/brains/${brain.id}/entries`)).body.data).toHaveLength(1);
    expectError(await put(`/v1/brains/${brain.id}/entries`, { body: 'Something else.' }, headers), 409, 'idempotency_key_reuse');
  });

  it('refuses a body over 100 MB with 413 entry_too_large, and writes nothing', async () => {
    const brain = await newBrain();
    const over = 'a'.repeat(100 * 1024 * 1024 + 1);
    expectError(await put(`/v1/brains/${brain.id}/entries`, { body: over }), 413, 'entry_too_large', { param: 'body' });
    // Past the JSON parser's own limit the answer is the same.
    const res = await call(gateway.baseUrl, `/v1/brains/${brain.id}/entries`, {
      method: 'PUT',
      body: `{"body": "${'b'.repeat(129 * 1024 * 1024)}"}`,
      headers: { ...as(developer.key), 'content-type': 'application/json' },
    });
    expectError(res, 413, 'entry_too_large');
    expect((await get(`/v1/brains/${brain.id}/entries`)).body.data).toEqual([]);
    // Two bodies of over 100 MB cross loopback and the JSON parser: seconds alone, more beside the rest of the suite.
  }, 120_000);

  it('lists scopes at or below a scope with their entry counts', async () => {
    const brain = await newBrain();
    for (const scope of ['/', '/team', '/team/api', '/team/api', '/team/web', '/other']) await write(brain.id, { body: `note in ${scope}`, scope });
    const listed = (await get(`/v1/brains/${brain.id}/scopes?scope=/team`)).body;
    expect(listed.data.map((row: { scope: string; entries: number }) => [row.scope, row.entries])).toEqual([['/team', 1], ['/team/api', 2], ['/team/web', 1]]);
    expectError(await get(`/v1/brains/${brain.id}/scopes`), 400, 'invalid_brain_scope');
  });
});

describe('recall', () => {
  let brainId: string;
  beforeAll(async () => {
    const brain = await newBrain();
    brainId = brain.id;
    await write(brainId, { entry_id: 'pw', body: 'To reset your password open settings and choose reset password.', scope: '/' });
    await write(brainId, { entry_id: 'billing', body: 'Invoices are sent on the first day of every month.', scope: '/' });
    await write(brainId, { entry_id: 'team-pw', class: 'memory', type: 'decision', body: 'The team decided password resets need a second factor.', scope: '/team' });
    await write(brainId, { entry_id: 'deep-pw', class: 'memory', type: 'status', body: 'Password reset emails are delayed today.', scope: '/team/support' });
    await write(brainId, { entry_id: 'policy', class: 'policy', body: 'Never reveal a password in a reply.', scope: '/' });
  });

  const ids = (hits: { entry_id: string }[]) => hits.map((hit) => hit.entry_id);

  const CREDENTIALS_QUESTION = 'How often are the database credentials rotated?';
  const byTeam = (i: number) => `Asked again by team ${i % 30}, ticket ${i}.`;
  /** A brain of `count` near copies of the question (memories of type echo, `asked` telling them apart) and one answer further off (`answer`'s class and type), written 20 at a time. */
  async function echoBrain(taxonomy: object[], count: number, asked: (i: number) => string, answer: { class?: string; type?: string }) {
    const brain = await newBrain({ memory_policy: { type_taxonomy: taxonomy } });
    const entries = [
      ...Array.from({ length: count }, (_, i) => ({ entry_id: `echo${i}`, class: 'memory', type: 'echo', body: `${CREDENTIALS_QUESTION} ${asked(i)}` })),
      { entry_id: 'answer', ...answer, body: 'The platform team rotates database credentials every ninety days.' },
    ];
    for (let at = 0; at < entries.length; at += 20) await Promise.all(entries.slice(at, at + 20).map((entry) => write(brain.id, entry)));
    return brain;
  }

  it('ranks the related entry first with a composite score in [0, 1], and never changes use_count', async () => {
    const res = await recall(brainId, { query: 'how do I reset my password', explain: true });
    expect(res.status).toBe(200);
    expect(res.body.data[0].entry_id).toBe('pw');
    for (const hit of res.body.data) {
      expect(hit.score).toBeGreaterThan(0);
      expect(hit.score).toBeLessThanOrEqual(1);
      const f = hit.factors;
      expect(f.score).toBeCloseTo(f.cosine * f.tier_weight * f.recency * f.usage * f.graph, 5);
      expect(hit.source).toMatchObject({ store: 'native', entry_id: hit.entry_id });
    }
    const entry = (await get(`/v1/brains/${brainId}/entries/pw`)).body;
    expect(entry).toMatchObject({ use_count: 0, last_used: null });
  });

  it("bills each recall's query embedding, to the customer Svc-Customer names", async () => {
    const customer = (await post('/v1/customers', { external_id: 'brain-recall-payer' })).body;
    expect((await post('/v1/customers/ext:brain-recall-payer/wallet/topup', { amount_usd: 5 })).status).toBe(200);
    const headers = as(developer.key, { 'Svc-Customer': 'brain-recall-payer' });
    for (let i = 0; i < 2; i++) expect((await post(`/v1/brains/${brainId}/recall`, { query: 'password reset' }, headers)).status).toBe(200);
    // A request's recall is metered as any call is: its record may follow the answer.
    const charged = await pollUntil(
      async () => (await gateway.platform.db.query(`SELECT count(*)::int AS n FROM usage_records WHERE customer_id = $1 AND model LIKE '%embedding%'`, [customer.id])).rows[0].n,
      (n: number) => n >= 2,
      { context: () => "usage of the customer's recalls" },
    );
    expect(charged).toBe(2);
    expect((await get('/v1/customers/ext:brain-recall-payer/wallet')).body.balance_usd).toBeLessThan(5);
  });

  it("answers a recall once its query embedding's charge is recorded, though the charge is recorded while the candidates are searched", async () => {
    // A payer calling this slowly has no quota grant: its call is reserved and settled in PostgreSQL, call by call.
    expect(gateway.platform.grants.servingFor(developer.accountId)).toBe(0);
    const recalled = await post(`/v1/brains/${brainId}/recall`, { query: 'password reset' });
    expect(recalled.status).toBe(200);
    const { rows } = await gateway.platform.db.query(`SELECT model, cost_micros FROM usage_records WHERE request_id = $1`, [recalled.headers.get('x-request-id')]);
    expect(rows).toHaveLength(1);
    expect(rows[0].model).toContain('embedding');
  });

  it('inlines a query vector into a search as PostgreSQL reads it', async () => {
    // Each exact in single precision, one written with an exponent (-9.5367431640625e-7).
    const vector = [0.25, -(2 ** -20), 3, 0, -0.125];
    const literal = new VectorLiteral(vector);
    const { rows } = await gateway.platform.db.query(`SELECT (${literal.sql}::vector)::real[]::float8[] AS values`);
    expect(rows[0].values).toEqual(vector);
  });

  for (const encryption of ['none', 'strict'] as const) {
    it(`ranks by a use counted after the brain was recalled, catching up on what moved (${encryption})`, async () => {
      const brain = await newBrain({ encryption });
      await write(brain.id, { entry_id: 'rotation', class: 'memory', type: 'fact', body: 'Database credentials rotate every ninety days.' });
      await write(brain.id, { entry_id: 'runbook', class: 'reference', body: 'Rotate credentials with the vault rotate command, then restart the workers.' });
      const question = { query: 'how often do database credentials rotate', explain: true };
      const usage = async () => Object.fromEntries((await recall(brain.id, question)).body.data.map((hit: { entry_id: string; factors: { usage: number } }) => [hit.entry_id, hit.factors.usage]));
      const before = await usage();
      expect(gateway.platform.rankedVersions.keptFor(brain.id)).toBe(2);
      const wholeReads = gateway.platform.strictBrains.wholeReads(brain.id);
      // As a learn pass counts the memories an answer used.
      await countUses(gateway.platform.db, brain.id, ['rotation']);
      const after = await usage();
      expect(after.rotation).toBeGreaterThan(before.rotation);
      expect(after.runbook).toBe(before.runbook);
      // Neither the kept versions nor a strict brain's opened rows were read whole again.
      expect([gateway.platform.rankedVersions.keptFor(brain.id), gateway.platform.strictBrains.wholeReads(brain.id)]).toEqual([2, wholeReads]);
    });
  }

  it("keeps candidates' ranked versions per brain: read once a usage_seq, never added to by an older read, bounded by rows", async () => {
    const brain = await newBrain();
    const other = await newBrain();
    for (const [target, id] of [[brain.id, 'a'], [brain.id, 'b'], [brain.id, 'c'], [other.id, 'x'], [other.id, 'y']]) await write(target!, { entry_id: id, body: `Entry ${id} of the cache test.` });
    const db = gateway.platform.db;
    const versionsOf = async (brainId: string) => (await db.query<{ version_id: string }>(`SELECT version_id FROM brain_entries WHERE brain_id = $1 ORDER BY entry_id`, [brainId])).rows.map((row) => String(row.version_id));
    const [mine, theirs] = [await versionsOf(brain.id), await versionsOf(other.id)];
    const asked: string[][] = [];
    const fetch = (missing: string[]) => (asked.push(missing), versionsByIds(db, missing));

    const cache = new RowCache<RankedVersion>(4);
    const first = await cache.read(brain.id, 1, mine.slice(0, 2), fetch);
    expect([...first.keys()].sort()).toEqual(mine.slice(0, 2).sort());
    expect(first.get(mine[0]!)).toMatchObject({ entry_id: 'a', use_count: 0 });
    const again = await cache.read(brain.id, 1, mine.slice(0, 2), fetch);
    expect([asked.length, again.get(mine[1]!)?.entry_id]).toEqual([1, 'b']);
    // Only what is not kept yet is read.
    expect((await cache.read(brain.id, 1, mine, fetch)).size).toBe(3);
    expect([asked.at(-1), cache.keptFor(brain.id)]).toEqual([[mine[2]], 3]);

    // A newer stamp starts the brain over; a read that began under an older one neither uses nor fills it.
    await cache.read(brain.id, 2, mine.slice(0, 1), fetch);
    expect([asked.length, cache.keptFor(brain.id)]).toEqual([3, 1]);
    await cache.read(brain.id, 1, mine, fetch);
    expect([asked.at(-1), cache.keptFor(brain.id)]).toEqual([mine, 1]);

    // Past 4 rows the brain read least recently goes whole; a brain alone over the budget starts over.
    await cache.read(other.id, 1, theirs, fetch);
    await cache.read(brain.id, 2, mine, fetch);
    expect([cache.keptFor(brain.id), cache.keptFor(other.id)]).toEqual([3, 0]);
    const tiny = new RowCache<RankedVersion>(2);
    expect((await tiny.read(brain.id, 1, mine, fetch)).size).toBe(3);
    expect(tiny.keptFor(brain.id)).toBe(0);
  });

  it("keeps a brain's ranked versions whole once it is recalled, beyond the recall's candidates", async () => {
    const brain = await newBrain();
    await write(brain.id, { entry_id: 'leaf', scope: '/team/a', body: 'Deploys freeze on Fridays.' });
    for (const id of ['other1', 'other2']) await write(brain.id, { entry_id: id, scope: '/elsewhere', body: `Entry ${id} in another scope.` });
    // Only /team/a is searched, so only its entry is a candidate; the fill keeps the other scope's too.
    expect(ids((await recall(brain.id, { query: 'when do deploys freeze', scope: '/team/a', inherit: false })).body.data)).toEqual(['leaf']);
    await gateway.platform.rankedVersions.filled(brain.id);
    expect(gateway.platform.rankedVersions.keptFor(brain.id)).toBe(3);
    // A version written after the fill is read by id as recall meets it.
    await write(brain.id, { entry_id: 'late', scope: '/team/a', body: 'Deploys also freeze during the holidays.' });
    expect(ids((await recall(brain.id, { query: 'when do deploys freeze', scope: '/team/a', inherit: false })).body.data).sort()).toEqual(['late', 'leaf']);
    expect(gateway.platform.rankedVersions.keptFor(brain.id)).toBe(4);
    // A use counted is ranked by from the next recall on, caught up on without reading the brain again.
    const question = { query: 'when do deploys freeze', scope: '/team/a', inherit: false, explain: true };
    const before = (await recall(brain.id, question)).body.data.find((hit: { entry_id: string }) => hit.entry_id === 'leaf');
    await countUses(gateway.platform.db, brain.id, ['leaf']);
    const after = (await recall(brain.id, question)).body.data.find((hit: { entry_id: string }) => hit.entry_id === 'leaf');
    expect(after.factors.usage).toBeGreaterThan(before.factors.usage);
    expect(gateway.platform.rankedVersions.keptFor(brain.id)).toBe(4);
  });

  it('keeps an owner whole page by page up to half its budget, once; a newer stamp catches up on what changed, and a failed fill or catch-up recovers', async () => {
    const brain = await newBrain();
    for (const id of ['a', 'b', 'c']) await write(brain.id, { entry_id: id, body: `Entry ${id} of the fill test.` });
    const db = gateway.platform.db;
    const versions = (await db.query<{ version_id: string }>(`SELECT version_id FROM brain_entries WHERE brain_id = $1 ORDER BY entry_id`, [brain.id])).rows.map((row) => String(row.version_id));
    const usageSeq = async () => (await db.query<{ usage_seq: string }>(`SELECT usage_seq FROM brains WHERE id = $1`, [brain.id])).rows[0]!.usage_seq;
    const failures: unknown[] = [];
    const failed = (error: unknown) => void failures.push(error);
    const pagesRead: number[] = [];
    const caughtUpFrom: bigint[] = [];
    const source: OwnerSource<RankedVersion> = {
      pages: (most) => (async function* () {
        for await (const page of currentVersionPages(db, brain.id, most, 2)) yield (pagesRead.push(page.size), page);
      })(),
      changedSince: (since) => (caughtUpFrom.push(since), versionsUsedSince(db, brain.id, since)),
    };
    const asked: string[][] = [];
    const fetch = (missing: string[]) => (asked.push(missing), versionsByIds(db, missing));
    const settle = async (cache: RowCache<RankedVersion>) => {
      await new Promise((resolve) => setImmediate(resolve));
      await cache.filled(brain.id);
    };

    const cache = new RowCache<RankedVersion>(8);
    const first = await usageSeq();
    cache.keepWhole(brain.id, first, source, failed);
    cache.keepWhole(brain.id, first, source, failed);
    await settle(cache);
    expect([pagesRead, cache.keptFor(brain.id)]).toEqual([[2, 1], 3]);
    expect((await cache.read(brain.id, first, versions, fetch, source)).get(versions[1]!)).toMatchObject({ entry_id: 'b', use_count: 0 });
    expect(asked).toEqual([]);

    // A use counted moves the stamp: the next read reads what changed since (b), nothing by id, and fills nothing again.
    await countUses(db, brain.id, ['b']);
    const second = await usageSeq();
    const caughtUp = await cache.read(brain.id, second, versions, fetch, source);
    expect([caughtUp.get(versions[1]!)?.use_count, caughtUp.get(versions[0]!)?.use_count]).toEqual([1, 0]);
    expect([asked, caughtUpFrom, pagesRead, cache.keptFor(brain.id)]).toEqual([[], [BigInt(first)], [2, 1], 3]);
    cache.keepWhole(brain.id, second, source, failed);
    await settle(cache);
    expect(pagesRead).toEqual([2, 1]);
    // A read under the older stamp reads by id and leaves what is kept.
    expect((await cache.read(brain.id, first, versions.slice(0, 1), fetch, source)).size).toBe(1);
    expect([asked, (await cache.read(brain.id, second, versions, fetch, source)).get(versions[1]!)?.use_count]).toEqual([[versions.slice(0, 1)], 1]);
    // Without a source, a newer stamp starts the owner over.
    await cache.read(brain.id, String(BigInt(second) + 1n), versions.slice(0, 1), fetch);
    expect(cache.keptFor(brain.id)).toBe(1);

    // At most half the budget, in entry order.
    const small = new RowCache<RankedVersion>(4);
    small.keepWhole(brain.id, second, source, failed);
    await settle(small);
    expect(small.keptFor(brain.id)).toBe(2);

    // A failed fill is reported once and tried again by the next call.
    const flaky = new RowCache<RankedVersion>(8);
    let tries = 0;
    const failingOnce: OwnerSource<RankedVersion> = {
      ...source,
      pages: (most) => (async function* () {
        if ((tries += 1) === 1) throw new Error('connection lost');
        yield* currentVersionPages(db, brain.id, most);
      })(),
    };
    flaky.keepWhole(brain.id, second, failingOnce, failed);
    await settle(flaky);
    expect([failures.length, String(failures[0]), flaky.keptFor(brain.id)]).toEqual([1, 'Error: connection lost', 0]);
    flaky.keepWhole(brain.id, second, failingOnce, failed);
    await settle(flaky);
    expect([tries, failures.length, flaky.keptFor(brain.id)]).toEqual([2, 1, 3]);
    // A catch-up that fails cannot know what changed: the owner starts over under the newer stamp.
    const unknowable: OwnerSource<RankedVersion> = { ...source, changedSince: () => Promise.reject(new Error('connection lost')) };
    await flaky.read(brain.id, String(BigInt(second) + 1n), versions.slice(0, 2), fetch, unknowable);
    expect(flaky.keptFor(brain.id)).toBe(2);
  });

  it("decays a memory by its anchor's age: a status (tier D, three-day half-life) last touched six days ago keeps a quarter", async () => {
    const brain = await newBrain();
    await write(brain.id, { entry_id: 'outage', class: 'memory', type: 'status', body: 'The password reset service is down for maintenance.' });
    await gateway.platform.db.query(`UPDATE brain_entries SET created_at = now() - interval '6 days', updated_at = now() - interval '6 days' WHERE brain_id = $1`, [brain.id]);
    const [hit] = (await recall(brain.id, { query: 'is password reset down', explain: true })).body.data;
    expect(hit).toMatchObject({ entry_id: 'outage', factors: { tier_weight: 0.6, usage: 0.75 } });
    expect(hit.factors.recency).toBeCloseTo(0.25, 4);
  });

  it('recalls through the HNSW graph, with each vector kept whole in its chunk row', async () => {
    const brain = await newBrain();
    await write(brain.id, { entry_id: 'pw', body: 'To reset your password open settings and choose reset password.' });
    await write(brain.id, { entry_id: 'billing', body: 'Invoices are sent on the first day of every month.' });
    const db = gateway.platform.db;
    const { indexname } = (await db.query(`SELECT indexname FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%hnsw%'`, [partitionOf(brain.id)])).rows[0];
    const scans = async () => Number((await db.query(`SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = $1`, [indexname])).rows[0]?.idx_scan ?? 0);
    const before = await scans();
    expect(ids((await recall(brain.id, { query: 'how do I reset my password', top_k: 1 })).body.data)).toEqual(['pw']);
    await pollUntil(scans, (after) => after > before, { context: () => `a scan of ${indexname}` });
    const storage = await db.query(`SELECT attstorage FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'embedding'`, [partitionOf(brain.id)]);
    expect(storage.rows[0].attstorage).toBe('m');
    // The emulator's sparse vectors compress; stored whole, a search opens none of them.
    const compression = await db.query(`SELECT pg_column_compression(embedding) AS method FROM ${partitionOf(brain.id)}`);
    expect(compression.rows).toEqual([{ method: null }, { method: null }]);
  }, 60_000);

  it("draws the rest of the search's beam before walking the graph on, then doubles", () => {
    const schedule = (first: number, beam: number) => [first, nextDraw(first, beam), nextDraw(nextDraw(first, beam), beam)];
    expect(schedule(BRAIN_HNSW.firstDraw, BRAIN_HNSW.efSearch)).toEqual([256, 400, 800]);
    expect(schedule(SMALL_SPACE.firstDraw, SMALL_SPACE.beam)).toEqual([64, 100, 200]);
  });

  it('draws past the first batch of nearest chunks when the best composite lies deeper', async () => {
    // 300 near copies of the question at a weight of 0.02 fill the first draw (256) with composites
    // far below the answer's, which sits only just past them by cosine.
    const taxonomy = [{ type: 'echo', tier: 'C', weight: 0.02 }, { type: 'decision', tier: 'A', weight: 1 }];
    const brain = await echoBrain(taxonomy, 300, (i) => `Asked again, time ${i}.`, { class: 'memory', type: 'decision' });
    // Statistics make it a small space, searched with the narrow beam and a first draw of 64 (else autovacuum decides when).
    await gateway.platform.db.query(`ANALYZE ${partitionOf(brain.id)}`);

    const found = (await recall(brain.id, { query: CREDENTIALS_QUESTION, explain: true })).body.data;
    expect(found[0].entry_id).toBe('answer');
    expect(found).toHaveLength(8);
    const cosines = (await recall(brain.id, { query: CREDENTIALS_QUESTION, top_k: 100, explain: true, types: ['echo'] })).body.data.map((hit: any) => hit.factors.cosine);
    // The premise: every echo is nearer the question than the answer is.
    expect(Math.min(...cosines)).toBeGreaterThan(found[0].factors.cosine);
  }, 60_000);

  it('stops drawing by the highest weight a row can have, and still finds an answer that weight lets through', async () => {
    // Used near copies of the question at a tuned weight of 0.014 fill the first draw (64 rows, their
    // cosines falling from 0.67 to 0.57). The answer is a reference (tier A, tuned to 0.8): a ceiling
    // taken from the memory types alone (0.014) would let the first draw's 8th place end the search
    // (0.633 x 0.014 beats the 64th's 0.618 x 0.014) before reaching it.
    const brain = await echoBrain([{ type: 'echo', tier: 'C', weight: 0.02 }], 150, byTeam, {});
    const db = gateway.platform.db;
    await db.query(`UPDATE brains SET tier_multipliers = '{"A": 0.8, "C": 0.7}' WHERE id = $1`, [brain.id]);
    await db.query(`UPDATE brain_entries SET use_count = 100000 WHERE brain_id = $1 AND type = 'echo'`, [brain.id]);
    await db.query(`ANALYZE ${partitionOf(brain.id)}`);

    const found = (await recall(brain.id, { query: CREDENTIALS_QUESTION, explain: true })).body.data;
    expect(found[0]).toMatchObject({ entry_id: 'answer', factors: { tier_weight: 0.8 } });
    expect(found).toHaveLength(8);
    const echoes = (await recall(brain.id, { query: CREDENTIALS_QUESTION, top_k: 100, explain: true, types: ['echo'] })).body.data;
    // The premise: every echo is nearer the question than the answer is.
    expect(Math.min(...echoes.map((hit: any) => hit.factors.cosine))).toBeGreaterThan(found[0].factors.cosine);
  });

  it('draws on while fewer rows than top_k pass the filters: an open place takes any row that scores', async () => {
    // 80 near copies of the question fill the first draw (64 rows); the one reference lies past them.
    const brain = await echoBrain([{ type: 'echo', tier: 'C', weight: 0.5 }], 80, byTeam, {});
    await gateway.platform.db.query(`ANALYZE ${partitionOf(brain.id)}`);
    const query = CREDENTIALS_QUESTION;

    const references = (await recall(brain.id, { query, classes: ['reference'], explain: true })).body.data;
    expect(ids(references)).toEqual(['answer']);
    const echoes = (await recall(brain.id, { query, types: ['echo'], top_k: 100 })).body.data;
    expect(echoes).toHaveLength(80);
    // The premise: every echo is nearer the question than the reference is.
    const echoCosines = (await recall(brain.id, { query, types: ['echo'], top_k: 100, explain: true })).body.data.map((hit: any) => hit.factors.cosine);
    expect(Math.min(...echoCosines)).toBeGreaterThan(references[0].factors.cosine);
  });

  it('sees the scope and its ancestors; inherit false the leaf alone; subtree also below, marked explore', async () => {
    const atRoot = ids((await recall(brainId, { query: 'password reset', top_k: 20 })).body.data);
    expect(atRoot).not.toContain('team-pw');
    const atTeam = ids((await recall(brainId, { query: 'password reset', scope: '/team', top_k: 20 })).body.data);
    expect(atTeam).toEqual(expect.arrayContaining(['pw', 'team-pw', 'policy']));
    expect(atTeam).not.toContain('deep-pw');
    expect(ids((await recall(brainId, { query: 'password reset', scope: '/team', inherit: false, top_k: 20 })).body.data)).toEqual(['team-pw']);
    const subtree = (await recall(brainId, { query: 'password reset', scope: '/team', subtree: true, top_k: 20 })).body.data;
    expect(ids(subtree)).toContain('deep-pw');
    expect(subtree.find((hit: { entry_id: string }) => hit.entry_id === 'deep-pw').explore).toBe(true);
    expect(subtree.find((hit: { entry_id: string }) => hit.entry_id === 'team-pw').explore).toBeUndefined();
  });

  it('filters by class and type (policy exempt), and explains misses in order: class_filter, min_score, top_k', async () => {
    const memories = (await recall(brainId, { query: 'password reset', scope: '/team', subtree: true, classes: ['memory', 'policy'], types: ['decision'], top_k: 20 })).body.data;
    expect(ids(memories).sort()).toEqual(['policy', 'team-pw']);

    const all = (await recall(brainId, { query: 'password reset', scope: '/team', top_k: 20 })).body.data;
    const scores = all.map((hit: { score: number }) => hit.score);
    const minScore = (scores[1] + scores[2]) / 2; // keeps two of the memory-and-reference hits
    const res = await recall(brainId, { query: 'password reset', scope: '/team', classes: ['reference', 'memory'], min_score: Math.min(minScore, scores[0] - 1e-6), top_k: 1, explain_misses: true, misses_top_k: 10 });
    const reasons = res.body.misses.map((miss: { dropped_by: string }) => miss.dropped_by);
    expect(reasons[0]).toBe('class_filter');
    expect(reasons).toEqual([...reasons].sort((a: string, b: string) => ['class_filter', 'min_score', 'top_k'].indexOf(a) - ['class_filter', 'min_score', 'top_k'].indexOf(b)));
    expect(reasons).toContain('top_k');
    expect(res.body.misses.find((miss: { entry_id: string }) => miss.entry_id === 'policy').dropped_by).toBe('class_filter');
    expect(res.body.data).toHaveLength(1);
    expect(res.body.misses[0].factors).toBeDefined();
    // misses_top_k defaults to top_k.
    expect((await recall(brainId, { query: 'password reset', scope: '/team', top_k: 1, explain_misses: true })).body.misses).toHaveLength(1);
    expect((await recall(brainId, { query: 'password reset', min_score: 0.999 })).body.data).toEqual([]);
  });

  it('answers as_of an instant: later updates and deletes do not change it', async () => {
    const brain = await newBrain();
    await write(brain.id, { entry_id: 'office', body: 'The office is in Berlin.' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const before = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await write(brain.id, { entry_id: 'office', body: 'The office moved to Lisbon.' });
    await write(brain.id, { entry_id: 'parking', body: 'Parking is behind the office.' });
    await del(`/v1/brains/${brain.id}/entries/parking`);

    const now = (await recall(brain.id, { query: 'where is the office', top_k: 10 })).body.data;
    expect(now.map((hit: { content: string }) => hit.content)).toEqual(['The office moved to Lisbon.']);
    const then = await recall(brain.id, { query: 'where is the office', top_k: 10, as_of: before, explain_misses: true });
    expect(then.body.data.map((hit: { content: string }) => hit.content)).toEqual(['The office is in Berlin.']);
    expect(then.body.misses).toBeUndefined();
    expect(then.body.as_of).toBe(before);
  });
});

describe('encryption', () => {
  for (const encryption of ['standard', 'strict'] as const) {
    it(`${encryption}: rows are unreadable in the database and read back in plaintext`, async () => {
      const brain = await newBrain({ encryption });
      const secret = `The vault code is tangerine-${encryption}`;
      const written = await write(brain.id, { title: 'Vault', body: secret, scope: '/ops' });
      const { rows } = await gateway.platform.db.query(`SELECT title, body, title_sealed, body_sealed FROM brain_entries WHERE brain_id = $1`, [brain.id]);
      expect(rows[0]).toMatchObject({ title: null, body: null });
      expect(rows[0].body_sealed.toString('latin1')).not.toContain('tangerine');
      const chunks = await gateway.platform.db.query(`SELECT content, content_sealed, embedding IS NULL AS no_vector FROM ${partitionOf(brain.id)}`);
      expect(chunks.rows[0].content).toBeNull();
      expect(chunks.rows[0].content_sealed.toString('latin1')).not.toContain('tangerine');
      expect(chunks.rows[0].no_vector).toBe(encryption === 'strict');
      expect((await get(`/v1/brains/${brain.id}/entries/${written.entry_id}`)).body).toMatchObject({ title: 'Vault', body: secret });
      await write(brain.id, { body: 'Lunch is served at noon.', scope: '/ops' });
      const hits = (await recall(brain.id, { query: 'what is the vault code', scope: '/ops' })).body.data;
      expect(hits[0]).toMatchObject({ entry_id: written.entry_id, content: secret });
    });
  }
});

describe('strict recall keeps up with writes', () => {
  it('sees new, changed, moved and deleted entries between recalls of a strict brain', async () => {
    const brain = await newBrain({ encryption: 'strict' });
    await write(brain.id, { entry_id: 'a', body: 'The staging database lives in Frankfurt.', scope: '/infra' });
    await write(brain.id, { entry_id: 'b', body: 'Backups run every night at two.', scope: '/infra' });
    const contents = async (query: string, scope = '/infra') => (await recall(brain.id, { query, scope, top_k: 10 })).body.data.map((hit: { entry_id: string; content: string }) => `${hit.entry_id}: ${hit.content}`);
    expect((await contents('where is the staging database'))[0]).toBe('a: The staging database lives in Frankfurt.');

    await write(brain.id, { entry_id: 'a', body: 'The staging database moved to Dublin.', scope: '/infra' });
    await write(brain.id, { entry_id: 'c', body: 'The staging database has a read replica in Paris.', scope: '/infra' });
    await del(`/v1/brains/${brain.id}/entries/b`);
    await patch(`/v1/brains/${brain.id}/entries/c`, { scope: '/infra/replicas' });
    const now = await contents('where is the staging database');
    expect(now).toEqual(['a: The staging database moved to Dublin.']);
    expect(await contents('where is the staging database', '/infra/replicas')).toEqual(expect.arrayContaining(['c: The staging database has a read replica in Paris.', 'a: The staging database moved to Dublin.']));
  });
});

describe('flag', () => {
  it('answers 404 on every brains route when SVC_BRAINS_ENABLED is false, and lists brains as planned', async () => {
    const off = await startTestPlatform({ SVC_BRAINS_ENABLED: 'false' });
    try {
      const owner = await createDeveloper(off.platform, { creditMicros: 1_000_000, scopes: ['admin'] });
      expect((await call(off.baseUrl, '/v1/brains', { method: 'POST', json: { name: 'x' }, headers: bearer(owner.key) })).status).toBe(404);
      expect((await call(off.baseUrl, '/v1/brains', { headers: bearer(owner.key) })).status).toBe(404);
      const surfaces = (await call(off.baseUrl, '/v1/compatibility')).body.surfaces ?? (await call(off.baseUrl, '/v1/compatibility')).body.data;
      expect(surfaces.find((surface: { surface: string }) => surface.surface === 'brains').status).toBe('planned');
    } finally {
      await off.close();
    }
  });
});
