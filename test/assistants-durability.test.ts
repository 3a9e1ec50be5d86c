import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmulatedGateway } from './support/emulated-gateway.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, walletBalanceMicros, type TestDeveloper, type TestPlatform } from './support/test-platform.js';
import type { WorkerProcess } from './support/worker-process.js';
import { startWorkerWorld, type WorkerWorld } from './support/worker-world.js';

/**
 * A run whose worker (the real `workers/main.ts`) is killed in the middle of a model call, twice,
 * resumes from the workflow's history on a new worker: one assistant message, each model call
 * billed once, the wallet debited exactly the run's steps.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let worker: WorkerProcess;

let world: WorkerWorld;

beforeAll(async () => {
  world = await startWorkerWorld({ ASSISTANT_HEARTBEAT_TIMEOUT_SECONDS: '3' });
  ({ emulated, gateway, developer, worker } = world);
}, 120_000);

afterAll(() => world?.close());

const post = (path: string, json: unknown) => call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(developer.key) });
const get = (path: string) => call(gateway.baseUrl, path, { headers: bearer(developer.key) });
const TOOL = { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } };

async function killDuringModelCall(): Promise<void> {
  // The emulator answers slowly; the kill lands while the step's chat call is in flight.
  await new Promise((resolve) => setTimeout(resolve, 400));
  await worker.kill('SIGKILL');
  await worker.restart();
}

describe('a run whose worker is killed mid-call', () => {
  it('resumes from history: no message posted twice, no call billed twice', async () => {
    await emulated.fault({ fault: { kind: 'latency', ms: 1_500 }, times: 100_000 });
    const assistant = (await post('/v1/assistants', { model: 'svc:openai/gpt-4o-mini', tools: [TOOL] })).body;
    const thread = (await post('/v1/threads', { messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL look it up' }] })).body;
    const before = await walletBalanceMicros(gateway.platform, developer.accountId);
    const run = (await post(`/v1/threads/${thread.id}/runs`, { assistant_id: assistant.id })).body;
    await killDuringModelCall();

    const waiting = await pollUntil(() => get(`/v1/threads/${thread.id}/runs/${run.id}`), (res) => res.body.status === 'requires_action', { context: () => worker.output().slice(-20).join('\n') });
    const callId = waiting.body.required_action.submit_tool_outputs.tool_calls[0].id;
    expect((await post(`/v1/threads/${thread.id}/runs/${run.id}/submit_tool_outputs`, { tool_outputs: [{ tool_call_id: callId, output: 'found' }] })).status).toBe(200);
    await killDuringModelCall();

    let history = '';
    const done = await pollUntil(
      async () => {
        const events = (await gateway.platform.temporal.client.workflow.getHandle(run.id).fetchHistory()).events ?? [];
        history = events.map((event) => `${event.eventType} ${JSON.stringify(event.activityTaskScheduledEventAttributes?.activityType?.name ?? event.activityTaskFailedEventAttributes?.failure?.message ?? event.activityTaskTimedOutEventAttributes?.failure?.message ?? '')}`).join('\n');
        return get(`/v1/threads/${thread.id}/runs/${run.id}`);
      },
      (res) => ['completed', 'failed'].includes(res.body.status),
      { context: () => history },
    );
    expect(done.body.status).toBe('completed');
    await emulated.clearFaults();

    const messages = (await get(`/v1/threads/${thread.id}/messages?order=asc`)).body.data;
    expect(messages.map((message: { role: string }) => message.role)).toEqual(['user', 'assistant']);
    const { rows: charges } = await gateway.platform.db.query(`SELECT idempotency_key, count(*)::int AS n FROM usage_records WHERE idempotency_key LIKE $1 GROUP BY 1 ORDER BY 1`, [`run:${run.id}:%`]);
    // One charge per model call (the key carries the step, then completeChat's cascade position), none twice.
    expect(charges.map((charge) => charge.idempotency_key.split(':')[2])).toEqual(['0', '1']);
    expect(charges.every((charge) => charge.n === 1)).toBe(true);
    const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS steps, sum(cost_micros)::bigint AS cost FROM run_steps WHERE run_id = $1`, [run.id]);
    expect(rows[0].steps).toBe(2);
    expect(before - (await walletBalanceMicros(gateway.platform, developer.accountId))).toBe(Number(rows[0].cost));
  }, 180_000);
});
