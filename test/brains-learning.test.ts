import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitLearnPass } from '../shared/brains/learning.js';
import { ensurePruneSchedule } from '../shared/brains/upkeep.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Learning against the real services: observe passes as Temporal workflows, with the emulator
 * answering extraction, judgement and consolidation deterministically (shared/emulator/memory-learning.ts),
 * so each test can name the memories, conflicts and proposals a transcript must give.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000));
  workers = await startInProcessWorkers(gateway.platform);
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const send = (method: string, path: string, json?: unknown, headers: Record<string, string> = {}) => call(gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers: { ...bearer(developer.key), ...headers } });
const post = (path: string, json: unknown, headers?: Record<string, string>) => send('POST', path, json, headers);
const get = (path: string) => send('GET', path);
const db = () => gateway.platform.db;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function newBrain(body: Record<string, unknown> = {}): Promise<string> {
  const created = await post('/v1/brains', { name: `learning ${Math.random()}`, ...body });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  return created.body.id;
}

/** Observes with wait, expecting the pass to complete. */
async function learn(brainId: string, transcript: string, extra: Record<string, unknown> = {}, headers?: Record<string, string>) {
  const observed = await post(`/v1/brains/${brainId}/observe`, { transcript, wait: true, ...extra }, headers);
  expect(observed.status, JSON.stringify(observed.body)).toBe(200);
  expect(observed.body.status, JSON.stringify(observed.body)).not.toBe('failed');
  return observed.body;
}

const memoriesOf = async (brainId: string, scope = '/') =>
  ((await get(`/v1/brains/${brainId}/entries?class=memory&limit=500&scope=${encodeURIComponent(scope)}`)).body.data as { entry_id: string; type: string; title: string; body: string; trust: string; use_count: number; last_used: string | null; source: string | null }[]).sort((a, b) => a.body.localeCompare(b.body));

const eventsOf = async (type: string, brainId: string) =>
  (await db().query(`SELECT data FROM outbox_events WHERE developer_id = $1 AND type = $2 AND data ->> 'id' = $3`, [developer.accountId, type, brainId])).rows.map((row) => row.data);

describe('observe', () => {
  it('turns a transcript into the memories, entities and relations it states', async () => {
    const brain = await newBrain();
    const outcome = await learn(brain, 'user: I prefer tabs over spaces. Alice uses PostgreSQL (also called Postgres) for billing.\nassistant: Noted, both remembered.\nuser: thanks!');
    expect(outcome).toMatchObject({ object: 'brain.observe', brain_id: brain, status: 'completed', proposed: [], conflicts: [], used: [] });
    expect(outcome.id).toMatch(/^blp_/);
    expect(outcome.changed.map((change: { action: string }) => change.action)).toEqual(['added', 'added']);
    expect(outcome.costUsd).toBeGreaterThan(0);
    // The pass reports what its calls were billed: the recall's query embedding, the extraction and the new memories' embeddings.
    const billed = await db().query(`SELECT count(*)::int AS calls, coalesce(sum(billable_micros), 0)::bigint AS micros FROM usage_records WHERE request_id = $1`, [`learn_${outcome.id.slice(4, 28)}`]);
    expect(billed.rows[0].calls).toBe(3);
    expect(outcome.costUsd).toBeCloseTo(Number(billed.rows[0].micros) / 1e6, 6);

    const memories = await memoriesOf(brain);
    expect(memories.map(({ type, title, body, trust }) => ({ type, title, body, trust }))).toEqual([
      { type: 'fact', title: 'alice uses', body: 'Alice uses PostgreSQL (also called Postgres) for billing.', trust: 'high' },
      { type: 'preference', title: 'user prefers', body: 'The user prefers tabs over spaces.', trust: 'high' },
    ]);

    const entities = (await get(`/v1/brains/${brain}/entities?scope=/`)).body.data as { id: string; name: string; aliases: string[] }[];
    expect(entities.map((entity) => entity.name).sort()).toEqual(['Alice', 'PostgreSQL']);
    expect(entities.find((entity) => entity.name === 'PostgreSQL')!.aliases).toContain('postgres');
    const alice = (await get(`/v1/brains/${brain}/entities/${entities.find((entity) => entity.name === 'Alice')!.id}`)).body;
    expect(alice.relations).toEqual([expect.objectContaining({ relation: 'uses', to: expect.objectContaining({ name: 'PostgreSQL' }) })]);
  });

  it('answers 202 while learning, and the same transcript again is the same pass (never learnt twice)', async () => {
    const brain = await newBrain();
    const first = await post(`/v1/brains/${brain}/observe`, { transcript: 'user: The build server is Jenkins.' });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ object: 'brain.observe', status: 'learning' });
    const again = await post(`/v1/brains/${brain}/observe?wait=true`, { transcript: 'user: The build server is Jenkins.' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: first.body.id, status: 'completed' });
    expect(await memoriesOf(brain)).toHaveLength(1);
    const passes = await db().query(`SELECT count(*)::int AS n FROM brain_learn_passes WHERE brain_id = $1`, [brain]);
    expect(passes.rows[0].n).toBe(1);
  });

  it('refines a memory of the same title into a new version, kept for as_of', async () => {
    const brain = await newBrain();
    const added = await learn(brain, 'user: The deploy target is Kubernetes.');
    const entryId = added.changed[0].entry_id;
    await sleep(20);
    const between = new Date().toISOString();
    await sleep(20);
    const refined = await learn(brain, 'user: The deploy target is Nomad.');
    expect(refined.changed).toEqual([{ entry_id: entryId, action: 'refined' }]);
    expect((await memoriesOf(brain)).map((memory) => memory.body)).toEqual(['The deploy target is Nomad.']);

    const recallAt = async (asOf?: string) => (await post(`/v1/brains/${brain}/recall`, { query: 'what is the deploy target', ...(asOf && { as_of: asOf }) })).body.data.map((hit: { content: string }) => hit.content);
    expect(await recallAt(between)).toEqual(['The deploy target is Kubernetes.']);
    expect(await recallAt()).toEqual(['The deploy target is Nomad.']);

    // Saying the same thing again with another key changes nothing.
    const same = await learn(brain, 'user: The deploy target is Nomad.', {}, { 'Idempotency-Key': 'again' });
    expect(same.changed).toEqual([]);
    expect((await get(`/v1/brains/${brain}/entries/${entryId}`)).body.body).toBe('The deploy target is Nomad.');
  });

  it('a contradiction opens a conflict and leaves the memory as it was, until resolved', async () => {
    const brain = await newBrain();
    const added = await learn(brain, 'user: The deploy target is Kubernetes.');
    const entryId = added.changed[0].entry_id;
    const contradicted = await learn(brain, 'user: The deploy target is not Kubernetes.');
    expect(contradicted.changed).toEqual([]);
    expect(contradicted.conflicts).toHaveLength(1);
    expect((await get(`/v1/brains/${brain}/entries/${entryId}`)).body.body).toBe('The deploy target is Kubernetes.');

    const open = (await get(`/v1/brains/${brain}/conflicts`)).body;
    expect(open.data).toEqual([
      expect.objectContaining({
        object: 'brain.conflict', id: contradicted.conflicts[0], entry_id: entryId, status: 'open',
        existing: expect.objectContaining({ body: 'The deploy target is Kubernetes.' }),
        incoming: expect.objectContaining({ body: 'The deploy target is not Kubernetes.' }),
      }),
    ]);
    expect(await eventsOf('brain.conflict', brain)).toEqual([expect.objectContaining({ conflict_id: contradicted.conflicts[0], entry_id: entryId })]);

    const resolved = await post(`/v1/brains/${brain}/conflicts`, { conflict_id: contradicted.conflicts[0], resolution: 'accept_incoming' });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    expect(resolved.body).toMatchObject({ status: 'resolved', resolution: 'accept_incoming' });
    expect((await get(`/v1/brains/${brain}/entries/${entryId}`)).body.body).toBe('The deploy target is not Kubernetes.');
    expect((await get(`/v1/brains/${brain}/conflicts`)).body.data).toEqual([]);
    expectError(await post(`/v1/brains/${brain}/conflicts`, { conflict_id: contradicted.conflicts[0] }), 409, 'conflict_resolved');
    expectError(await post(`/v1/brains/${brain}/conflicts`, { conflict_id: 'bcfl_nope' }), 404, 'not_found');
  });

  it('a transcript that states a thing twice, or changes it as it goes, gives one memory as it last stood', async () => {
    const brain = await newBrain();
    const outcome = await learn(brain, 'user: The queue is RabbitMQ.\nassistant: Noted.\nuser: The queue is RabbitMQ.\nuser: The deploy target is Kubernetes.\nassistant: Noted.\nuser: The deploy target is Nomad.');
    expect(outcome.changed.map((change: { action: string }) => change.action)).toEqual(['added', 'added']);
    expect((await memoriesOf(brain)).map(({ title, body }) => ({ title, body }))).toEqual([
      { title: 'deploy target is', body: 'The deploy target is Nomad.' },
      { title: 'queue is', body: 'The queue is RabbitMQ.' },
    ]);
  });

  it('rejects a transcript whose lines are not user: or assistant: lines (400 invalid_transcript)', async () => {
    const brain = await newBrain();
    const refused = await post(`/v1/brains/${brain}/observe`, { transcript: 'user: hello\nsystem: be nice' });
    expectError(refused, 400, 'invalid_transcript');
    expect(refused.body.error.message).toContain('line 2');
    expectError(await post(`/v1/brains/${brain}/observe`, { transcript: 'assistant: only me' }), 400, 'invalid_transcript');
  });

  it('ignores small talk and transcripts the ignore patterns match', async () => {
    const brain = await newBrain({ memory_policy: { ignore: { patterns: ['*password*'], require_task_relevance: true } } });
    expect(await learn(brain, 'user: hi there, thanks!')).toMatchObject({ status: 'completed', ignored: true, reason: 'not_task_relevant', changed: [] });
    expect(await learn(brain, 'user: My password is hunter2 and the server is Jenkins.')).toMatchObject({ ignored: true, reason: 'ignore_pattern', changed: [] });
    expect(await memoriesOf(brain)).toEqual([]);
  });
});

describe('review and trust', () => {
  it('review mode files proposals; approve writes them, reject does not', async () => {
    const brain = await newBrain({ memory_policy: { learn_mode: 'review' } });
    const outcome = await learn(brain, 'user: The cache is Redis. Bob uses Vim.');
    expect(outcome.changed).toEqual([]);
    expect(outcome.proposed).toHaveLength(2);
    expect(await memoriesOf(brain)).toEqual([]);
    const pending = ((await get(`/v1/brains/${brain}/proposals`)).body.data as { id: string; memory: { body: string }; reason: string; action: string }[]).sort((a, b) => b.memory.body.localeCompare(a.memory.body));
    expect(pending.map((proposal) => [proposal.memory.body, proposal.reason, proposal.action])).toEqual([
      ['The cache is Redis.', 'review', 'add'],
      ['Bob uses Vim.', 'review', 'add'],
    ]);
    expect(await eventsOf('brain.learning.proposed', brain)).toHaveLength(2);

    const approved = await post(`/v1/brains/${brain}/proposals`, { proposal_id: pending[0]!.id, action: 'approve' });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', entry_id: expect.stringMatching(/^ent_/) });
    const rejected = await post(`/v1/brains/${brain}/proposals`, { proposal_id: pending[1]!.id, action: 'reject' });
    expect(rejected.body.status).toBe('rejected');
    expect((await memoriesOf(brain)).map((memory) => memory.body)).toEqual(['The cache is Redis.']);
    expect((await get(`/v1/brains/${brain}/proposals`)).body.data).toEqual([]);
    expectError(await post(`/v1/brains/${brain}/proposals`, { proposal_id: pending[0]!.id, action: 'reject' }), 409, 'proposal_decided');
  });

  it('per_tier_review holds back one tier while another learns on its own', async () => {
    const brain = await newBrain({ memory_policy: { learn_mode: 'review', per_tier_review: { B: 'auto' } } });
    const outcome = await learn(brain, 'user: We decided to ship on Fridays. The cache is Redis.');
    expect(outcome.changed).toHaveLength(1);
    expect(outcome.proposed).toHaveLength(1);
    expect((await memoriesOf(brain)).map((memory) => memory.type)).toEqual(['fact']);
    expect((await get(`/v1/brains/${brain}/proposals`)).body.data[0].memory.type).toBe('decision');
  });

  it('low-trust input never overwrites high-trust memory: it becomes a proposal', async () => {
    const brain = await newBrain();
    const added = await learn(brain, 'user: The deploy target is Kubernetes.');
    const low = await learn(brain, 'user: The deploy target is Nomad.', { trust: 'low' });
    expect(low.changed).toEqual([]);
    expect(low.proposed).toHaveLength(1);
    expect((await get(`/v1/brains/${brain}/entries/${added.changed[0].entry_id}`)).body).toMatchObject({ body: 'The deploy target is Kubernetes.', trust: 'high' });
    const proposal = (await get(`/v1/brains/${brain}/proposals`)).body.data[0];
    expect(proposal).toMatchObject({ reason: 'low_trust', action: 'refine', target_entry_id: added.changed[0].entry_id });
    // New low-trust facts are learnt, as low trust.
    const fresh = await learn(brain, 'user: The queue is RabbitMQ.', { trust: 'low' });
    expect(fresh.changed).toHaveLength(1);
    expect((await get(`/v1/brains/${brain}/entries/${fresh.changed[0].entry_id}`)).body.trust).toBe('low');
  });
});

describe('use, consolidation and pruning', () => {
  it('counts a use of each recalled memory the answer used (and only those)', async () => {
    const brain = await newBrain();
    const added = await learn(brain, 'user: The deploy target is Kubernetes. The cache is Redis.');
    const [deploy, cache] = added.changed.map((change: { entry_id: string }) => change.entry_id);
    const turn = await learn(brain, 'user: Where do we deploy the service?\nassistant: We deploy to the Kubernetes target as usual.');
    expect(turn.used).toEqual([deploy]);
    const deployEntry = (await get(`/v1/brains/${brain}/entries/${deploy}`)).body;
    expect(deployEntry.use_count).toBe(1);
    expect(deployEntry.last_used).not.toBeNull();
    expect((await get(`/v1/brains/${brain}/entries/${cache}`)).body.use_count).toBe(0);
  });

  it('consolidates a scope past consolidate_at into fewer memories, the originals kept for as_of', async () => {
    const brain = await newBrain({ memory_policy: { consolidate_at: 2 } });
    await learn(brain, 'user: Alice uses PostgreSQL.', { scope: '/team' });
    await learn(brain, 'user: Alice works at Acme Corp.', { scope: '/team' });
    await sleep(20);
    const before = new Date().toISOString();
    await learn(brain, 'user: Alice lives in Berlin.', { scope: '/team' });
    const after = await pollUntil(() => memoriesOf(brain, '/team'), (memories) => memories.length <= 2, { timeoutMs: 30_000 });
    expect(after).toHaveLength(1);
    expect(after[0]!.body).toBe('Alice uses PostgreSQL. Alice works at Acme Corp. Alice lives in Berlin.');
    expect(after[0]!.source).toBe('consolidation');
    const past = (await post(`/v1/brains/${brain}/recall`, { query: 'Alice', scope: '/team', as_of: before, top_k: 10 })).body.data.map((hit: { content: string }) => hit.content).sort();
    expect(past).toEqual(['Alice uses PostgreSQL.', 'Alice works at Acme Corp.']);
  });

  it('prunes cold tier C and D memories once faded, never tiers A and B', async () => {
    const brain = await newBrain({ memory_policy: { prune_grace_days: 10 } });
    await learn(brain, 'user: Carol mentioned the Lisbon offsite. The cache is Redis. The migration is currently blocked.');
    const types = (await memoriesOf(brain)).map((memory) => memory.type).sort();
    expect(types).toEqual(['fact', 'observation', 'status']);
    const handle = await gateway.platform.temporal.client.workflow.start('brainPruneWorkflow', {
      taskQueue: gateway.platform.config.TEMPORAL_TASK_QUEUE, workflowId: `prune-test-${brain}`, args: [{ at: new Date(Date.now() + 5 * 86_400_000).toISOString() }],
    });
    await handle.result();
    expect((await memoriesOf(brain)).map((memory) => memory.type).sort()).toEqual(['fact', 'observation', 'status']);
    const later = await gateway.platform.temporal.client.workflow.start('brainPruneWorkflow', {
      taskQueue: gateway.platform.config.TEMPORAL_TASK_QUEUE, workflowId: `prune-test-later-${brain}`, args: [{ at: new Date(Date.now() + 100 * 86_400_000).toISOString() }],
    });
    expect((await later.result()).pruned).toBeGreaterThanOrEqual(2);
    expect((await memoriesOf(brain)).map((memory) => memory.type)).toEqual(['fact']);
  });

  it('the prune schedule is made once per platform, daily', async () => {
    await ensurePruneSchedule(gateway.platform);
    await ensurePruneSchedule(gateway.platform);
    const schedule = await gateway.platform.temporal.client.schedule.getHandle('brain-prune').describe();
    expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'brainPruneWorkflow' });
    expect(schedule.spec.intervals).toEqual([expect.objectContaining({ every: 86_400_000 })]);
  });
});

describe('on_unfunded', () => {
  async function emptyPrepaidCustomer(): Promise<string> {
    const created = await post('/v1/customers', { external_id: `broke-${Math.random()}` });
    await post(`/v1/customers/${created.body.id}/wallet/topup`, { amount_usd: 0.001 });
    await post(`/v1/customers/${created.body.id}/wallet/adjust`, { amount_usd: -0.001 });
    return created.body.id;
  }

  it('fallback learns on the developer pool', async () => {
    const brain = await newBrain();
    const customer = await emptyPrepaidCustomer();
    const outcome = await learn(brain, 'user: The linter is ESLint.', {}, { 'Svc-Customer': customer });
    expect(outcome.changed).toHaveLength(1);
    const payer = await db().query(`SELECT customer_id FROM brain_learn_passes WHERE id = $1`, [outcome.id]);
    expect(payer.rows[0].customer_id).toBeNull();
  });

  it('recall_only skips learning with brain.learning.skipped', async () => {
    const brain = await newBrain({ memory_policy: { on_unfunded: 'recall_only' } });
    const customer = await emptyPrepaidCustomer();
    const outcome = await learn(brain, 'user: The linter is ESLint.', {}, { 'Svc-Customer': customer });
    expect(outcome).toMatchObject({ status: 'skipped', reason: 'unfunded', changed: [] });
    expect(await memoriesOf(brain)).toEqual([]);
    expect(await eventsOf('brain.learning.skipped', brain)).toEqual([expect.objectContaining({ reason: 'unfunded', pass_id: outcome.id })]);
  });

  it('reject refuses an explicit observe with 402 and learns nothing', async () => {
    const brain = await newBrain({ memory_policy: { on_unfunded: 'reject' } });
    const customer = await emptyPrepaidCustomer();
    expectError(await post(`/v1/brains/${brain}/observe`, { transcript: 'user: The linter is ESLint.', wait: true }, { 'Svc-Customer': customer }), 402, 'customer_wallet_empty');
    expect(await memoriesOf(brain)).toEqual([]);
  });
});

describe('ambient learning', () => {
  const client = () => new OpenAI({ apiKey: developer.key, baseURL: `${gateway.baseUrl}/v1`, maxRetries: 0 });

  it('a chat turn with a Brain header learns after the answer; Brain-Learn false does not', async () => {
    const brain = await newBrain();
    const ask = (content: string, learnHeader?: string) =>
      client().chat.completions.create({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content }] }, { headers: { Brain: brain, 'Brain-Scope': '/chat', ...(learnHeader && { 'Brain-Learn': learnHeader }) } });
    await ask('The staging database is MySQL.', 'false');
    await ask('The release manager is Dana.');
    const memories = await pollUntil(() => memoriesOf(brain, '/chat'), (found) => found.length > 0, { timeoutMs: 30_000 });
    expect(memories.map((memory) => [memory.body, memory.source])).toEqual([['The release manager is Dana.', 'chat']]);
    // Nothing from the turn with Brain-Learn false, even after its pass would have had time.
    await sleep(500);
    expect((await memoriesOf(brain, '/chat')).map((memory) => memory.body)).toEqual(['The release manager is Dana.']);
  });

  it('a low-trust ambient turn over high-trust memory files a proposal; the answer is never held up', async () => {
    const brain = await newBrain();
    await learn(brain, 'user: The release manager is Dana.', { scope: '/chat' });
    await client().chat.completions.create({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'The release manager is Erin.' }] }, { headers: { Brain: brain, 'Brain-Scope': '/chat', 'Brain-Trust': 'low' } });
    const proposals = await pollUntil(async () => (await get(`/v1/brains/${brain}/proposals`)).body.data, (found: unknown[]) => found.length > 0, { timeoutMs: 30_000 });
    expect(proposals[0]).toMatchObject({ reason: 'low_trust', memory: { body: 'The release manager is Erin.' } });
  });
});

describe('exactly once', () => {
  it('a commit retried after it landed (a worker killed before reporting) changes nothing again', async () => {
    const brain = await newBrain();
    const outcome = await learn(brain, 'user: The mail server is Postfix.');
    const again = await commitLearnPass(gateway.platform, outcome.id);
    expect(again.result).toEqual(outcome);
    expect(await memoriesOf(brain)).toHaveLength(1);
    const versions = await db().query(`SELECT count(*)::int AS n FROM brain_entries WHERE brain_id = $1`, [brain]);
    expect(versions.rows[0].n).toBe(1);
  });
});

describe('autotune', () => {
  it('learns tier weights from which recalled memories the answers used, and recall ranks by them', async () => {
    const brain = await newBrain();
    await learn(brain, 'user: Carol mentioned the Lisbon offsite. The deploy target is Kubernetes.');
    for (let turn = 0; turn < 10; turn++) {
      const used = await learn(brain, 'user: Where is the Lisbon offsite and what is the deploy target?\nassistant: We deploy to the Kubernetes target.', {}, { 'Idempotency-Key': `turn-${turn}` });
      expect(used.used).toHaveLength(1);
    }
    const tuned = await post(`/v1/brains/${brain}/autotune`, { action: 'freeze' });
    expect(tuned.body.tier_multipliers).toEqual({ B: 1, C: 0.7 });
    const hits = (await post(`/v1/brains/${brain}/recall`, { query: 'the Lisbon offsite and the deploy target', explain: true })).body.data as { type: string; factors: { tier_weight: number } }[];
    expect(hits.find((hit) => hit.type === 'observation')!.factors.tier_weight).toBeCloseTo(0.75 * 0.7);
    expect(hits.find((hit) => hit.type === 'fact')!.factors.tier_weight).toBeCloseTo(0.9);
  });

  it('freeze emits brain.autotune.frozen once; reset thaws it', async () => {
    const brain = await newBrain();
    const frozen = await post(`/v1/brains/${brain}/autotune`, { action: 'freeze' });
    expect(frozen.body).toMatchObject({ object: 'brain.autotune', brain_id: brain, frozen: true });
    await post(`/v1/brains/${brain}/autotune`, { action: 'freeze' });
    expect(await eventsOf('brain.autotune.frozen', brain)).toEqual([expect.objectContaining({ reason: 'manual' })]);
    expect((await get(`/v1/brains/${brain}`)).body.autotune_frozen).toBe(true);
    const reset = await post(`/v1/brains/${brain}/autotune`, { action: 'reset' });
    expect(reset.body).toMatchObject({ frozen: false, tier_multipliers: {} });
    expectError(await post(`/v1/brains/${brain}/autotune`, { action: 'melt' }), 400, 'invalid_request');
  });
});
