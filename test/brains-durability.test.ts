import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../shared/brains/repository.js';
import { pollUntil } from './support/poll.js';
import { bearer, call } from './support/test-platform.js';
import { startWorkerWorld, type WorkerWorld } from './support/worker-world.js';

/**
 * A brain's reindex survives SIGKILL: the real worker process is killed while chunks are being
 * embedded into the new space, then started again. The job completes with every chunk row in the
 * new space exactly once, each embedding batch charged once, and one swap.
 */
let world: WorkerWorld;

beforeAll(async () => {
  world = await startWorkerWorld({
    BRAIN_REINDEX_BATCH: '2',
    // A killed worker's activity is taken over within seconds.
    BRAIN_REINDEX_HEARTBEAT_TIMEOUT_SECONDS: '3',
  });
}, 120_000);

afterAll(() => world?.close());

const send = (method: string, path: string, json?: unknown) => call(world.gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers: bearer(world.developer.key) });

describe('a worker killed mid-reindex', () => {
  it('loses no chunk, charges each batch once and swaps once', async () => {
    const { gateway, emulated, worker } = world;
    const brain = (await send('POST', '/v1/brains', { name: 'Durable brain' })).body.id as string;
    for (let i = 0; i < 24; i++) expect((await send('PUT', `/v1/brains/${brain}/entries`, { body: `Fact ${i}: the release train leaves at ${i}:00.` })).status).toBe(200);
    await emulated.fault({ fault: { kind: 'latency', ms: 150 }, times: 100_000 });

    const job = (await send('POST', `/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large', confirm: true })).body;
    expect(job.status).toBe('pending');
    const inNewSpace = async () => (await gateway.platform.db.query(`SELECT count(*)::int AS n FROM ${partitionOf(brain)} WHERE space = 2`)).rows[0].n as number;
    await pollUntil(inNewSpace, (n) => n > 0, { context: () => worker.output().slice(-20).join('\n') });
    await worker.kill('SIGKILL');
    expect(await inNewSpace()).toBeLessThan(24);
    await worker.restart();

    const done = await pollUntil(() => send('GET', `/v1/brains/${brain}/reindex/${job.id}`), (res) => res.body.status !== 'in_progress' && res.body.status !== 'pending', {
      timeoutMs: 90_000,
      context: () => worker.output().slice(-20).join('\n'),
    });
    await emulated.clearFaults();
    expect(done.body).toMatchObject({ status: 'completed', chunks_done: 24, chunks_total: 24 });
    const rows = await gateway.platform.db.query(
      `SELECT count(*)::int AS n, count(DISTINCT (version_id, chunk_index))::int AS distinct_rows, count(embedding)::int AS embedded FROM ${partitionOf(brain)} WHERE space = 2`,
    );
    expect(rows.rows[0]).toEqual({ n: 24, distinct_rows: 24, embedded: 24 });
    const charges = await gateway.platform.db.query(`SELECT idempotency_key, count(*)::int AS n FROM usage_records WHERE idempotency_key LIKE $1 GROUP BY 1`, [`brain-reindex:${job.id}:%`]);
    expect(charges.rows.length).toBe(12);
    expect(charges.rows.filter((row) => row.n !== 1)).toEqual([]);
    const swaps = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM outbox_events WHERE type = 'brain.reindex.completed' AND data->>'job_id' = $1`, [job.id]);
    expect(swaps.rows[0].n).toBe(1);
    expect((await send('GET', `/v1/brains/${brain}`)).body).toMatchObject({ embedding_model: 'openai/text-embedding-3-large', embedding_dims: 3072 });
  }, 240_000);
});
