import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTransaction } from '../shared/db/pool.js';
import { recordEvent, type RecordedEvent } from '../shared/events/outbox.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';
import { receiverEnv, startWebhookReceiver, verifySvcSignature, type WebhookReceiver } from './support/webhook-receiver.js';
import { startWorkerProcess, type WorkerProcess } from './support/worker-process.js';

/**
 * The worker is killed with SIGKILL while deliveries are pending (queued first attempts, attempts
 * in flight, retry workflows waiting on their timers, outbox rows not yet relayed), and again just
 * after a restart while the relay catches up. Afterwards every event has arrived, none is lost,
 * and a repeated request always repeats the same event, byte for byte.
 */
let receiver: WebhookReceiver;
let gateway: TestPlatform;
let worker: WorkerProcess;
let developer: TestDeveloper;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  gateway = await startTestPlatform({
    ...receiverEnv(receiver),
    WEBHOOK_RETRY_SCHEDULE_SECONDS: '2,2,2,2,2',
    WEBHOOK_DELIVERY_CONCURRENCY: '4',
    // A dead worker's jobs and lost enqueues are picked up again within seconds, not minutes.
    WEBHOOK_JOB_LOCK_SECONDS: '2',
    WEBHOOK_REQUEUE_AFTER_SECONDS: '3',
  });
  developer = await createDeveloper(gateway.platform, { scopes: ['api:webhooks'] });
  worker = await startWorkerProcess(gateway.env);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await gateway?.close();
  await receiver?.close();
});

async function recordEvents(from: number, count: number): Promise<RecordedEvent[]> {
  const events: RecordedEvent[] = [];
  for (let start = from; start < from + count; start += 10) {
    events.push(
      ...(await withTransaction(gateway.platform.db, async (tx) => {
        const batch = [];
        for (let n = start; n < Math.min(start + 10, from + count); n++) batch.push(await recordEvent(tx, developer.accountId, 'customer.created', { n }));
        return batch;
      })),
    );
  }
  return events;
}

async function unfinished(): Promise<number> {
  const { rows } = await gateway.platform.db.query(
    `SELECT (SELECT count(*) FROM outbox_events WHERE developer_id = $1 AND relayed_at IS NULL)
          + (SELECT count(*) FROM webhook_deliveries WHERE developer_id = $1 AND status <> 'succeeded') AS n`,
    [developer.accountId],
  );
  return Number(rows[0].n);
}

describe('a worker killed with SIGKILL while deliveries are pending', () => {
  it('delivers every event after restarts, none lost, duplicates only of the same event', { timeout: 240_000 }, async () => {
    const registered = await call(gateway.baseUrl, '/v1/webhooks', {
      method: 'POST',
      headers: bearer(developer.key),
      json: { url: `${receiver.origin}/durable`, events: ['customer.created'] },
    });
    expect(registered.status).toBe(200);
    const secret: string = registered.body.secret;

    // Slow enough that work is still pending when the kill comes; every tenth event fails its
    // first attempt, so retry workflows are waiting on timers too.
    const firstSeen = new Set<string>();
    receiver.on('/durable', async (request) => {
      await new Promise((resolve) => setTimeout(resolve, 40));
      const body = JSON.parse(request.rawBody);
      const fresh = !firstSeen.has(body.id);
      firstSeen.add(body.id);
      return fresh && body.data.n % 10 === 0 ? 500 : 200;
    });

    const events = await recordEvents(0, 200);
    await receiver.waitFor((requests) => requests.length >= 30);
    await worker.kill('SIGKILL');
    expect(await unfinished()).toBeGreaterThan(0);

    // While no worker runs, more events commit.
    events.push(...(await recordEvents(200, 100)));

    // Killed again right after it starts polling, while the relay and the first attempts catch up.
    await worker.restart();
    const seenBefore = receiver.requests.length;
    await receiver.waitFor((requests) => requests.length >= seenBefore + 5);
    await worker.kill('SIGKILL');
    await worker.restart();

    const expected = new Set(events.map((event) => event.id));
    const delivered = () => new Set(receiver.requests.filter((request) => request.answered === 200).map((request) => JSON.parse(request.rawBody).id as string));
    await receiver.waitFor(() => [...expected].every((id) => delivered().has(id)), 180_000);

    // None lost, nothing foreign, and every repeat is the same event with the same body.
    expect(delivered()).toEqual(expected);
    const bodies = new Map<string, Set<string>>();
    for (const request of receiver.requests) {
      const id = JSON.parse(request.rawBody).id as string;
      expect(expected.has(id)).toBe(true);
      expect(request.headers['x-svc-event-id']).toBe(id);
      expect(verifySvcSignature(request.rawBody, request.headers['x-svc-signature'] as string, secret)).toBe(true);
      bodies.set(id, (bodies.get(id) ?? new Set()).add(request.rawBody));
    }
    expect([...bodies.values()].every((set) => set.size === 1)).toBe(true);

    // One delivery per event, each of them succeeded; the failed first attempts went through retries.
    const deadline = Date.now() + 60_000;
    while ((await unfinished()) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    const { rows } = await gateway.platform.db.query(
      `SELECT count(*)::int AS deliveries, count(DISTINCT event_id)::int AS events, count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
              count(*) FILTER (WHERE attempt_count > 1)::int AS retried
       FROM webhook_deliveries WHERE developer_id = $1`,
      [developer.accountId],
    );
    expect(rows[0]).toMatchObject({ deliveries: 300, events: 300, succeeded: 300 });
    // (Fewer than 30: a first attempt answered 500 just before a kill is repeated as a first attempt, which then succeeds.)
    expect(rows[0].retried).toBeGreaterThan(0);
  });
});
