import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../shared/brains/repository.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, createDeveloper, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Forget (dry run, preview token, stale previews, erasure through history) and reindex (the
 * estimate, the job, the swap refusing a write that landed mid-job, rollback, the prior space
 * dropped when the window closes) against the real services. The rollback window is ten seconds
 * here so its timer fires within the test.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let other: TestDeveloper;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({ BRAIN_REINDEX_ROLLBACK_SECONDS: '10' }, 50_000_000));
  other = await createDeveloper(gateway.platform, { creditMicros: 5_000_000, scopes: ['admin'] });
  workers = await startInProcessWorkers(gateway.platform);
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const send = (method: string, path: string, json?: unknown, key = developer.key) => call(gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers: bearer(key) });
const post = (path: string, json: unknown, key?: string) => send('POST', path, json, key);
const get = (path: string, key?: string) => send('GET', path, undefined, key);
const db = () => gateway.platform.db;

async function newBrain(body: Record<string, unknown> = {}): Promise<string> {
  const created = await post('/v1/brains', { name: `brain ${Math.random()}`, ...body });
  expect(created.status).toBe(200);
  return created.body.id;
}

async function write(brainId: string, entry: Record<string, unknown>): Promise<string> {
  const written = await send('PUT', `/v1/brains/${brainId}/entries`, entry);
  expect(written.status, JSON.stringify(written.body)).toBe(200);
  return written.body.entry_id;
}

const hitsOf = async (brainId: string, body: Record<string, unknown>) => (await post(`/v1/brains/${brainId}/recall`, { top_k: 20, ...body })).body.data as { entry_id: string; content: string }[];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('forget', () => {
  it('previews a scope and its descendants, refuses a stale preview, then erases every version', async () => {
    const brain = await newBrain();
    await write(brain, { entry_id: 'team', body: 'The team meets on Mondays.', scope: '/team' });
    await write(brain, { entry_id: 'api', body: 'The API team owns the gateway.', scope: '/team/api' });
    await write(brain, { entry_id: 'deep', body: 'Gateway deploys need two approvals.', scope: '/team/api/deploys' });
    await write(brain, { entry_id: 'other', body: 'The other team meets on Fridays.', scope: '/teams' });
    await write(brain, { entry_id: 'packed', body: 'A pack says the team meets daily.', scope: '/team' });
    // A pack's row (origin reference) is never forgotten; packs arrive with a later issue, so it is marked here.
    await db().query(`UPDATE brain_entries SET origin = 'reference' WHERE brain_id = $1 AND entry_id = 'packed'`, [brain]);
    await write(brain, { entry_id: 'api', body: 'The API team owns the gateway and the CLI.', scope: '/team/api' });
    await sleep(20);
    const before = new Date().toISOString();
    await sleep(20);

    const asOfBefore = () => hitsOf(brain, { query: 'who owns the gateway', scope: '/team/api/deploys', as_of: before });
    expect((await asOfBefore()).map((hit) => hit.entry_id)).toContain('api');

    const preview = await post(`/v1/brains/${brain}/forget`, { scope: '/team', dry_run: true });
    expect(preview.body).toMatchObject({ object: 'brain.forget', dry_run: true, would_delete: { native: 3 }, would_skip: { reference: 1 } });
    expect(preview.body.preview_token).toMatch(/^fpv_/);
    expect((await post(`/v1/brains/${brain}/forget`, { scope: '/team', dry_run: true })).body.preview_token).toBe(preview.body.preview_token);

    // A write into the scope since the preview makes it stale: nothing is erased.
    await write(brain, { entry_id: 'late', body: 'The team lunch is on Thursdays.', scope: '/team/api' });
    expectError(await post(`/v1/brains/${brain}/forget`, { scope: '/team', preview_token: preview.body.preview_token }), 409, 'preview_stale');
    expect((await get(`/v1/brains/${brain}/entries?limit=500`)).body.data).toHaveLength(6);

    const fresh = await post(`/v1/brains/${brain}/forget`, { scope: '/team', dry_run: true });
    expect(fresh.body.would_delete).toEqual({ native: 4 });
    const erased = await post(`/v1/brains/${brain}/forget`, { scope: '/team', preview_token: fresh.body.preview_token });
    expect(erased.body).toEqual({ object: 'brain.forget', dry_run: false, deleted: { native: 4 }, skipped: { reference: 1 } });

    const left = (await get(`/v1/brains/${brain}/entries?limit=500`)).body.data.map((entry: { entry_id: string }) => entry.entry_id).sort();
    expect(left).toEqual(['other', 'packed']);
    // Erased through history: recall as of before the forget does not bring it back.
    const then = (await asOfBefore()).map((hit) => hit.entry_id);
    expect(then.filter((id) => ['team', 'api', 'deep'].includes(id))).toEqual([]);
    const versions = await db().query(`SELECT count(*)::int AS n FROM brain_entries WHERE brain_id = $1 AND entry_id IN ('team', 'api', 'deep', 'late')`, [brain]);
    const chunks = await db().query(`SELECT count(*)::int AS n FROM ${partitionOf(brain)} WHERE entry_id IN ('team', 'api', 'deep', 'late')`);
    expect([versions.rows[0].n, chunks.rows[0].n]).toEqual([0, 0]);
  });

  it('forgets by source, takes exactly one selector, and is 404 for another tenant', async () => {
    const brain = await newBrain();
    const learned = await write(brain, { body: 'The customer prefers email.', scope: '/crm' });
    await write(brain, { body: 'The customer is in Oslo.', scope: '/crm' });
    // Provenance is set by learning (the next issue); here the row is marked as a learned one would be.
    await db().query(`UPDATE brain_entries SET source = 'transcript:42' WHERE brain_id = $1 AND entry_id = $2`, [brain, learned]);
    expect((await post(`/v1/brains/${brain}/forget`, { source: 'transcript:42' })).body.deleted).toEqual({ native: 1 });
    expect((await get(`/v1/brains/${brain}/entries`)).body.data).toHaveLength(1);

    expectError(await post(`/v1/brains/${brain}/forget`, { scope: '/crm', source: 'transcript:42' }), 400, 'invalid_request');
    expectError(await post(`/v1/brains/${brain}/forget`, { dry_run: true }), 400, 'invalid_request');
    expectError(await post(`/v1/brains/${brain}/forget`, { scope: 'crm' }), 400, 'invalid_brain_scope');
    expectError(await post(`/v1/brains/${brain}/forget`, { entity: 'ent_unknown' }), 404, 'not_found');
    expectError(await post(`/v1/brains/${brain}/forget`, { scope: '/crm', dry_run: true, preview_token: 'fpv_x' }), 400, 'invalid_request');
    expectError(await post(`/v1/brains/${brain}/forget`, { scope: '/crm' }, other.key), 404, 'not_found');
    expect((await get(`/v1/brains/${brain}/entries`)).body.data).toHaveLength(1);
  });
});

describe('reindex', () => {
  const jobDone = (brain: string, job: string) =>
    pollUntil(() => get(`/v1/brains/${brain}/reindex/${job}`), (res) => !['pending', 'in_progress', 'rolling_back'].includes(res.body.status), { timeoutMs: 60_000 });
  const eventsOf = async (brain: string, type: string) =>
    (await db().query(`SELECT data FROM outbox_events WHERE type = $1 AND data->>'id' = $2 ORDER BY created_at`, [type, brain])).rows.map((row) => row.data);
  const spaces = async (brain: string) =>
    Object.fromEntries((await db().query(`SELECT space, count(*)::int AS n FROM ${partitionOf(brain)} GROUP BY space`)).rows.map((row) => [row.space, row.n]));

  for (const encryption of ['none', 'strict'] as const) {
    it(`${encryption}: estimates, moves every chunk (history too) to the new model, and rolls back with what was written since`, async () => {
      const brain = await newBrain({ encryption, memory_policy: { chunking: { strategy: 'paragraph', max_chars: 200 } } });
      await write(brain, { entry_id: 'office', body: 'The office is in Berlin.' });
      await sleep(20);
      const before = new Date().toISOString();
      await sleep(20);
      await write(brain, { entry_id: 'office', body: 'The office moved to Lisbon.' });
      await write(brain, { entry_id: 'guide', title: 'Deploy guide', body: Array.from({ length: 4 }, (_, i) => `Step ${i}: deploys go through the pipeline with care. `.repeat(3)).join('\n\n') });

      const estimate = await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large' });
      expect(estimate.status).toBe(200);
      expect(estimate.body).toMatchObject({ object: 'brain.reindex.estimate', from_embedding_model: 'openai/text-embedding-3-small', embedding_model: 'openai/text-embedding-3-large' });
      expect(estimate.body.native_chunks).toBeGreaterThan(4);
      expect(estimate.body.estimated_cost_usd).toBeGreaterThan(0);
      expectError(await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'openai/text-embedding-3-small' }), 400, 'invalid_embedding_model');
      expectError(await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'gpt-4o' }), 400, 'invalid_embedding_model');

      const started = await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large', confirm: true });
      expect(started.status).toBe(201);
      expect(started.body).toMatchObject({ object: 'brain.reindex_job', status: 'pending', to_embedding_model: 'openai/text-embedding-3-large', rollback_expires_at: null });
      const done = await jobDone(brain, started.body.id);
      expect(done.body).toMatchObject({ status: 'completed', chunks_done: estimate.body.native_chunks, chunks_total: estimate.body.native_chunks });
      expect(Date.parse(done.body.rollback_expires_at) - Date.parse(done.body.completed_at)).toBeGreaterThan(9_000);
      expect((await get(`/v1/brains/${brain}`)).body).toMatchObject({ embedding_model: 'openai/text-embedding-3-large', embedding_dims: 3072 });
      expect(await eventsOf(brain, 'brain.reindex.completed')).toEqual([{ id: brain, job_id: started.body.id, to_embedding_model: 'openai/text-embedding-3-large' }]);
      // Both spaces are kept for the rollback window; the new vectors are 3,072 wide (sealed in a strict brain).
      expect(await spaces(brain)).toEqual({ 1: estimate.body.native_chunks, 2: estimate.body.native_chunks });
      const widths = await db().query(`SELECT DISTINCT vector_dims(embedding) AS dims, embedding_sealed IS NOT NULL AS sealed FROM ${partitionOf(brain)} WHERE space = 2`);
      expect(widths.rows).toEqual([encryption === 'strict' ? { dims: null, sealed: true } : { dims: 3072, sealed: false }]);

      expect((await hitsOf(brain, { query: 'where is the office' }))[0]?.content).toBe('The office moved to Lisbon.');
      expect((await hitsOf(brain, { query: 'where is the office', as_of: before }))[0]?.content).toBe('The office is in Berlin.');

      // Written after the swap: only in the new space, so the rollback embeds it back with the prior model.
      await write(brain, { entry_id: 'parking', body: 'Parking is behind the office in Lisbon.' });
      const rolling = await post(`/v1/brains/${brain}/reindex/${started.body.id}/rollback`, {});
      expect(rolling.status).toBe(202);
      expect(rolling.body.status).toBe('rolling_back');
      const rolled = await jobDone(brain, started.body.id);
      expect(rolled.body).toMatchObject({ status: 'rolled_back' });
      expect(rolled.body.rolled_back_at).not.toBeNull();
      expect((await get(`/v1/brains/${brain}`)).body).toMatchObject({ embedding_model: 'openai/text-embedding-3-small', embedding_dims: 1536 });
      expect(Object.keys(await spaces(brain))).toEqual(['1']);
      expect((await hitsOf(brain, { query: 'where can I park' }))[0]?.entry_id).toBe('parking');
      expectError(await post(`/v1/brains/${brain}/reindex/${started.body.id}/rollback`, {}), 409, 'rollback_unavailable');
    }, 120_000);
  }

  it('refuses the swap when a write lands mid-job: the job fails with the reason and the active space is untouched', async () => {
    const brain = await newBrain();
    for (let i = 0; i < 6; i++) await write(brain, { body: `Note ${i} about the release train.` });
    await emulated.fault({ fault: { kind: 'latency', ms: 400 }, times: 100_000 });
    try {
      const started = await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large', confirm: true });
      expect(started.status).toBe(201);
      expectError(await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large', confirm: true }), 409, 'reindex_in_progress');
      await write(brain, { body: 'Written while the reindex runs.' });
      const failed = await jobDone(brain, started.body.id);
      expect(failed.body.status).toBe('failed');
      expect(failed.body.failure_reason).toMatch(/written while the reindex ran/);
      expect(await eventsOf(brain, 'brain.reindex.failed')).toEqual([expect.objectContaining({ job_id: started.body.id, reason: failed.body.failure_reason })]);
      expect((await get(`/v1/brains/${brain}`)).body.embedding_model).toBe('openai/text-embedding-3-small');
      expect(await spaces(brain)).toEqual({ 1: 7 });
      expectError(await post(`/v1/brains/${brain}/reindex/${started.body.id}/rollback`, {}), 409, 'rollback_unavailable');
    } finally {
      await emulated.clearFaults();
    }
    expect((await hitsOf(brain, { query: 'written while the reindex runs' }))[0]?.content).toBe('Written while the reindex runs.');
  }, 120_000);

  it('drops the prior space when the rollback window closes; the job cannot be rolled back after', async () => {
    const brain = await newBrain();
    await write(brain, { body: 'The window closes after ten seconds here.' });
    const started = await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'voyage-3-lite', confirm: true });
    expect((await jobDone(brain, started.body.id)).body.status).toBe('completed');
    const kept = await pollUntil(() => spaces(brain), (counts) => counts[1] === undefined, { timeoutMs: 40_000 });
    expect(kept).toEqual({ 2: 1 });
    expectError(await post(`/v1/brains/${brain}/reindex/${started.body.id}/rollback`, {}), 409, 'rollback_unavailable');
    expectError(await get(`/v1/brains/${brain}/reindex/${started.body.id}`, other.key), 404, 'not_found');
    expectError(await get(`/v1/brains/${brain}/reindex/brj_000000000000000000000000`), 404, 'not_found');
  }, 90_000);
});
