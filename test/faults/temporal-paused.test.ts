import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getChannelzHandlers } from '@grpc/grpc-js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort, startTemporalDevServer, stopChild, type TemporalDevServer } from '../../scripts/lib/local-services.js';
import { chatLine, jsonl, uploadFile } from '../support/batch-helpers.js';
import { expectError } from '../support/expect-error.js';
import { signUp, startHiveWorld, type HiveOwner, type HiveWorld } from '../support/hive-world.js';
import { pollUntil } from '../support/poll.js';
import { bearer, call, createDeveloper, type TestDeveloper } from '../support/test-platform.js';

/**
 * A Temporal that accepts connections and answers nothing (paused with SIGSTOP here; an overloaded
 * or partitioned server alike) must not hold a request: every call made on a request's behalf has
 * a deadline (TEMPORAL_CALL_DEADLINE_MS, shared/platform/temporal.ts), so a route that needs
 * Temporal answers 503 with Retry-After, and one that can do without it answers. Without the
 * deadline each of these requests waits until this test's timeout. A route that waits for a
 * workflow's result gives its long poll up when it stops waiting (workflowResultBy), rather than
 * leaving it on Temporal until the workflow ends. No worker polls the task queue here, so no
 * workflow ever ends. The gateway and the hive use a Temporal dev server of this file's own.
 */
let temporal: TemporalDevServer;
let dir: string;
let world: HiveWorld;
let developer: TestDeveloper;
let owner: HiveOwner;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'svc-temporal-paused-'));
  temporal = await startTemporalDevServer({ port: await freePort(), logFile: path.join(dir, 'temporal.log') });
  world = await startHiveWorld({ TEMPORAL_ADDRESS: temporal.address });
  developer = await createDeveloper(world.emulated.gateway.platform);
  owner = await signUp(world, 'paused');
});

afterAll(async () => {
  temporal?.process.kill('SIGCONT');
  await world?.close();
  if (temporal) await stopChild(temporal.process);
  rmSync(dir, { recursive: true, force: true });
});

const gateway = () => world.emulated.gateway;
const post = (route: string, json: unknown) => call(gateway().baseUrl, route, { method: 'POST', json, headers: bearer(developer.key) });

/** The gRPC calls this process has open to `address`: started, less those that ended (grpc-js's channelz counters). */
function callsInFlight(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    getChannelzHandlers().GetTopChannels({ request: { start_channel_id: 0, max_results: 0 } } as never, (error, response) => {
      if (error || !response) return reject(error ?? new Error('no channelz answer'));
      const channels = (response.channel ?? []).filter((channel) => channel.data?.target?.endsWith(address));
      if (channels.length === 0) return reject(new Error(`no channel to ${address}`));
      resolve(channels.reduce((open, { data }) => open + Number(data!.calls_started) - Number(data!.calls_succeeded) - Number(data!.calls_failed), 0));
    });
  });
}

it('leaves no poll on Temporal behind when a route stops waiting for its workflow', async () => {
  const sweep = await world.post('/v1/admin/retention', owner.token, { wait_seconds: 1 });
  expect(sweep.status, sweep.text).toBe(202);
  expect(sweep.body).toMatchObject({ object: 'compliance_job', status: 'running' });
  expect(await callsInFlight(temporal.address)).toBe(0);
});

it('answers 503 with Retry-After, or keeps the work for its sweep, while Temporal is paused, and serves again once it answers', async () => {
  const brain = await post('/v1/brains', { name: 'paused temporal' });
  expect(brain.status, brain.text).toBe(200);
  const inputFileId = await uploadFile(gateway(), developer.key, jsonl([chatLine('line-1')]));
  const observe = () => post(`/v1/brains/${brain.body.id}/observe`, { transcript: 'user: The build server is Jenkins.' });

  temporal.process.kill('SIGSTOP');
  const observed = await observe();
  expectError(observed, 503, 'service_unavailable');
  expect(observed.body.error.message).toMatch(/^Temporal is unavailable/);
  expect(observed.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);

  // A hive job is committed before its workflow starts: it is answered as it stands (202), and the
  // worker's start sweep starts it once Temporal answers.
  const sweep = await world.post('/v1/admin/retention', owner.token, { wait_seconds: 5 });
  expect(sweep.status, sweep.text).toBe(202);
  expect(sweep.body).toMatchObject({ object: 'compliance_job', status: 'running' });
  const { rows: jobs } = await world.hive.db.query<{ workflow_started: boolean }>('SELECT workflow_started FROM hive.compliance_jobs WHERE id = $1', [sweep.body.id]);
  expect(jobs).toEqual([{ workflow_started: false }]);

  // A batch is kept without its workflow, which the worker's recovery sweep starts later.
  const batch = await post('/v1/batches', { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
  expect(batch.status, batch.text).toBe(200);
  const { rows } = await gateway().platform.db.query<{ workflow_started: boolean }>('SELECT workflow_started FROM batches WHERE id = $1', [batch.body.id]);
  expect(rows).toEqual([{ workflow_started: false }]);

  temporal.process.kill('SIGCONT');
  const again = await pollUntil(observe, (response) => response.status !== 503, { timeoutMs: 60_000 });
  expect(again.status, again.text).toBe(202);
  expect(again.body).toMatchObject({ object: 'brain.observe', status: 'learning' });
});
