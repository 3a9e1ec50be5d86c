import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { creditDeveloperWallet } from '../shared/accounts/accounts.js';
import { deterministicEmbedding } from '../shared/emulator/embeddings.js';
import { blindTerms, sealText, sealVector, textAad, vectorAad } from '../shared/vector-stores/crypto.js';
import { rebuildIvf } from '../shared/vector-stores/ivf.js';
import { createSpaceIndex, findStoreById, partitionOf } from '../shared/vector-stores/repository.js';
import { nearestByVector } from '../shared/vector-stores/search.js';
import { sweepVectorStores } from '../shared/vector-stores/sweep.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, createDeveloper, walletBalanceMicros, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Vector stores end to end: the real API, PostgreSQL with pgvector, the ingest stages on BullMQ
 * (consumers in this process), Temporal for deletion, and the emulator's embeddings, whose
 * vectors carry meaning, as the upstream.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let client: OpenAI;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({ VECTOR_STORE_EMBED_BATCH: '4' }, 100_000_000));
  workers = await startInProcessWorkers(gateway.platform);
  client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const post = (path: string, json: unknown, headers: Record<string, string> = {}, key = developer.key) =>
  call(gateway.baseUrl, path, { method: 'POST', json, headers: { ...bearer(key), ...headers } });
const get = (path: string, headers: Record<string, string> = {}, key = developer.key) => call(gateway.baseUrl, path, { headers: { ...bearer(key), ...headers } });
const del = (path: string, key = developer.key) => call(gateway.baseUrl, path, { method: 'DELETE', headers: bearer(key) });

async function upload(name: string, content: string | Buffer): Promise<string> {
  const file = await client.files.create({ file: await toFile(Buffer.from(content), name), purpose: 'assistants' });
  return file.id;
}

async function storeFile(storeId: string, fileId: string, headers: Record<string, string> = {}) {
  return pollUntil(
    async () => (await get(`/v1/vector_stores/${storeId}/files/${fileId}`, headers)).body,
    (file) => ['completed', 'failed', 'cancelled'].includes(file.status),
    { context: () => `ingest of ${fileId}` },
  );
}

const DOCUMENTS = {
  'passwords.md': '# Resetting your password\n\nTo reset a forgotten password, open Settings, choose Security and press "Reset password". A reset link is emailed to you and expires after one hour.',
  'billing.txt': 'Invoices are issued on the first day of each month. Refunds for annual plans are prorated and paid back to the original card within ten business days.',
  'shipping.html': '<html><head><style>p{color:red}</style><script>var x = 1;</script></head><body><h1>Shipping</h1><p>Parcels ship from our warehouse in Rotterdam. Express delivery arrives within two days across Europe.</p></body></html>',
  'incident.txt': 'Incident report: the payment worker crashed with error code ERR-4412-XQ while settling a batch. The fix raised the connection pool size.',
};

describe('through the official openai SDK', () => {
  it('creates a store, uploads and polls files, and finds the relevant chunk first', async () => {
    const store = await client.vectorStores.create({ name: 'Help center', embedding_model: 'text-embedding-3-small', metadata: { team: 'support' } } as OpenAI.VectorStoreCreateParams);
    expect(store).toMatchObject({ object: 'vector_store', name: 'Help center', status: 'completed', metadata: { team: 'support' }, embedding_model: 'text-embedding-3-small', dimensions: 1536, encryption: 'none' });
    expect(store.id).toMatch(/^vs_/);

    for (const [name, content] of Object.entries(DOCUMENTS)) {
      const file = await client.vectorStores.files.uploadAndPoll(store.id, await toFile(Buffer.from(content), name), { pollIntervalMs: 50 });
      expect(file).toMatchObject({ object: 'vector_store.file', status: 'completed', vector_store_id: store.id, last_error: null });
      expect(file.usage_bytes).toBeGreaterThan(0);
    }
    const retrieved = await client.vectorStores.retrieve(store.id);
    expect(retrieved.file_counts).toEqual({ in_progress: 0, completed: 4, failed: 0, cancelled: 0, total: 4 });
    expect(retrieved.usage_bytes).toBeGreaterThan(4 * 1536 * 4);

    const cases: [string, string][] = [
      ['how do I reset my password', 'passwords.md'],
      ['when will I get my refund', 'billing.txt'],
      ['how long does express delivery take', 'shipping.html'],
    ];
    for (const [query, expected] of cases) {
      const page = await client.vectorStores.search(store.id, { query, max_num_results: 3 });
      expect(page.data[0]?.filename, query).toBe(expected);
      expect(page.data[0]!.content[0]!.type).toBe('text');
      expect(page.data[0]!.score).toBeGreaterThan(0);
    }
    // Parsed text, not markup: the HTML file's chunk has no script or style.
    const shipping = (await client.vectorStores.search(store.id, { query: 'express delivery Europe', max_num_results: 1 })).data[0]!;
    expect(shipping.content[0]!.text).toContain('Rotterdam');
    expect(shipping.content[0]!.text).not.toContain('var x');
    expect(shipping.content[0]!.text).not.toContain('color:red');
  });

  it('finds an exact identifier through full-text ranking even when its embedding is not near', async () => {
    const store = await createStore({ name: 'Incidents' });
    for (const [name, content] of Object.entries(DOCUMENTS)) await attachAndWait(store.id, name, content);
    const { body } = await post(`/v1/vector_stores/${store.id}/search`, { query: 'ERR-4412-XQ', max_num_results: 2 });
    expect(body.object).toBe('vector_store.search_results.page');
    expect(body.search_query).toEqual(['ERR-4412-XQ']);
    expect(body.data[0].filename).toBe('incident.txt');

    // Several queries fuse into one ranking; a score threshold drops the weaker results.
    const both = (await post(`/v1/vector_stores/${store.id}/search`, { query: ['reset my password', 'refund for annual plans'], max_num_results: 2 })).body;
    expect(both.search_query).toHaveLength(2);
    expect(both.data.map((result: { filename: string }) => result.filename).sort()).toEqual(['billing.txt', 'passwords.md']);
    const all = (await post(`/v1/vector_stores/${store.id}/search`, { query: 'reset my password', max_num_results: 10 })).body.data;
    const threshold = (all[0].score + all.at(-1).score) / 2;
    const strong = (await post(`/v1/vector_stores/${store.id}/search`, { query: 'reset my password', ranking_options: { score_threshold: threshold }, rewrite_query: true })).body.data;
    expect(strong.length).toBeGreaterThan(0);
    expect(strong.length).toBeLessThan(all.length);
    expect(strong.every((result: { score: number }) => result.score >= threshold)).toBe(true);
  });

  it('searches through the HNSW graph in the precision it was built with: half for new stores, single for stores built before', async () => {
    const store = await createStore({ name: 'Precision' });
    for (const [name, content] of Object.entries(DOCUMENTS)) await attachAndWait(store.id, name, content);
    const db = gateway.platform.db;
    const graph = async () => (await db.query(`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%hnsw%'`, [partitionOf(store.id)])).rows[0];
    const scans = async (index: string) => Number((await db.query(`SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = $1`, [index])).rows[0]?.idx_scan ?? 0);
    const searchedThroughGraph = async () => {
      const { indexname } = await graph();
      const before = await scans(indexname);
      const page = (await post(`/v1/vector_stores/${store.id}/search`, { query: 'how do I reset my password', max_num_results: 2 })).body;
      expect(page.data[0].filename).toBe('passwords.md');
      await pollUntil(() => scans(indexname), (after) => after > before, { context: () => `a scan of ${indexname}` });
    };
    expect((await graph()).indexdef).toContain('halfvec(1536)');
    await searchedThroughGraph();

    // A store from before migration 033: its graph over vector(1536), and its row saying so.
    const { indexname } = await graph();
    await db.query(`DROP INDEX ${indexname}`);
    await db.query(`UPDATE vector_stores SET hnsw_precision = 'single' WHERE id = $1`, [store.id]);
    await createSpaceIndex(db, { id: store.id, hnsw_precision: 'single' }, 1, 1536);
    expect((await graph()).indexdef).toContain('vector(1536)');
    expect((await graph()).indexdef).not.toContain('halfvec');
    await searchedThroughGraph();
  });

  it('filters results on file attributes (eq, in, numeric ranges, compound)', async () => {
    const store = await createStore({ name: 'Filtered' });
    const password = await upload('passwords.md', DOCUMENTS['passwords.md']);
    const billing = await upload('billing.txt', DOCUMENTS['billing.txt']);
    await client.vectorStores.files.createAndPoll(store.id, { file_id: password, attributes: { region: 'eu', year: 2024, public: true } }, { pollIntervalMs: 50 });
    await client.vectorStores.files.createAndPoll(store.id, { file_id: billing, attributes: { region: 'us', year: 2022, public: false } }, { pollIntervalMs: 50 });
    const search = async (filters: unknown) =>
      (await post(`/v1/vector_stores/${store.id}/search`, { query: 'password refund', filters })).body.data.map((result: { filename: string }) => result.filename);
    expect(await search({ type: 'eq', key: 'region', value: 'us' })).toEqual(['billing.txt']);
    expect(await search({ type: 'in', key: 'region', value: ['eu', 'apac'] })).toEqual(['passwords.md']);
    expect(await search({ type: 'gte', key: 'year', value: 2023 })).toEqual(['passwords.md']);
    expect(await search({ type: 'eq', key: 'public', value: false })).toEqual(['billing.txt']);
    expect(await search({ type: 'or', filters: [{ type: 'lt', key: 'year', value: 2023 }, { type: 'eq', key: 'region', value: 'eu' }] })).toHaveLength(2);
    expect(await search({ type: 'and', filters: [{ type: 'ne', key: 'region', value: 'eu' }, { type: 'gt', key: 'year', value: 2023 }] })).toEqual([]);
    const bad = await post(`/v1/vector_stores/${store.id}/search`, { query: 'x', filters: { type: 'like', key: 'region', value: 'e' } });
    expectError(bad, 400, 'invalid_request', { param: 'filters' });
    expectError(await post(`/v1/vector_stores/${store.id}/search`, { query: 'x', max_num_results: 51 }), 400, 'invalid_request', { param: 'max_num_results' });
  });

  it('covers the rest of the resource: files list, retrieve, content, delete; file batches upload, retrieve, cancel; store delete', async () => {
    const store = await client.vectorStores.create({ name: 'SDK tour', embedding_model: 'text-embedding-3-small' } as OpenAI.VectorStoreCreateParams);
    const batch = await client.vectorStores.fileBatches.uploadAndPoll(
      store.id,
      { files: [await toFile(Buffer.from(DOCUMENTS['billing.txt']), 'billing.txt'), await toFile(Buffer.from(DOCUMENTS['passwords.md']), 'passwords.md')] },
      { pollIntervalMs: 50 },
    );
    expect(batch).toMatchObject({ status: 'completed', file_counts: { completed: 2, total: 2 } });
    expect(await client.vectorStores.fileBatches.retrieve(batch.id, { vector_store_id: store.id })).toMatchObject({ id: batch.id, status: 'completed' });
    expect((await client.vectorStores.fileBatches.cancel(batch.id, { vector_store_id: store.id })).file_counts).toMatchObject({ completed: 2, cancelled: 0 });

    const listed = [];
    for await (const file of client.vectorStores.files.list(store.id, { filter: 'completed' })) listed.push(file);
    expect(listed).toHaveLength(2);
    const one = await client.vectorStores.files.retrieve(listed[0]!.id, { vector_store_id: store.id });
    expect(one).toMatchObject({ id: listed[0]!.id, status: 'completed' });
    const content = [];
    for await (const part of client.vectorStores.files.content(one.id, { vector_store_id: store.id })) content.push(part.text);
    expect(content.join(' ').length).toBeGreaterThan(50);
    expect(await client.vectorStores.files.update(one.id, { vector_store_id: store.id, attributes: { lang: 'en' } })).toMatchObject({ attributes: { lang: 'en' } });
    expect(await client.vectorStores.files.delete(one.id, { vector_store_id: store.id })).toEqual({ id: one.id, object: 'vector_store.file.deleted', deleted: true });
    expect((await client.vectorStores.retrieve(store.id)).file_counts.total).toBe(1);
    expect(await client.vectorStores.delete(store.id)).toEqual({ id: store.id, object: 'vector_store.deleted', deleted: true });
  });

  it('pages store lists by id as the SDK does, newest first', async () => {
    const other = await createDeveloper(gateway.platform, { creditMicros: 10_000_000 });
    const own = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: other.key, maxRetries: 0 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await own.vectorStores.create({ name: `s${i}`, embedding_model: 'voyage-3-lite' } as OpenAI.VectorStoreCreateParams)).id);
    const seen: string[] = [];
    for await (const store of own.vectorStores.list({ limit: 2 })) seen.push(store.id);
    expect(seen).toEqual([...ids].reverse());
    const page = (await get('/v1/vector_stores?limit=1000&order=asc', {}, other.key)).body;
    expect(page).toMatchObject({ object: 'list', has_more: false, first_id: ids[0], last_id: ids[4] });
  });
});

async function createStore(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const { status, body: store } = await post('/v1/vector_stores', { embedding_model: 'text-embedding-3-small', ...body }, headers);
  expect(status, JSON.stringify(store)).toBe(200);
  return store as { id: string; [key: string]: unknown };
}

async function attachAndWait(storeId: string, name: string, content: string | Buffer, headers: Record<string, string> = {}) {
  const fileId = await upload(name, content);
  const attached = await post(`/v1/vector_stores/${storeId}/files`, { file_id: fileId }, headers);
  expect(attached.status, JSON.stringify(attached.body)).toBe(200);
  return storeFile(storeId, fileId, headers);
}

describe('create validation', () => {
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['empty name', { name: '' }, 'invalid_name', 'name'],
    ['a name over 256 bytes', { name: 'é'.repeat(129) }, 'name_too_long', 'name'],
    ['no embedding model', { embedding_model: undefined }, 'missing_embedding_model', 'embedding_model'],
    ['an unknown embedding model', { embedding_model: 'text-embedding-9' }, 'invalid_embedding_model', 'embedding_model'],
    ['dimensions on a model that cannot shorten', { embedding_model: 'text-embedding-ada-002', dimensions: 512 }, 'invalid_dimensions', 'dimensions'],
    ['dimensions above the model', { dimensions: 4096 }, 'invalid_dimensions', 'dimensions'],
    ['zero dimensions', { dimensions: 0 }, 'invalid_dimensions', 'dimensions'],
    ['an unknown encryption', { encryption: 'rot13' }, 'invalid_encryption', 'encryption'],
    ['an unknown sealing', { encryption: 'managed', vector_sealing: 'partial' }, 'invalid_vector_sealing', 'vector_sealing'],
    ['sealing without encryption', { vector_sealing: 'full' }, 'invalid_vector_sealing', 'vector_sealing'],
    ['an unknown index', { vector_index: 'lsh' }, 'invalid_vector_index', 'vector_index'],
    ['ivf on a plaintext store', { vector_index: 'ivf' }, 'ivf_requires_encryption', 'vector_index'],
    ['ivf on a store whose vectors are not sealed', { encryption: 'managed', vector_sealing: 'source', vector_index: 'ivf' }, 'ivf_requires_encryption', 'vector_index'],
    ['byok without a key', { encryption: 'byok' }, 'byok_key_required', 'key'],
    ['byok with a short passphrase', { encryption: 'byok', key: { type: 'passphrase', passphrase: 'short pass' } }, 'byok_passphrase_too_short', 'key.passphrase'],
    ['byok with an external key service', { encryption: 'byok', key: { type: 'aws_kms', passphrase: 'arn:aws:kms:eu-west-1:1:key/x' } }, 'byok_kms_unavailable', 'key.type'],
    ['byok with no passphrase', { encryption: 'byok', key: { type: 'passphrase' } }, 'missing_passphrase', 'key.passphrase'],
    ['a key on a managed store', { encryption: 'managed', key: { type: 'passphrase', passphrase: 'long enough passphrase' } }, 'not_a_byok_store', 'key'],
    ['metadata that is not an object', { metadata: 'x' }, 'invalid_metadata', 'metadata'],
    ['too many metadata keys', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata_too_many_keys', 'metadata'],
    ['an unknown file id', { file_ids: ['file_nope'] }, 'file_not_found', 'file_id'],
  ];
  it.each(cases)('refuses %s with its code, writing nothing', async (_label, patch, code, param) => {
    const before = await storeCount();
    const res = await post('/v1/vector_stores', { name: 'x', embedding_model: 'text-embedding-3-small', ...patch });
    expectError(res, code === 'file_not_found' ? 404 : 400, code, { param });
    if (code !== 'file_not_found') expect(await storeCount()).toBe(before);
  });

  it('answers an unknown field plainly', async () => {
    expectError(await post('/v1/vector_stores', { name: 'x', embedding_model: 'text-embedding-3-small', colour: 'blue' }), 400, 'invalid_request', { param: 'colour' });
  });

  it('shortens dimensions where the model allows it and defaults sealing to full on an encrypted store', async () => {
    const shortened = await createStore({ dimensions: 256 });
    expect(shortened.dimensions).toBe(256);
    const managed = await createStore({ encryption: 'managed' });
    expect(managed).toMatchObject({ encryption: 'managed', vector_sealing: 'full', vector_index: 'auto' });
  });
});

async function storeCount(): Promise<number> {
  const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM vector_stores WHERE developer_id = $1`, [developer.accountId]);
  return rows[0].n;
}

describe('ingest states', () => {
  it('fails an unsupported or corrupt file with a last_error naming why, never a 5xx', async () => {
    const store = await createStore({ name: 'Mixed' });
    const exe = await attachAndWait(store.id, 'tool.exe', Buffer.from([0x4d, 0x5a, 0x90, 0x00]));
    expect(exe).toMatchObject({ status: 'failed', last_error: { code: 'unsupported_file' } });
    const pdf = await attachAndWait(store.id, 'broken.pdf', '%PDF-1.4 this is not really a pdf');
    expect(pdf).toMatchObject({ status: 'failed', last_error: { code: 'invalid_file' } });
    const events = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM outbox_events WHERE type = 'vector_store.file.failed' AND data->>'vector_store_id' = $1`, [store.id]);
    expect(events.rows[0].n).toBe(2);
  });

  it('retries only failed or cancelled files and cancels only unfinished ones', async () => {
    const store = await createStore({ name: 'Transitions' });
    const done = await attachAndWait(store.id, 'billing.txt', DOCUMENTS['billing.txt']);
    expectError(await post(`/v1/vector_stores/${store.id}/files/${done.id}/retry`, {}), 409, 'file_not_retryable');
    expectError(await post(`/v1/vector_stores/${store.id}/files/${done.id}/cancel`, {}), 409, 'file_not_cancellable');

    const failed = await attachAndWait(store.id, 'tool.exe', 'MZ');
    const retried = await post(`/v1/vector_stores/${store.id}/files/${failed.id}/retry`, {});
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'in_progress', ingest_status: 'pending', last_error: null });
    expect(await storeFile(store.id, failed.id)).toMatchObject({ status: 'failed', last_error: { code: 'unsupported_file' } });

    expectError(await post(`/v1/vector_stores/${store.id}/files/file_missing/cancel`, {}), 404, 'vector_store_file_not_found');
    expectError(await post(`/v1/vector_stores/${store.id}/files`, { file_id: 'file_missing' }), 404, 'file_not_found', { param: 'file_id' });
  });

  it('returns the parsed text chunk by chunk, and detaching removes the chunks', async () => {
    const store = await createStore({ name: 'Content' });
    const file = await attachAndWait(store.id, 'passwords.md', DOCUMENTS['passwords.md']);
    const content = await get(`/v1/vector_stores/${store.id}/files/${file.id}/content`);
    expect(content.body.object).toBe('vector_store.file_content.page');
    expect(content.body.data.map((part: { text: string }) => part.text).join(' ')).toContain('Reset password');
    expect((await del(`/v1/vector_stores/${store.id}/files/${file.id}`)).body).toEqual({ id: file.id, object: 'vector_store.file.deleted', deleted: true });
    const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM vector_store_chunks WHERE vector_store_id = $1`, [store.id]);
    expect(rows[0].n).toBe(0);
    expectError(await get(`/v1/vector_stores/${store.id}/files/${file.id}`), 404, 'vector_store_file_not_found');
  });

  it('bills the embeddings to the developer, or to the customer Svc-Customer names', async () => {
    const before = await walletBalanceMicros(gateway.platform, developer.accountId);
    const store = await createStore({ name: 'Billing' });
    await attachAndWait(store.id, 'billing.txt', DOCUMENTS['billing.txt']);
    expect(await walletBalanceMicros(gateway.platform, developer.accountId)).toBeLessThan(before);

    const customer = (await post('/v1/customers', { external_id: 'vs-payer' })).body;
    expect((await post('/v1/customers/ext:vs-payer/wallet/topup', { amount_usd: 5 })).status).toBe(200);
    const file = await attachAndWait(store.id, 'passwords.md', DOCUMENTS['passwords.md'], { 'Svc-Customer': 'vs-payer' });
    const usage = await pollUntil(
      async () => (await gateway.platform.db.query(`SELECT customer_id FROM usage_records WHERE idempotency_key LIKE $1`, [`vs:${store.id}:%:${file.id}:%`])).rows,
      (rows) => rows.length > 0,
      { context: () => 'usage of the customer-billed ingest' },
    );
    expect(usage.map((row) => row.customer_id)).toEqual(usage.map(() => customer.id));
    const wallet = (await get('/v1/customers/ext:vs-payer/wallet')).body;
    expect(wallet.balance_usd).toBeLessThan(5);
  });
});

/**
 * A finished batch's finish, its event and its files' moves, by their transaction times: the
 * transaction that finished the batch stamps its own file, the finish and the event with one now().
 * That file need not hold the latest stamp: now() is when a transaction began, and one that began
 * later can take the batch's lock first and commit its file before.
 */
async function batchFinish(batchId: string) {
  const { rows } = await gateway.platform.db.query(
    `SELECT b.finished_at, (SELECT array_agg(f.updated_at) FROM vector_store_files f WHERE f.batch_id = b.id) AS file_moves,
            (SELECT array_agg(e.created_at) FROM outbox_events e WHERE e.type = 'vector_store.file_batch.completed' AND e.data->>'id' = b.id) AS events
     FROM vector_store_file_batches b WHERE b.id = $1`,
    [batchId],
  );
  const row = rows[0] as { finished_at: Date | null; file_moves: Date[]; events: Date[] | null };
  return { finishedAt: row.finished_at?.toISOString(), fileMoves: row.file_moves.map((at) => at.toISOString()), events: (row.events ?? []).map((at) => at.toISOString()) };
}

describe('file batches', () => {
  it('attaches several files, with counts that add up, and lists them', async () => {
    const store = await createStore({ name: 'Batch' });
    const ids = [await upload('a.txt', DOCUMENTS['billing.txt']), await upload('b.md', DOCUMENTS['passwords.md']), await upload('c.exe', 'MZ')];
    const batch = await client.vectorStores.fileBatches.createAndPoll(store.id, { file_ids: ids }, { pollIntervalMs: 50 });
    expect(batch).toMatchObject({ object: 'vector_store.files_batch', status: 'completed', file_counts: { completed: 2, failed: 1, in_progress: 0, cancelled: 0, total: 3 } });
    const files = [];
    for await (const file of client.vectorStores.fileBatches.listFiles(batch.id, { vector_store_id: store.id })) files.push(file.id);
    expect(files.sort()).toEqual([...ids].sort());
    // The batch reads completed once its last file has (its status is its files' counts), and the
    // transaction that finished that file finished the batch and recorded its event, once.
    const finish = await batchFinish(batch.id);
    expect(finish.fileMoves).toContain(finish.finishedAt);
    expect(finish.events).toEqual([finish.finishedAt]);
  });

  it('cancels a batch whose files have not run: it ends cancelled, its event recorded by the same transaction', async () => {
    // With the consumers stopped, the batch's files stay pending until the cancel.
    await workers.stop();
    try {
      const store = await createStore({ name: 'Batch cancel' });
      const ids = [await upload('x.txt', DOCUMENTS['billing.txt']), await upload('y.md', DOCUMENTS['passwords.md'])];
      const created = await post(`/v1/vector_stores/${store.id}/file_batches`, { file_ids: ids });
      expect(created.body).toMatchObject({ status: 'in_progress', file_counts: { in_progress: 2, total: 2 } });
      const cancelled = await post(`/v1/vector_stores/${store.id}/file_batches/${created.body.id}/cancel`, {});
      expect(cancelled.body).toMatchObject({ id: created.body.id, status: 'cancelled', file_counts: { cancelled: 2, in_progress: 0, completed: 0, total: 2 } });
      const finish = await batchFinish(created.body.id);
      expect(finish.fileMoves).toContain(finish.finishedAt);
      expect(finish.events).toEqual([finish.finishedAt]);
    } finally {
      workers = await startInProcessWorkers(gateway.platform);
    }
  });

  it('refuses an empty batch, more than 500 files and unknown batches', async () => {
    const store = await createStore({ name: 'Batch limits' });
    expectError(await post(`/v1/vector_stores/${store.id}/file_batches`, { file_ids: [] }), 400, 'invalid_file_ids', { param: 'file_ids' });
    expectError(await post(`/v1/vector_stores/${store.id}/file_batches`, { file_ids: 'file_x' }), 400, 'invalid_file_ids', { param: 'file_ids' });
    expectError(await post(`/v1/vector_stores/${store.id}/file_batches`, { file_ids: Array.from({ length: 501 }, (_, i) => `file_${i}`) }), 400, 'too_many_files', { param: 'file_ids' });
    expectError(await get(`/v1/vector_stores/${store.id}/file_batches/vsfb_nope`), 404, 'file_batch_not_found');
  });
});

describe('poll pace', () => {
  const pace = (response: { headers: Headers }) => response.headers.get('openai-poll-after-ms');

  it('tells pollers when to read a file and a file batch again while they ingest, and not once they are done', async () => {
    const store = await createStore({ name: 'Paced' });
    const single = await upload('paced.txt', DOCUMENTS['billing.txt']);
    const batched = [await upload('paced-a.txt', DOCUMENTS['incident.txt']), await upload('paced-b.md', DOCUMENTS['passwords.md'])];
    let batchId: string;
    // With the consumers stopped, the ingests stay pending while they are read.
    await workers.stop();
    try {
      const attached = await post(`/v1/vector_stores/${store.id}/files`, { file_id: single });
      const created = await post(`/v1/vector_stores/${store.id}/file_batches`, { file_ids: batched });
      batchId = created.body.id;
      const reads = [attached, await get(`/v1/vector_stores/${store.id}/files/${single}`), created, await get(`/v1/vector_stores/${store.id}/file_batches/${batchId}`)];
      expect(reads.map((read) => [read.body.status, pace(read)])).toEqual([['in_progress', '250'], ['in_progress', '250'], ['in_progress', '500'], ['in_progress', '500']]);
    } finally {
      workers = await startInProcessWorkers(gateway.platform);
    }
    expect(await storeFile(store.id, single)).toMatchObject({ status: 'completed' });
    await pollUntil(() => get(`/v1/vector_stores/${store.id}/file_batches/${batchId}`), (read) => read.body.status !== 'in_progress', { context: () => 'paced batch' });
    const ended = [await get(`/v1/vector_stores/${store.id}/files/${single}`), await get(`/v1/vector_stores/${store.id}/file_batches/${batchId}`)];
    expect(ended.map((read) => [read.body.status, pace(read)])).toEqual([['completed', null], ['completed', null]]);
  });

  it("lets the openai SDK's createAndPoll pace itself by the header, to the end", async () => {
    const store = await createStore({ name: 'SDK paced' });
    const fileId = await upload('sdk-paced.md', DOCUMENTS['passwords.md']);
    // No pollIntervalMs: the helper waits as long as openai-poll-after-ms says.
    const file = await client.vectorStores.files.createAndPoll(store.id, { file_id: fileId });
    expect(file).toMatchObject({ id: fileId, object: 'vector_store.file', status: 'completed', last_error: null });
  });
});

describe('encryption', () => {
  const passphrase = 'correct horse battery staple';

  it('keeps a byok store unreadable without its passphrase, in the API and in the database', async () => {
    const store = await createStore({ name: 'Secret', encryption: 'byok', key: { type: 'passphrase', passphrase } });
    expect(store).toMatchObject({ encryption: 'byok', vector_sealing: 'full', unlocked_until: null });
    const fileId = await upload('incident.txt', DOCUMENTS['incident.txt']);
    expectError(await post(`/v1/vector_stores/${store.id}/files`, { file_id: fileId }), 409, 'vector_store_locked');
    expectError(await post(`/v1/vector_stores/${store.id}/search`, { query: 'payment worker' }), 409, 'vector_store_locked');

    expectError(await post(`/v1/vector_stores/${store.id}/unlock`, {}), 400, 'missing_passphrase');
    expectError(await post(`/v1/vector_stores/${store.id}/unlock`, { passphrase: 'wrong passphrase entirely' }), 400, 'invalid_passphrase');
    const lease = await post(`/v1/vector_stores/${store.id}/unlock`, { passphrase, ttl_seconds: 120 });
    expect(lease.body).toMatchObject({ object: 'vector_store.lease', vector_store_id: store.id });

    await attachAndWait(store.id, 'incident.txt', DOCUMENTS['incident.txt']);
    await attachAndWait(store.id, 'billing.txt', DOCUMENTS['billing.txt']);
    const found = await post(`/v1/vector_stores/${store.id}/search`, { query: 'ERR-4412-XQ payment worker crash' });
    expect(found.body.data[0].filename).toBe('incident.txt');
    expect(found.body.data[0].content[0].text).toContain('ERR-4412-XQ');

    // The rows hold no plaintext: no text, no readable vector, and no word of the file in any column.
    const { rows } = await gateway.platform.db.query(`SELECT * FROM ${partitionOf(store.id)}`);
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.text).toBeNull();
      expect(row.embedding).toBeNull();
      expect(Buffer.from(JSON.stringify(row)).includes('4412')).toBe(false);
      expect(Buffer.from(row.text_sealed).includes('payment')).toBe(false);
    }

    await del(`/v1/vector_stores/${store.id}/unlock`);
    expectError(await post(`/v1/vector_stores/${store.id}/search`, { query: 'payment' }), 409, 'vector_store_locked');
    // The passphrase per request works without a lease; a wrong one is refused.
    const perRequest = await post(`/v1/vector_stores/${store.id}/search`, { query: 'refunds annual plans' }, { 'Svc-Vector-Store-Key': passphrase });
    expect(perRequest.body.data[0].filename).toBe('billing.txt');
    expectError(await post(`/v1/vector_stores/${store.id}/search`, { query: 'x' }, { 'Svc-Vector-Store-Key': 'not the passphrase' }), 400, 'invalid_passphrase');
    const plain = await createStore({ name: 'plain' });
    expectError(await post(`/v1/vector_stores/${plain.id}/unlock`, { passphrase }), 400, 'not_a_byok_store');
  });

  it('searches a managed store with sealed vectors exactly, and one with sealed text through its blind index', async () => {
    for (const sealing of ['full', 'source']) {
      const store = await createStore({ name: `Managed ${sealing}`, encryption: 'managed', vector_sealing: sealing });
      for (const [name, content] of Object.entries(DOCUMENTS)) await attachAndWait(store.id, name, content);
      const semantic = await post(`/v1/vector_stores/${store.id}/search`, { query: 'how do I reset my password' });
      expect(semantic.body.data[0].filename, sealing).toBe('passwords.md');
      const exact = await post(`/v1/vector_stores/${store.id}/search`, { query: 'ERR-4412-XQ' });
      expect(exact.body.data[0].filename, sealing).toBe('incident.txt');
      const { rows } = await gateway.platform.db.query(`SELECT text, embedding IS NULL AS sealed_vector FROM ${partitionOf(store.id)} LIMIT 1`);
      expect(rows[0]).toEqual({ text: null, sealed_vector: sealing === 'full' });
    }
  });
});

describe('graphrag', () => {
  it('extracts facts per chunk through the metered chat path and returns them with search results', async () => {
    const store = await createStore({ name: 'Graph', graphrag_enabled: true });
    expect(store.graphrag_enabled).toBe(true);
    const file = await attachAndWait(store.id, 'incident.txt', DOCUMENTS['incident.txt']);
    expect(file.status).toBe('completed');
    const { rows } = await gateway.platform.db.query(`SELECT chunk_index, subject, predicate, object FROM vector_store_facts WHERE vector_store_id = $1`, [store.id]);
    expect(rows.length).toBeGreaterThan(0);
    const charges = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM usage_records WHERE idempotency_key LIKE $1`, [`vsfacts:${store.id}:%`]);
    expect(charges.rows[0].n).toBe(1);
    const found = (await post(`/v1/vector_stores/${store.id}/search`, { query: 'payment worker crashed' })).body.data[0];
    expect(found.facts).toEqual(rows.filter((row) => row.chunk_index === 0).map(({ subject, predicate, object }) => ({ subject, predicate, object })));
    // A store without graphrag returns no facts field.
    const plain = await createStore({ name: 'No graph' });
    await attachAndWait(plain.id, 'incident.txt', DOCUMENTS['incident.txt']);
    expect((await post(`/v1/vector_stores/${plain.id}/search`, { query: 'payment worker crashed' })).body.data[0].facts).toBeUndefined();
  });
});

describe('lifecycle and tenancy', () => {
  it('deletes a store: reads find it gone at once, writes are refused, and its content is removed by a workflow', async () => {
    const store = await createStore({ name: 'Doomed' });
    const file = await attachAndWait(store.id, 'billing.txt', DOCUMENTS['billing.txt']);
    const deleted = await del(`/v1/vector_stores/${store.id}`);
    expect(deleted.body).toEqual({ id: store.id, object: 'vector_store.deleted', deleted: true });
    expectError(await get(`/v1/vector_stores/${store.id}`), 404, 'vector_store_not_found');
    expectError(await post(`/v1/vector_stores/${store.id}/files`, { file_id: file.id }), 409, 'vector_store_unavailable');
    expectError(await post(`/v1/vector_stores/${store.id}`, { name: 'renamed' }), 409, 'vector_store_unavailable');
    expectError(await del(`/v1/vector_stores/${store.id}`), 409, 'vector_store_unavailable');
    await pollUntil(() => findStoreById(gateway.platform.db, store.id), (row) => row?.state === 'deleted', { context: () => 'store deletion' });
    const attached = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM vector_store_files WHERE vector_store_id = $1`, [store.id]);
    expect(attached.rows[0].n).toBe(0);
    const partition = await gateway.platform.db.query(`SELECT to_regclass($1) AS table`, [partitionOf(store.id)]);
    expect(partition.rows[0].table).toBeNull();
    const listed = (await get('/v1/vector_stores?limit=200')).body.data.map((s: { id: string }) => s.id);
    expect(listed).not.toContain(store.id);
  });

  it("answers another developer's store ids with 404", async () => {
    const store = await createStore({ name: 'Mine' });
    const other = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    expectError(await get(`/v1/vector_stores/${store.id}`, {}, other.key), 404, 'vector_store_not_found');
    expectError(await post(`/v1/vector_stores/${store.id}/search`, { query: 'x' }, {}, other.key), 404, 'vector_store_not_found');
    expectError(await del(`/v1/vector_stores/${store.id}`, other.key), 404, 'vector_store_not_found');
    expectError(await get(`/v1/vector_stores/${store.id}/files`, {}, other.key), 404, 'vector_store_not_found');
  });

  it('updates name, metadata and expiry as OpenAI does', async () => {
    const store = await createStore({ name: 'Before' });
    const updated = await client.vectorStores.update(store.id, { name: 'After', metadata: { tier: 'gold' }, expires_after: { anchor: 'last_active_at', days: 7 } });
    expect(updated).toMatchObject({ name: 'After', metadata: { tier: 'gold' }, expires_after: { anchor: 'last_active_at', days: 7 } });
    expect(updated.expires_at).toBeGreaterThan(Date.now() / 1000 + 6 * 86_400);
    expectError(await post(`/v1/vector_stores/${store.id}`, { name: 'x'.repeat(257) }), 400, 'name_too_long', { param: 'name' });
  });
});

describe('migrate', () => {
  it('re-embeds blue-green with a new model, keeps searching through the flip, and reports progress', async () => {
    const store = await createStore({ name: 'Migrating' });
    for (const [name, content] of Object.entries(DOCUMENTS)) await attachAndWait(store.id, name, content);
    const started = await post(`/v1/vector_stores/${store.id}/migrate`, { embedding_model: 'voyage-3-lite' });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    expect(started.body).toMatchObject({ object: 'vector_store.migration', status: 'in_progress', from: { embedding_model: 'text-embedding-3-small', dimensions: 1536 }, to: { embedding_model: 'voyage-3-lite', dimensions: 512 } });
    expect(started.body.id).toMatch(/^vsmig_/);
    // Searches keep answering from the old space until the flip.
    expect((await post(`/v1/vector_stores/${store.id}/search`, { query: 'reset my password' })).body.data[0].filename).toBe('passwords.md');

    const done = await pollUntil(() => get(`/v1/vector_stores/${store.id}/migrations/${started.body.id}`), (res) => res.body.status !== 'in_progress', { context: () => 'migration' });
    expect(done.body).toMatchObject({ status: 'completed', last_error: null });
    expect(done.body.chunks_done).toBe(done.body.chunks_total);
    expect(done.body.chunks_total).toBeGreaterThanOrEqual(4);
    const after = (await get(`/v1/vector_stores/${store.id}`)).body;
    expect(after).toMatchObject({ embedding_model: 'voyage-3-lite', dimensions: 512 });
    expect((await post(`/v1/vector_stores/${store.id}/search`, { query: 'when will I get my refund' })).body.data[0].filename).toBe('billing.txt');
    // After the flip, the workflow's last step retires the old space.
    const spaces = await pollUntil(() => gateway.platform.db.query(`SELECT DISTINCT space, vector_dims(embedding) AS dims FROM ${partitionOf(store.id)}`), (result) => result.rows.length === 1);
    expect(spaces.rows).toEqual([{ space: 2, dims: 512 }]);
    const events = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM outbox_events WHERE type = 'vector_store.migration.completed' AND data->>'migration_id' = $1`, [started.body.id]);
    expect(events.rows[0].n).toBe(1);
    // Files attached after the flip are embedded with the new model.
    await attachAndWait(store.id, 'late.txt', 'A late note about parking permits for the Rotterdam warehouse.');
    expect((await post(`/v1/vector_stores/${store.id}/search`, { query: 'parking permits' })).body.data[0].filename).toBe('late.txt');
  });

  it('leaves the old space serving when the new model fails', async () => {
    const store = await createStore({ name: 'Failing migration' });
    await attachAndWait(store.id, 'billing.txt', DOCUMENTS['billing.txt']);
    await emulated.fault({ provider: 'mistral', fault: { kind: 'status', status: 400 }, times: 1_000 });
    try {
      const started = await post(`/v1/vector_stores/${store.id}/migrate`, { embedding_model: 'mistral-embed' });
      const failed = await pollUntil(() => get(`/v1/vector_stores/${store.id}/migrations/${started.body.id}`), (res) => res.body.status !== 'in_progress', { context: () => 'migration' });
      expect(failed.body.status).toBe('failed');
      expect(failed.body.last_error).toBeTruthy();
    } finally {
      await emulated.clearFaults();
    }
    expect((await get(`/v1/vector_stores/${store.id}`)).body).toMatchObject({ embedding_model: 'text-embedding-3-small', dimensions: 1536 });
    expect((await post(`/v1/vector_stores/${store.id}/search`, { query: 'refunds' })).body.data[0].filename).toBe('billing.txt');
    const spaces = await gateway.platform.db.query(`SELECT DISTINCT space FROM ${partitionOf(store.id)}`);
    expect(spaces.rows).toEqual([{ space: 1 }]);
  });

  it('refuses a bad model, a second migration at once, and unknown migration ids', async () => {
    const store = await createStore({ name: 'Migrate errors' });
    expectError(await post(`/v1/vector_stores/${store.id}/migrate`, {}), 400, 'missing_embedding_model');
    expectError(await post(`/v1/vector_stores/${store.id}/migrate`, { embedding_model: 'gpt-4o' }), 400, 'invalid_embedding_model');
    expectError(await post(`/v1/vector_stores/${store.id}/migrate`, { embedding_model: 'voyage-3-lite', dimensions: 256 }), 400, 'invalid_dimensions');
    expectError(await get(`/v1/vector_stores/${store.id}/migrations/vsmig_nope`), 404, 'migration_not_found');
  });
});

describe('sealed indexes', () => {
  const TOPICS = ['invoice refund billing card payment', 'password reset login security account', 'parcel shipping delivery warehouse courier', 'server crash error incident outage', 'holiday leave vacation payroll employee'];
  const textOf = (i: number) => `${TOPICS[i % TOPICS.length]} note ${i} ${TOPICS[(i * 7) % TOPICS.length]!.split(' ')[i % 5]} item${i % 97}`;

  /** Writes `count` sealed chunks of one completed file straight into the store, as ingest would. */
  async function loadSealedChunks(storeId: string, count: number) {
    const fileId = await upload('bulk.txt', 'bulk');
    const db = gateway.platform.db;
    const store = (await findStoreById(db, storeId))!;
    const keys = (await gateway.platform.vectorStoreKeys.keys(store))!;
    await db.query(
      `INSERT INTO vector_store_files (vector_store_id, file_id, developer_id, payer_account_id, status, chunking, chunk_count)
       VALUES ($1, $2, $3, $3, 'completed', '{"type":"auto","max_chunk_size_tokens":800,"chunk_overlap_tokens":400}', $4)`,
      [storeId, fileId, developer.accountId, count],
    );
    for (let from = 0; from < count; from += 500) {
      const rows = Array.from({ length: Math.min(500, count - from) }, (_, j) => from + j);
      await db.query(
        `INSERT INTO ${partitionOf(storeId)} (vector_store_id, space, file_id, chunk_index, tokens, text_sealed, terms, embedding_sealed)
         SELECT $1, 1, $2, r.i, 10, decode(r.t, 'base64'), r.terms, decode(r.v, 'base64') FROM jsonb_to_recordset($3::jsonb) AS r(i int, t text, terms text[], v text)`,
        [storeId, fileId, JSON.stringify(rows.map((i) => ({
          i,
          t: sealText(keys, textOf(i), textAad(storeId, fileId, i)).toString('base64'),
          terms: blindTerms(keys, textOf(i)),
          v: sealVector(keys, deterministicEmbedding('text-embedding-3-small', textOf(i), 256), vectorAad(storeId, 1, fileId, i)).toString('base64'),
        })))],
      );
    }
    return { store, keys, fileId };
  }

  it('builds IVF lists in the CPU pool and finds what an exact scan finds', async () => {
    const ivf = await createStore({ name: 'IVF', encryption: 'managed', vector_sealing: 'full', vector_index: 'ivf', dimensions: 256 });
    const flat = await createStore({ name: 'Flat', encryption: 'managed', vector_sealing: 'full', vector_index: 'flat', dimensions: 256 });
    const ivfLoaded = await loadSealedChunks(ivf.id, 2_000);
    const flatLoaded = await loadSealedChunks(flat.id, 2_000);
    expect(await rebuildIvf(gateway.platform, ivf.id)).toMatchObject({ rebuilt: true, chunks: 2_000, lists: 15 });
    const unassigned = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM ${partitionOf(ivf.id)} WHERE ivf_list IS NULL`);
    expect(unassigned.rows[0].n).toBe(0);

    let overlap = 0;
    const queries = 20;
    for (let q = 0; q < queries; q++) {
      const vector = deterministicEmbedding('text-embedding-3-small', `${TOPICS[q % 5]} question ${q}`, 256);
      const fromIvf = await nearestByVector(gateway.platform, (await findStoreById(gateway.platform.db, ivf.id))!, ivfLoaded.keys, vector, 10);
      const exact = await nearestByVector(gateway.platform, (await findStoreById(gateway.platform.db, flat.id))!, flatLoaded.keys, vector, 10);
      const exactIndexes = new Set(exact.map((hit) => hit.chunk_index));
      overlap += fromIvf.filter((hit) => exactIndexes.has(hit.chunk_index)).length;
    }
    // recall@10 of the probed lists against the exact scan of the same vectors
    expect(overlap / (queries * 10)).toBeGreaterThanOrEqual(0.9);

    // Through the API: the query is embedded, the lists probed, the text opened.
    const found = await post(`/v1/vector_stores/${ivf.id}/search`, { query: 'server crash error incident outage', max_num_results: 3 });
    expect(found.status).toBe(200);
    expect(found.body.data[0].content[0].text).toContain('server crash');
  });
});

describe('suspension and paging', () => {
  it('suspends a store whose embeddings the wallet cannot pay, and resumes it once the wallet can', async () => {
    const poor = await createDeveloper(gateway.platform, { creditMicros: 0 });
    const asPoor = { Authorization: `Bearer ${poor.key}` };
    const poorPost = (path: string, json: unknown) => call(gateway.baseUrl, path, { method: 'POST', json, headers: asPoor });
    const store = (await poorPost('/v1/vector_stores', { name: 'Unpaid', embedding_model: 'text-embedding-3-small' })).body;
    const form = new FormData();
    form.append('purpose', 'assistants');
    form.append('file', new Blob([DOCUMENTS['billing.txt']]), 'billing.txt');
    const fileId = (await call(gateway.baseUrl, '/v1/files', { method: 'POST', body: form, headers: asPoor })).body.id;
    await poorPost(`/v1/vector_stores/${store.id}/files`, { file_id: fileId });
    const failed = await pollUntil(async () => (await get(`/v1/vector_stores/${store.id}/files/${fileId}`, {}, poor.key)).body, (file) => file.status === 'failed');
    expect(failed.last_error.code).toBe('wallet_empty');
    expect((await get(`/v1/vector_stores/${store.id}`, {}, poor.key)).body.suspended_at).toBeGreaterThan(0);
    expectError(await poorPost(`/v1/vector_stores/${store.id}/files`, { file_id: fileId }), 402, 'vector_store_suspended');

    await creditDeveloperWallet(gateway.platform.db, poor.accountId, 5_000_000, 'test top-up');
    const retried = await poorPost(`/v1/vector_stores/${store.id}/files/${fileId}/retry`, {});
    expect(retried.status).toBe(200);
    expect((await get(`/v1/vector_stores/${store.id}`, {}, poor.key)).body.suspended_at).toBeNull();
    const types = await gateway.platform.db.query(`SELECT type FROM outbox_events WHERE type LIKE 'vector_store.%suspended' OR type = 'vector_store.resumed' ORDER BY created_at`);
    expect(types.rows.map((row) => row.type)).toEqual(['vector_store.suspended', 'vector_store.resumed']);
  });

  it('pages 50 stores by default and at most 200', async () => {
    const many = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    for (let i = 0; i < 55; i++) {
      expect((await call(gateway.baseUrl, '/v1/vector_stores', { method: 'POST', json: { name: `s${i}`, embedding_model: 'voyage-3-lite' }, headers: bearer(many.key) })).status).toBe(200);
    }
    const first = (await get('/v1/vector_stores', {}, many.key)).body;
    expect(first.data).toHaveLength(50);
    expect(first.has_more).toBe(true);
    const rest = (await get(`/v1/vector_stores?after=${first.last_id}`, {}, many.key)).body;
    expect(rest.data).toHaveLength(5);
    expect((await get('/v1/vector_stores?limit=5000', {}, many.key)).body.data).toHaveLength(55);
  });
});

describe('recovery sweep', () => {
  it('restarts an ingest whose job was lost, fails a locked byok one plainly, and finishes a stalled deletion', async () => {
    const db = gateway.platform.db;
    const store = await createStore({ name: 'Lost jobs' });
    const fileId = await upload('billing.txt', DOCUMENTS['billing.txt']);
    // An attach whose enqueue never happened: the row alone, with no progress for a while.
    await db.query(
      `INSERT INTO vector_store_files (vector_store_id, file_id, developer_id, payer_account_id, chunking, updated_at)
       VALUES ($1, $2, $3, $3, '{"type":"auto","max_chunk_size_tokens":800,"chunk_overlap_tokens":400}', now() - interval '1 hour')`,
      [store.id, fileId, developer.accountId],
    );
    const byok = await createStore({ name: 'Lost byok', encryption: 'byok', key: { type: 'passphrase', passphrase: 'a long enough passphrase' } });
    await db.query(
      `INSERT INTO vector_store_files (vector_store_id, file_id, developer_id, payer_account_id, chunking, updated_at)
       VALUES ($1, $2, $3, $3, '{"type":"auto","max_chunk_size_tokens":800,"chunk_overlap_tokens":400}', now() - interval '1 hour')`,
      [byok.id, fileId, developer.accountId],
    );
    const doomed = await createStore({ name: 'Lost deletion' });
    await db.query(`UPDATE vector_stores SET state = 'deleting', updated_at = now() - interval '1 hour' WHERE id = $1`, [doomed.id]);

    const swept = await sweepVectorStores(gateway.platform, 600);
    expect(swept).toMatchObject({ restarted: 1, failed: 1, deletions: 1 });
    expect(await storeFile(store.id, fileId)).toMatchObject({ status: 'completed' });
    expect((await get(`/v1/vector_stores/${byok.id}/files/${fileId}`)).body).toMatchObject({ status: 'failed', last_error: { code: 'server_error' } });
    await pollUntil(() => findStoreById(db, doomed.id), (row) => row?.state === 'deleted', { context: () => 'stalled deletion' });
    // Progressing work is left alone.
    expect(await sweepVectorStores(gateway.platform, 600)).toMatchObject({ restarted: 0, failed: 0 });
  });
});
