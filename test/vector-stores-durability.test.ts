import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../shared/vector-stores/repository.js';
import type { EmulatedGateway } from './support/emulated-gateway.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, type TestDeveloper, type TestPlatform } from './support/test-platform.js';
import type { WorkerProcess } from './support/worker-process.js';
import { startWorkerWorld, type WorkerWorld } from './support/worker-world.js';

/**
 * Nothing lost, nothing doubled under SIGKILL: the real worker process (`workers/main.ts`, its
 * BullMQ ingest stages and its Temporal worker) is killed while files are being embedded and
 * while a migration re-embeds, then started again. Every file completes with each chunk once,
 * every embedding batch is charged once, and the migration flips with every chunk re-embedded.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let worker: WorkerProcess;

let world: WorkerWorld;

beforeAll(async () => {
  world = await startWorkerWorld({
    VECTOR_STORE_EMBED_BATCH: '2',
    VECTOR_STORE_INGEST_CONCURRENCY: '2',
    // A killed worker's stages and activities are taken over within seconds.
    VECTOR_STORE_JOB_LOCK_SECONDS: '3',
    VECTOR_STORE_HEARTBEAT_TIMEOUT_SECONDS: '3',
  });
  ({ emulated, gateway, developer, worker } = world);
}, 120_000);

afterAll(() => world?.close());

const post = (path: string, json: unknown) => call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(developer.key) });
const get = (path: string) => call(gateway.baseUrl, path, { headers: bearer(developer.key) });

async function uploadText(name: string, text: string): Promise<string> {
  const form = new FormData();
  form.append('purpose', 'assistants');
  form.append('file', new Blob([text]), name);
  const res = await call(gateway.baseUrl, '/v1/files', { method: 'POST', body: form, headers: bearer(developer.key) });
  expect(res.status).toBe(200);
  return res.body.id;
}

const SENTENCES = ['Invoices are issued monthly.', 'Passwords reset by email.', 'Parcels ship from Rotterdam.', 'Errors are logged with codes.', 'Refunds take ten days.'];
const documentOf = (seed: number) => Array.from({ length: 160 }, (_, i) => `${SENTENCES[(i + seed) % 5]} Section ${seed}-${i}.`).join(' ');
const STATIC_SMALL = { type: 'static', static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 20 } };

async function chargesOf(prefix: string): Promise<{ key: string; n: number }[]> {
  const { rows } = await gateway.platform.db.query(`SELECT idempotency_key AS key, count(*)::int AS n FROM usage_records WHERE idempotency_key LIKE $1 GROUP BY 1`, [`${prefix}%`]);
  return rows;
}

describe('a worker killed mid-ingest and mid-migrate', () => {
  it('completes every file with each chunk once and each embedding batch charged once', async () => {
    await emulated.fault({ fault: { kind: 'latency', ms: 120 }, times: 100_000 });
    const store = (await post('/v1/vector_stores', { name: 'Durable', embedding_model: 'text-embedding-3-small' })).body;
    const fileIds = [];
    for (let i = 0; i < 3; i++) fileIds.push(await uploadText(`doc${i}.txt`, documentOf(i)));
    for (const fileId of fileIds) expect((await post(`/v1/vector_stores/${store.id}/files`, { file_id: fileId, chunking_strategy: STATIC_SMALL })).status).toBe(200);

    // Kill while embeddings are being written.
    await pollUntil(
      async () => (await gateway.platform.db.query(`SELECT count(*)::int AS n FROM ${partitionOf(store.id)} WHERE embedding IS NOT NULL`)).rows[0].n,
      (n) => n > 0,
      { context: () => worker.output().slice(-20).join('\n') },
    );
    await worker.kill('SIGKILL');
    await worker.restart();

    const files = await pollUntil(
      async () => (await get(`/v1/vector_stores/${store.id}/files?limit=10`)).body.data,
      (data: { status: string }[]) => data.length === 3 && data.every((file) => file.status !== 'in_progress'),
      { context: () => worker.output().slice(-20).join('\n') },
    );
    expect(files.map((file: { status: string }) => file.status)).toEqual(['completed', 'completed', 'completed']);
    const { rows } = await gateway.platform.db.query(
      `SELECT f.file_id, f.chunk_count, count(c.*)::int AS chunks, count(DISTINCT c.chunk_index)::int AS distinct_chunks, count(c.embedding)::int AS embedded
       FROM vector_store_files f LEFT JOIN ${partitionOf(store.id)} c ON c.file_id = f.file_id WHERE f.vector_store_id = $1 GROUP BY 1, 2`,
      [store.id],
    );
    for (const row of rows) {
      expect(row.chunks).toBeGreaterThan(5);
      expect(row).toMatchObject({ chunk_count: row.chunks, distinct_chunks: row.chunks, embedded: row.chunks });
    }
    const charges = await chargesOf(`vs:${store.id}:`);
    expect(charges.length).toBeGreaterThan(0);
    expect(charges.filter((charge) => charge.n !== 1)).toEqual([]);

    // Mid-migrate: the re-embedding activity dies with the worker and resumes on the new one.
    const migration = (await post(`/v1/vector_stores/${store.id}/migrate`, { embedding_model: 'voyage-3-lite' })).body;
    expect(migration.status).toBe('in_progress');
    await pollUntil(
      async () => (await gateway.platform.db.query(`SELECT count(*)::int AS n FROM ${partitionOf(store.id)} WHERE space = 2 AND embedding IS NOT NULL`)).rows[0].n,
      (n) => n > 0,
      { context: () => worker.output().slice(-20).join('\n') },
    );
    await worker.kill('SIGKILL');
    await worker.restart();
    const done = await pollUntil(() => get(`/v1/vector_stores/${store.id}/migrations/${migration.id}`), (res) => res.body.status !== 'in_progress', {
      context: () => worker.output().slice(-20).join('\n'),
    });
    expect(done.body).toMatchObject({ status: 'completed' });
    expect(done.body.chunks_done).toBe(done.body.chunks_total);
    // After the flip, the workflow's last step retires the old space.
    const spaces = await pollUntil(
      () => gateway.platform.db.query(`SELECT space, count(*)::int AS n, count(embedding)::int AS embedded FROM ${partitionOf(store.id)} GROUP BY space`),
      (result) => result.rows.length === 1,
    );
    expect(spaces.rows).toEqual([{ space: 2, n: rows.reduce((sum, row) => sum + row.chunks, 0), embedded: rows.reduce((sum, row) => sum + row.chunks, 0) }]);
    const migrationCharges = await chargesOf(`vsmig:${migration.id}:`);
    expect(migrationCharges.filter((charge) => charge.n !== 1)).toEqual([]);
    await emulated.clearFaults();
    const found = await post(`/v1/vector_stores/${store.id}/search`, { query: 'how long do refunds take' });
    expect(found.body.data[0].content[0].text).toContain('Refunds take ten days');
  }, 240_000);
});
