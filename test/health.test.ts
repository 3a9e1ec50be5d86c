import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toServiceError } from '../api/middleware/errors.js';
import { bundleWorkflows, createTemporalWorker } from '../workers/temporal-worker.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestPlatform } from './support/test-platform.js';
import { pollUntil } from './support/poll.js';

let gateway: TestPlatform;
beforeAll(async () => {
  gateway = await startTestPlatform();
});
afterAll(() => gateway?.close());

describe('GET /v1/health', () => {
  it('reports PostgreSQL, Redis and Temporal reachable, and no worker before one polls', async () => {
    const response = await call(gateway.baseUrl, '/v1/health');
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const { checks } = response.body;
    expect(checks.postgres.ok).toBe(true);
    expect(checks.redis.ok).toBe(true);
    expect(checks.temporal).toMatchObject({ ok: true, address: gateway.config.temporalAddress, namespace: 'default' });
    expect(checks.worker).toMatchObject({ ok: false, pollers: 0, task_queue: gateway.config.TEMPORAL_TASK_QUEUE });
    expect(response.body.status).toBe('degraded');
  });

  it('is all green once a real worker polls the task queue', async () => {
    const bundle = await bundleWorkflows();
    const { worker, connection } = await createTemporalWorker(gateway.platform, { bundle });
    const running = worker.run();
    try {
      const report = await pollHealth(worker, (body) => body.checks.worker.ok);
      expect(report.status).toBe('ok');
      expect(report.checks.worker.pollers).toBeGreaterThanOrEqual(1);
      for (const check of Object.values(report.checks) as { ok: boolean }[]) expect(check.ok).toBe(true);
    } finally {
      worker.shutdown();
      await running;
      await connection.close();
    }
  });
});

describe('GET /v1/health when backing services are away', () => {
  let broken: TestPlatform;
  beforeAll(async () => {
    // Nothing listens on port 1: Redis and Temporal are unreachable for this platform only.
    broken = await startTestPlatform({ REDIS_URL: 'redis://127.0.0.1:1', TEMPORAL_ADDRESS: '127.0.0.1:1' });
  });
  afterAll(() => broken?.close());

  it('answers 503 for a load balancer to drain the replica, naming what is down; liveness still 200', async () => {
    const response = await call(broken.baseUrl, '/v1/health');
    expect(response.status).toBe(503);
    expect(response.body.status).toBe('unavailable');
    expect(response.body.checks.postgres.ok).toBe(true);
    expect(response.body.checks.redis).toMatchObject({ ok: false, error: expect.any(String) });
    expect(response.body.checks.temporal).toMatchObject({ ok: false, error: expect.any(String) });
    expect(response.body.checks.worker.ok).toBe(false);
    const live = await call(broken.baseUrl, '/v1/health/live');
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'alive' });
  });

  it('answers a call that needs Redis 503 naming it, with Retry-After; the rate limiters fail closed; public documents still serve', async () => {
    const developer = await createDeveloper(broken.platform);
    const chat = await call(broken.baseUrl, '/v1/chat/completions', { method: 'POST', json: { model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, headers: bearer(developer.key) });
    expect(chat.status, chat.text).toBe(503);
    expect(chat.body.error).toMatchObject({ type: 'api_error', code: 'service_unavailable', message: expect.stringMatching(/^Redis is unavailable/) });
    expect(chat.headers.get('retry-after')).toBe('1');
    // Every keyed request passes the per-key rate limiter, which counts in Redis: without it, refused rather than unmetered.
    expect((await call(broken.baseUrl, '/v1/models', { headers: bearer(developer.key) })).body.error.code).toBe('service_unavailable');
    expect((await call(broken.baseUrl, '/v1/compatibility')).status).toBe(200);
    expect((await call(broken.baseUrl, '/v1/openapi.json')).status).toBe(200);
  });

  it('maps a workflow start against an unreachable Temporal to 503 naming it', async () => {
    const { client } = broken.platform.temporal;
    const error = await client
      .withDeadline(Date.now() + 3_000, () => client.workflow.start('hiveAdminChangeWorkflow', { taskQueue: 'nowhere', workflowId: 'probe-temporal-away', args: [] }))
      .then(() => undefined, (failure: unknown) => failure);
    expect(toServiceError(error)).toMatchObject({ status: 503, code: 'service_unavailable', message: expect.stringMatching(/^Temporal is unavailable/), retryAfterSeconds: 1 });
  });
});

/** Polls health until `ready` holds: a worker's first poll reaches the server shortly after run(). */
function pollHealth(worker: Worker, ready: (body: any) => boolean): Promise<any> {
  const read = async () => {
    if (worker.getState() === 'FAILED') throw new Error('worker failed');
    return (await call(gateway.baseUrl, '/v1/health')).body;
  };
  return pollUntil(read, ready, { timeoutMs: 20_000, everyMs: 200 });
}
