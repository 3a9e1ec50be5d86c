import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollUntil } from './support/poll.js';
import { bearer, call } from './support/test-platform.js';
import { receiverEnv, startWebhookReceiver, verifySvcSignature, type ReceivedRequest, type WebhookReceiver } from './support/webhook-receiver.js';
import { startWorkerWorld, type WorkerWorld } from './support/worker-world.js';

/**
 * Learning against the real services with the real worker process: a learn pass whose worker is
 * SIGKILLed mid-activity learns exactly once on the next worker; every learning event reaches a
 * webhook endpoint once, signed; and a sealed brain's learning keeps memory text out of every
 * column that holds it (and out of the pass's workflow history), while the API shows it plainly.
 * The emulator answers the learning prompts deterministically (shared/emulator/memory-learning.ts).
 */
let receiver: WebhookReceiver;
let world: WorkerWorld;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  world = await startWorkerWorld(receiverEnv(receiver));
}, 120_000);

afterAll(async () => {
  await world?.close();
  await receiver?.close();
});

const send = (method: string, path: string, json?: unknown, headers: Record<string, string> = {}) =>
  call(world.gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers: { ...bearer(world.developer.key), ...headers } });
const post = (path: string, json: unknown, headers?: Record<string, string>) => send('POST', path, json, headers);
const get = (path: string) => send('GET', path);
const db = () => world.gateway.platform.db;
const temporal = () => world.gateway.platform.temporal.client;
const workerLog = () => `worker:\n${world.worker.output().slice(-20).join('\n')}`;

async function newBrain(body: Record<string, unknown> = {}): Promise<string> {
  const created = await post('/v1/brains', { name: `learning durability ${Math.random()}`, ...body });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  return created.body.id;
}

/** Observes with wait, expecting the pass to have ended (completed, or skipped when that is the point). */
async function learn(brainId: string, transcript: string, headers?: Record<string, string>) {
  const observed = await post(`/v1/brains/${brainId}/observe`, { transcript, wait: true }, headers);
  expect(observed.status, JSON.stringify(observed.body)).toBe(200);
  expect(observed.body.status, JSON.stringify(observed.body)).not.toBe('failed');
  return observed.body;
}

/** Observes without wait: the pass is left learning (202). */
async function startPass(brainId: string, transcript: string): Promise<string> {
  const observed = await post(`/v1/brains/${brainId}/observe`, { transcript });
  expect(observed.status, JSON.stringify(observed.body)).toBe(202);
  return observed.body.id;
}

const passRows = async (ids: string[]) =>
  (await db().query<{ id: string; status: string; result: Record<string, unknown> | null }>(`SELECT id, status, result FROM brain_learn_passes WHERE id = ANY($1)`, [ids])).rows;

const { EventType, PendingWorkflowTaskState } = proto.temporal.api.enums.v1;

/**
 * Whether a worker holds the pass's workflow task now. A pass's steps are local activities
 * (workflows/brain-learn.ts), run inside its workflow task, so a step in flight is a task started.
 */
async function inWorkflowTask(passId: string): Promise<boolean> {
  const task = (await temporal().workflow.getHandle(passId).describe()).raw.pendingWorkflowTask;
  return task?.state === PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED;
}

/** Passes past their first step: the extraction is recorded in the pass row, so they are committing. */
const extractedOf = async (ids: string[]) =>
  new Set((await db().query<{ id: string }>(`SELECT id FROM brain_learn_passes WHERE id = ANY($1) AND extracted IS NOT NULL`, [ids])).rows.map((row) => row.id));

/** The event types of a pass's workflow history, by name, a marker's with its own name (a local activity's is core_local_activity). */
async function historyOf(passId: string): Promise<string[]> {
  const events = (await temporal().workflow.getHandle(passId).fetchHistory()).events ?? [];
  return events.map((event) => [EventType[event.eventType ?? 0], event.markerRecordedEventAttributes?.markerName].filter(Boolean).join(' '));
}

describe('a worker killed mid-pass', () => {
  const FACTS = [
    { transcript: 'user: The build server is Jenkins.', title: 'build server is' },
    { transcript: 'user: The queue is RabbitMQ.', title: 'queue is' },
    { transcript: 'user: The linter is ESLint.', title: 'linter is' },
    { transcript: 'user: The mail server is Postfix.', title: 'mail server is' },
    { transcript: 'user: The database is PostgreSQL.', title: 'database is' },
  ];
  const REFINEMENT = 'user: The deploy target is Nomad.';
  const CONTRADICTION = 'user: The cache is not Redis.';

  it('learns exactly once: each fact once, one new version for the refinement, one conflict and one brain.conflict', async () => {
    const { emulated, worker } = world;
    const brain = await newBrain({ memory_policy: { consolidate_at: 100 } });
    const deployEntry = (await learn(brain, 'user: The deploy target is Kubernetes.')).changed[0].entry_id as string;
    const cacheEntry = (await learn(brain, 'user: The cache is Redis.')).changed[0].entry_id as string;

    // Every answer of the learning model is slow, so the kill lands while passes wait on it.
    await emulated.fault({ model: 'gpt-4o-mini', fault: { kind: 'latency', ms: 4_000 }, times: 100_000 });
    const refinement = await startPass(brain, REFINEMENT);
    const contradiction = await startPass(brain, CONTRADICTION);
    // Those two reach their commit (judging the stored memory) while the facts are still being extracted.
    const committing = () => Promise.all([refinement, contradiction].map(inWorkflowTask));
    await pollUntil(async () => ({ running: await committing(), extracted: await extractedOf([refinement, contradiction]) }), (state) => state.running.every(Boolean) && state.extracted.size === 2, { context: workerLog });
    const facts = await Promise.all(FACTS.map((fact) => startPass(brain, fact.transcript)));
    const passes = [refinement, contradiction, ...facts];
    await pollUntil(() => Promise.all(passes.map(inWorkflowTask)), (running) => running.every(Boolean), { context: workerLog });
    expect((await extractedOf(facts)).size).toBe(0);

    await worker.kill('SIGKILL');
    expect((await passRows(passes)).every((row) => row.status === 'learning')).toBe(true);
    await emulated.clearFaults();
    await worker.restart();

    const ended = await pollUntil(() => passRows(passes), (rows) => rows.length === passes.length && rows.every((row) => row.status !== 'learning'), { timeoutMs: 120_000, context: workerLog });
    expect(ended.map((row) => [row.id, row.status])).toEqual(ended.map((row) => [row.id, 'completed']));

    // One current memory per title: the five facts, the refined deploy target, the cache as it was.
    const current = (await db().query(`SELECT entry_id, title, body FROM brain_entries WHERE brain_id = $1 AND valid_to IS NULL ORDER BY title`, [brain])).rows;
    expect(current.map((entry) => entry.title)).toEqual([...FACTS.map((fact) => fact.title), 'deploy target is', 'cache is'].sort());
    expect(current.find((entry) => entry.entry_id === deployEntry)?.body).toBe('The deploy target is Nomad.');
    expect(current.find((entry) => entry.entry_id === cacheEntry)?.body).toBe('The cache is Redis.');
    const versions = (await db().query(`SELECT entry_id, count(*)::int AS n FROM brain_entries WHERE brain_id = $1 GROUP BY entry_id`, [brain])).rows;
    expect(Object.fromEntries(versions.map((row) => [row.entry_id, row.n]))).toEqual(Object.fromEntries(current.map((entry) => [entry.entry_id, entry.entry_id === deployEntry ? 2 : 1])));

    const conflicts = (await db().query(`SELECT id, pass_id, entry_id FROM brain_conflicts WHERE brain_id = $1`, [brain])).rows;
    expect(conflicts).toEqual([{ id: expect.stringMatching(/^bcfl_/), pass_id: contradiction, entry_id: cacheEntry }]);
    const conflictEvents = (await db().query(`SELECT data FROM outbox_events WHERE type = 'brain.conflict' AND data ->> 'id' = $1`, [brain])).rows;
    expect(conflictEvents.map((row) => row.data)).toEqual([{ id: brain, conflict_id: conflicts[0].id, entry_id: cacheEntry, scope: '/' }]);

    // Each pass's recorded result is what observe with wait reports, and what its workflow returned.
    const entryOf = (title: string) => current.find((entry) => entry.title === title)!.entry_id;
    const expected = new Map<string, Record<string, unknown>>([
      [refinement, { changed: [{ entry_id: deployEntry, action: 'refined' }], conflicts: [] }],
      [contradiction, { changed: [], conflicts: [conflicts[0].id] }],
      ...facts.map((id, index): [string, Record<string, unknown>] => [id, { changed: [{ entry_id: entryOf(FACTS[index]!.title), action: 'added' }], conflicts: [] }]),
    ]);
    const transcripts = new Map([[refinement, REFINEMENT], [contradiction, CONTRADICTION], ...facts.map((id, index): [string, string] => [id, FACTS[index]!.transcript])]);
    for (const row of ended) {
      expect(row.result).toEqual({ object: 'brain.observe', id: row.id, brain_id: brain, status: 'completed', proposed: [], used: [], costUsd: expect.any(Number), ...expected.get(row.id) });
      const again = await post(`/v1/brains/${brain}/observe`, { transcript: transcripts.get(row.id), wait: true });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(row.result);
      expect(await temporal().workflow.getHandle(row.id).result()).toEqual(row.result);
    }
    // Each pass's task died with the worker and timed out; its new worker recorded each step once.
    for (const passId of passes) {
      const history = await historyOf(passId);
      expect(history, passId).toContain('EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT');
      expect(history.filter((type) => type === 'EVENT_TYPE_MARKER_RECORDED core_local_activity'), passId).toHaveLength(2);
    }
    const passCount = (await db().query(`SELECT count(*)::int AS n FROM brain_learn_passes WHERE brain_id = $1`, [brain])).rows[0].n;
    expect(passCount).toBe(2 + passes.length);
  }, 300_000);
});

describe('learning events through webhooks', () => {
  const BRAIN_EVENTS = ['brain.learning.proposed', 'brain.conflict', 'brain.autotune.frozen', 'brain.policy.changed', 'brain.learning.skipped', 'brain.reindex.completed', 'brain.reindex.failed'];
  const envelope = (request: ReceivedRequest) => JSON.parse(request.rawBody);
  const header = (request: ReceivedRequest, name: string) => request.headers[name.toLowerCase()] as string | undefined;

  async function emptyPrepaidCustomer(): Promise<string> {
    const created = await post('/v1/customers', { external_id: `broke-${Math.random()}` });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect((await post(`/v1/customers/${created.body.id}/wallet/topup`, { amount_usd: 0.001 })).status).toBe(200);
    expect((await post(`/v1/customers/${created.body.id}/wallet/adjust`, { amount_usd: -0.001 })).status).toBe(200);
    return created.body.id;
  }

  it('delivers brain.learning.proposed, brain.conflict, brain.learning.skipped and brain.autotune.frozen once each, signed', async () => {
    const url = `${receiver.origin}/brain-events`;
    const endpoint = await post('/v1/webhooks', { url, events: BRAIN_EVENTS });
    expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(200);
    const secret = endpoint.body.secret as string;

    const review = await newBrain({ memory_policy: { learn_mode: 'review' } });
    const proposed = await learn(review, 'user: The cache is Redis.');
    expect(proposed.proposed).toHaveLength(1);

    const autonomous = await newBrain();
    const entryId = (await learn(autonomous, 'user: The deploy target is Kubernetes.')).changed[0].entry_id;
    const contradicted = await learn(autonomous, 'user: The deploy target is not Kubernetes.');
    expect(contradicted.conflicts).toHaveLength(1);

    const unfunded = await newBrain({ memory_policy: { on_unfunded: 'recall_only' } });
    const skipped = await learn(unfunded, 'user: The linter is ESLint.', { 'Svc-Customer': await emptyPrepaidCustomer() });
    expect(skipped).toMatchObject({ status: 'skipped', reason: 'unfunded' });

    const frozen = await post(`/v1/brains/${autonomous}/autotune`, { action: 'freeze' });
    expect(frozen.body).toMatchObject({ frozen: true });

    const expected = [
      { type: 'brain.learning.proposed', data: { id: review, proposal_id: proposed.proposed[0], scope: '/', action: 'add', reason: 'review' } },
      { type: 'brain.conflict', data: { id: autonomous, conflict_id: contradicted.conflicts[0], entry_id: entryId, scope: '/' } },
      { type: 'brain.learning.skipped', data: { id: unfunded, pass_id: skipped.id, scope: '/', reason: 'unfunded' } },
      { type: 'brain.autotune.frozen', data: { id: autonomous, reason: 'manual' } },
    ];
    const recorded = (await db().query(`SELECT id, type, data FROM outbox_events WHERE data ->> 'id' = ANY($1) ORDER BY created_at, id`, [[review, autonomous, unfunded]])).rows;
    expect(recorded.map(({ type, data }) => ({ type, data }))).toEqual(expected);

    const onPath = () => receiver.requests.filter((request) => request.path === '/brain-events');
    await receiver.waitFor(() => recorded.every((event) => onPath().some((request) => envelope(request).id === event.id)));
    // Once every delivery is recorded as succeeded, none is attempted again.
    const deliveries = await pollUntil(
      async () => (await get(`/v1/webhooks/${endpoint.body.id}/deliveries?limit=100`)).body.data as { event_id: string; status: string; attempt_count: number }[],
      (list) => list.length >= recorded.length && list.every((delivery) => delivery.status === 'succeeded'),
      { timeoutMs: 60_000, context: workerLog },
    );
    const ours = new Set(recorded.map((event) => event.id));
    expect(deliveries.filter((delivery) => ours.has(delivery.event_id)).map((delivery) => [delivery.event_id, delivery.attempt_count]).sort()).toEqual(recorded.map((event) => [event.id, 1]).sort());

    const received = onPath();
    const receivedIds = received.map((request) => envelope(request).id as string);
    expect(receivedIds.length).toBe(new Set(receivedIds).size);
    expect(receivedIds.filter((id) => ours.has(id)).sort()).toEqual([...ours].sort());
    for (const event of recorded) {
      const [request] = received.filter((candidate) => envelope(candidate).id === event.id);
      expect(envelope(request!)).toMatchObject({ object: 'event', id: event.id, type: event.type, api_version: 'v1', data: event.data });
      expect(header(request!, 'X-Svc-Event-Id')).toBe(event.id);
      expect(header(request!, 'X-Svc-Event-Type')).toBe(event.type);
      expect(verifySvcSignature(request!.rawBody, header(request!, 'X-Svc-Signature'), secret)).toBe(true);
      expect(verifySvcSignature(request!.rawBody, header(request!, 'X-Svc-Signature'), 'whsec_wrong')).toBe(false);
    }
  }, 120_000);
});

describe('sealed brains', () => {
  const SECRET = 'Zephyrus';
  const FACT = `user: The vault codename is ${SECRET}.`;
  const DENIAL = `user: The vault codename is not ${SECRET}.`;

  /** Whether stored bytes hold the secret as text, in any case. */
  const holdsSecret = (bytes: Buffer | string | null) => bytes !== null && Buffer.from(bytes).toString('latin1').toLowerCase().includes(SECRET.toLowerCase());

  /** Every text a workflow history holds: its JSON, each payload's bytes as UTF-8, and every base64-looking string decoded. */
  function historyTexts(value: unknown, texts: string[] = []): string[] {
    if (value instanceof Uint8Array) {
      const text = Buffer.from(value).toString('utf8');
      texts.push(text, Buffer.from(text, 'base64').toString('utf8'));
    } else if (typeof value === 'string') {
      texts.push(value);
      if (/^[A-Za-z0-9+/_-]{8,}={0,2}$/.test(value)) texts.push(Buffer.from(value, 'base64').toString('utf8'));
    } else if (Array.isArray(value)) {
      for (const item of value) historyTexts(item, texts);
    } else if (value && typeof value === 'object') {
      for (const item of Object.values(value)) historyTexts(item, texts);
    }
    return texts;
  }

  it.each(['standard', 'strict', 'none'] as const)('%s: learning keeps memory text sealed at rest when the brain is sealed, never in workflow history, plain through the API', async (encryption) => {
    const sealed = encryption !== 'none';
    const brain = await newBrain({ encryption });
    const learnt = await learn(brain, FACT);
    expect(learnt.changed).toHaveLength(1);
    const denied = await learn(brain, DENIAL);
    expect(denied.conflicts).toHaveLength(1);
    const reviewed = await newBrain({ encryption, memory_policy: { learn_mode: 'review' } });
    const proposed = await learn(reviewed, FACT);
    expect(proposed.proposed).toHaveLength(1);
    const brains = [brain, reviewed];

    // The API shows the text plainly.
    expect((await get(`/v1/brains/${brain}/entries/${learnt.changed[0].entry_id}`)).body).toMatchObject({ title: 'vault codename is', body: `The vault codename is ${SECRET}.` });
    expect((await get(`/v1/brains/${brain}/entries?class=memory`)).body.data.map((entry: { body: string }) => entry.body)).toEqual([`The vault codename is ${SECRET}.`]);
    expect((await get(`/v1/brains/${brain}/conflicts`)).body.data).toEqual([
      expect.objectContaining({ id: denied.conflicts[0], existing: expect.objectContaining({ body: `The vault codename is ${SECRET}.` }), incoming: expect.objectContaining({ body: `The vault codename is not ${SECRET}.` }) }),
    ]);
    expect((await get(`/v1/brains/${reviewed}/proposals`)).body.data).toEqual([expect.objectContaining({ id: proposed.proposed[0], memory: expect.objectContaining({ body: `The vault codename is ${SECRET}.` }) })]);

    // At rest the text is sealed (a plaintext brain, the control, holds it as written).
    const passes = (await db().query(`SELECT id, transcript, extracted FROM brain_learn_passes WHERE brain_id = ANY($1)`, [brains])).rows;
    expect(passes).toHaveLength(3);
    for (const pass of passes) {
      expect(pass.extracted).not.toBeNull();
      expect([pass.id, holdsSecret(pass.transcript), holdsSecret(pass.extracted)]).toEqual([pass.id, sealed ? false : true, sealed ? false : true]);
    }
    const proposals = (await db().query(`SELECT candidate FROM brain_proposals WHERE brain_id = ANY($1)`, [brains])).rows;
    expect(proposals.map((row) => holdsSecret(row.candidate))).toEqual([!sealed]);
    const conflicts = (await db().query(`SELECT candidate FROM brain_conflicts WHERE brain_id = ANY($1)`, [brains])).rows;
    expect(conflicts.map((row) => holdsSecret(row.candidate))).toEqual([!sealed]);
    const entries = (await db().query(`SELECT title, body, title_sealed, body_sealed FROM brain_entries WHERE brain_id = ANY($1)`, [brains])).rows;
    expect(entries).toHaveLength(1);
    for (const entry of entries) {
      expect({ title: entry.title === null, body: entry.body === null, titleSealed: entry.title_sealed !== null, bodySealed: entry.body_sealed !== null }).toEqual({ title: sealed, body: sealed, titleSealed: sealed, bodySealed: sealed });
      expect([entry.body, entry.title_sealed, entry.body_sealed].map(holdsSecret)).toEqual([!sealed, false, false]);
    }

    // Never in a pass's workflow history, whatever the brain's encryption; the pass id is there, so the decoding reads the payloads.
    for (const pass of passes) {
      const history = await temporal().workflow.getHandle(pass.id).fetchHistory();
      const texts = [JSON.stringify(history), ...historyTexts(history)];
      expect(texts.some((text) => text.includes(`"passId":"${pass.id}"`))).toBe(true);
      expect(texts.filter((text) => text.toLowerCase().includes(SECRET.toLowerCase()))).toEqual([]);
    }
  }, 60_000);
});
