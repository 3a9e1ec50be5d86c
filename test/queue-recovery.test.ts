import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SWEEP_QUEUE } from '../shared/vector-stores/sweep.js';
import { pollUntil } from './support/poll.js';
import { bearer, call } from './support/test-platform.js';
import { startWorkerWorld, type WorkerWorld } from './support/worker-world.js';

/**
 * Redis losing its data (restarted empty, a failover behind its last writes) loses BullMQ's queued
 * jobs and job schedulers. The worker rebuilds them from PostgreSQL (workers/queue-recovery.ts):
 * at start and while it runs. Here the loss is this platform's keys deleted from the shared Redis,
 * which is all a restart-empty does to one platform.
 */
let world: WorkerWorld;

beforeAll(async () => {
  // A stage untouched for two seconds is taken for lost; the regular sweep would wait ten minutes.
  world = await startWorkerWorld({ VECTOR_STORE_JOB_LOCK_SECONDS: '2', WEBHOOK_JOB_LOCK_SECONDS: '2' });
}, 240_000);
afterAll(async () => {
  await world?.close();
});

const api = (path: string, init: RequestInit & { json?: unknown } = {}) =>
  call(world.gateway.baseUrl, path, { ...init, headers: { ...bearer(world.developer.key), ...init.headers } });

async function upload(name: string): Promise<string> {
  const form = new FormData();
  form.set('purpose', 'assistants');
  form.set('file', new Blob([`${name}: the refund window is thirty days from delivery.\n\nShipping is free above fifty euros.`]), name);
  const { status, body } = await api('/v1/files', { method: 'POST', body: form });
  expect(status, JSON.stringify(body)).toBe(200);
  return body.id as string;
}

async function createStore(): Promise<string> {
  const { status, body } = await api('/v1/vector_stores', { method: 'POST', json: { name: 'recovery', embedding_model: 'text-embedding-3-small' } });
  expect(status, JSON.stringify(body)).toBe(200);
  return body.id as string;
}

const fileStatus = async (storeId: string, fileId: string) => (await api(`/v1/vector_stores/${storeId}/files/${fileId}`)).body.status as string;

async function loseRedisData(): Promise<number> {
  const { redis, config } = world.gateway.platform;
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${config.REDIS_KEY_PREFIX}:*`, 'COUNT', 1_000);
    if (keys.length) deleted += await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  return deleted;
}

const schedulers = () => world.gateway.platform.queues.queue(SWEEP_QUEUE).getJobSchedulers();

describe('queues rebuilt from PostgreSQL after Redis loses its data', () => {
  it('while the worker runs: the schedulers come back and an ingest whose job was lost completes', async () => {
    const storeId = await createStore();
    expect(await schedulers()).toHaveLength(1);
    // An attach whose queued parse job went with Redis: the row alone, last touched ten seconds ago.
    const fileId = await upload('lost-while-running.txt');
    await world.gateway.platform.db.query(
      `INSERT INTO vector_store_files (vector_store_id, file_id, developer_id, payer_account_id, chunking, updated_at)
       VALUES ($1, $2, $3, $3, '{"type":"auto","max_chunk_size_tokens":800,"chunk_overlap_tokens":400}', now() - interval '10 seconds')`,
      [storeId, fileId, world.developer.accountId],
    );
    expect(await loseRedisData()).toBeGreaterThan(0);
    expect(await schedulers()).toHaveLength(0);

    await pollUntil(() => fileStatus(storeId, fileId), (status) => status === 'completed', { timeoutMs: 60_000, context: () => world.worker.output().slice(-20).join('\n') });
    expect(await schedulers()).toHaveLength(1);
    expect(world.worker.output().some((line) => line.includes('queued work recovered from PostgreSQL'))).toBe(true);
  });

  it('while no worker runs: a queued ingest lost with Redis completes once a worker starts', async () => {
    await world.worker.stop();
    const storeId = await createStore();
    const fileId = await upload('lost-while-stopped.txt');
    const attached = await api(`/v1/vector_stores/${storeId}/files`, { method: 'POST', json: { file_id: fileId } });
    expect(attached.status, attached.text).toBe(200);
    expect(await fileStatus(storeId, fileId)).toBe('in_progress');
    await loseRedisData();

    await world.worker.restart();
    await pollUntil(() => fileStatus(storeId, fileId), (status) => status === 'completed', { timeoutMs: 60_000, context: () => world.worker.output().slice(-20).join('\n') });
    const { rows } = await world.gateway.platform.db.query(`SELECT count(*)::int AS n FROM vector_store_files WHERE vector_store_id = $1 AND status = 'completed'`, [storeId]);
    expect(rows[0].n).toBe(1);
  }, 240_000);
});
