import type http from 'node:http';
import { WorkflowNotFoundError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHiveApp } from '../api/hive/app.js';
import { createHiveServices, type HiveServices } from '../shared/composition/hive.js';
import { loadConfig } from '../shared/config.js';
import { adminChangeWorkflowId, startUnstartedComplianceJobs } from '../shared/hive/compliance/jobs.js';
import { toHiveErrorBody } from '../shared/hive/errors.js';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import type { SettingsRecord } from '../shared/hive/compliance/schemas.js';
import { admitPerson, createNode, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';
import { pollUntil } from './support/poll.js';
import { bearer, call } from './support/test-platform.js';
import { startWorkerProcess, type WorkerProcess } from './support/worker-process.js';

/**
 * The hive's compliance against the real services and the real worker process: retention sweeps,
 * erasures, legal holds, settings and the embedding sweep run as Temporal workflows, and a worker
 * SIGKILLed mid-sweep leaves a sweep that finishes on the next worker with every memory deleted
 * exactly once. Ages are made by moving `updated_at` back in the database, not by waiting.
 */
let world: HiveWorld;
let worker: WorkerProcess;

beforeAll(async () => {
  world = await startHiveWorld();
  worker = await startWorkerProcess(world.emulated.gateway.env);
}, 180_000);

afterAll(async () => {
  await worker?.stop();
  await world?.close();
});

const db = () => world.hive.db;
const temporal = () => world.hive.temporal.client;
const workerLog = () => `worker:\n${worker.output().slice(-20).join('\n')}`;
const post = (path: string, token: string, body: Record<string, unknown> = {}) => world.post(path, token, body);

async function remember(token: string, body: Record<string, unknown>): Promise<string> {
  const written = await post('/v1/remember', token, body);
  expect(written.status, written.text).toBeLessThan(300);
  return written.body.memory.id;
}

/** Makes memories `days` old: last written (and created) that long ago. */
async function age(ids: string[], days: number): Promise<void> {
  await db().query(`UPDATE hive.memories SET updated_at = now() - make_interval(days => $2), created_at = now() - make_interval(days => $2) WHERE id = ANY($1)`, [ids, days]);
}

const existing = async (ids: string[]) => (await db().query<{ id: string }>(`SELECT id FROM hive.memories WHERE id = ANY($1) ORDER BY id`, [ids])).rows.map((row) => row.id);
const auditActions = async (orgId: string) =>
  (await db().query<{ action: string }>(`SELECT action FROM hive.audit_log WHERE org_id = $1 ORDER BY created_at, id`, [orgId])).rows.map((row) => row.action);
const idsOf = (list: { id: string }[] | undefined) => (list ?? []).map((item) => item.id).sort();
const sorted = (ids: string[]) => [...ids].sort();

describe('role checks', () => {
  it('refuses a non-owner every compliance route but settings, which needs admin on the node', async () => {
    const owner = await signUp(world, 'checkers');
    await createNode(world, owner.token, 'checkers', 'lab');
    const admin = await admitPerson(world, owner.token, { email: 'admin@checkers.test', node: 'checkers', role: 'admin' });
    const reader = await admitPerson(world, owner.token, { email: 'reader@checkers.test', node: 'checkers/lab', role: 'reader' });

    const denied = `This needs the owner role on node checkers; this credential holds admin.`;
    for (const [path, body] of [
      ['/v1/admin/retention', {}],
      ['/v1/admin/erase', { person: 'reader@checkers.test' }],
      ['/v1/admin/hold', { action: 'place', node: 'checkers/lab', reason: 'litigation' }],
      ['/v1/admin/embed', {}],
      ['/v1/admin/job', { id: 'cmp_x' }],
    ] as const) {
      const response = await post(path, admin, body);
      expect([path, response.status, response.body]).toEqual([path, 403, { error: denied }]);
    }
    expect((await post('/v1/admin/retention', reader)).status).toBe(403);
    expect(await auditActions(owner.orgId)).toEqual([]);

    const record = { retention: [], sensitivity: 'internal', audit_row_days: 30 };
    expect((await post('/v1/admin/settings', reader, { node: 'checkers/lab', settings: record })).body).toEqual({ error: 'This needs the admin role on node checkers/lab; this credential holds reader.' });
    const byAdmin = await post('/v1/admin/settings', admin, { node: 'checkers/lab', settings: record });
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body).toMatchObject({ node: { path: 'checkers/lab' }, settings: record, source: 'own' });
  });
});

describe('the reference pages', () => {
  it('list every compliance route with its body', async () => {
    const text = await (await fetch(`${world.baseUrl}/llms.txt`)).text();
    for (const path of ['retention', 'erase', 'hold', 'settings', 'embed', 'job']) expect(text).toContain(`- POST /v1/admin/${path} [token]: `);
    expect(text).toContain('body: { node: string, settings?: { retention: { kind?: "note"');
    expect(text).toContain('body (2): { action: "lift", id: string }');
  });
});

describe('POST /v1/admin/settings', () => {
  it('refuses a partial record with 400, replaces the whole record, and a node below inherits it', async () => {
    const owner = await signUp(world, 'settled');
    await createNode(world, owner.token, 'settled', 'app');
    const read = (node: string) => post('/v1/admin/settings', owner.token, { node });

    expect((await read('settled')).body).toMatchObject({ settings: { retention: [], sensitivity: 'internal', audit_row_days: 365 }, source: 'default', from: null });

    const partial = await post('/v1/admin/settings', owner.token, { node: 'settled', settings: { retention: [{ kind: 'note', max_age_days: 30 }] } });
    expect(partial.status).toBe(400);
    expect(partial.body.error).toMatch(/sensitivity/);
    expect((await read('settled')).body.source).toBe('default');

    const first = { retention: [{ kind: 'note', max_age_days: 30 }, { scope: 'scratch', max_age_days: 7 }], sensitivity: 'confidential', audit_row_days: 90 };
    const replaced = await post('/v1/admin/settings', owner.token, { node: 'settled', settings: first });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ settings: first, source: 'own' });
    expect((await read('settled/app')).body).toMatchObject({ settings: first, source: 'inherited', from: { path: 'settled' } });

    // A second record replaces the first whole: no rule of the first survives.
    const second = { retention: [{ kind: 'fact', scope: 'drafts', max_age_days: 14 }], sensitivity: 'restricted', audit_row_days: 30 };
    await post('/v1/admin/settings', owner.token, { node: 'settled', settings: second });
    expect((await read('settled')).body.settings).toEqual(second);

    const unknownKind = await post('/v1/admin/settings', owner.token, { node: 'settled', settings: { ...second, retention: [{ kind: 'rumour', max_age_days: 1 }] } });
    expect(unknownKind.status).toBe(400);
    expect(await auditActions(owner.orgId)).toEqual(['settings.replaced', 'settings.replaced']);

    // Each replacement ran as its workflow, named by the node and the record (the change's own id and author name no workflow).
    for (const settings of [first, second]) {
      const workflowId = adminChangeWorkflowId({ kind: 'settings.replace', changeId: '', orgId: owner.orgId, nodeId: owner.rootNodeId, settings: settings as SettingsRecord, by: { personId: null, tokenId: '' } });
      const described = await temporal().workflow.getHandle(workflowId).describe();
      expect([described.type, described.status.name]).toEqual(['hiveAdminChangeWorkflow', 'COMPLETED']);
    }
  });
});

describe('POST /v1/admin/retention', () => {
  it('names what would go in a dry run and deletes nothing, then deletes exactly those; supersession, pins and holds keep memories, by schedule too', async () => {
    const owner = await signUp(world, 'keepers');
    await createNode(world, owner.token, 'keepers', 'app');
    await createNode(world, owner.token, 'keepers', 'evidence');
    const record = { retention: [{ kind: 'note', max_age_days: 30 }, { scope: 'scratch', max_age_days: 7 }], sensitivity: 'internal', audit_row_days: 365 };
    expect((await post('/v1/admin/settings', owner.token, { node: 'keepers', settings: record })).status).toBe(200);

    const on = (node: string) => (body: Record<string, unknown>) => remember(owner.token, { node, ...body });
    const app = on('keepers/app');
    const oldNote = await app({ title: 'Old standup notes', body: 'Discussed the release.' });
    const youngNote = await app({ title: 'Recent standup notes', body: 'Discussed the hotfix.' });
    const scratchFact = await app({ scope: 'scratch', kind: 'fact', title: 'Temporary port', body: 'The spike ran on 8081.' });
    const unruled = await app({ kind: 'fact', title: 'Billing currency', body: 'Invoices are in euros.' });
    const retracted = await app({ title: 'CI runner', body: 'Jenkins runs the builds.' });
    const retracting = await app({ title: 'Build system', body: 'GitHub Actions runs the builds.', supersedes: [retracted] });
    const pinned = await app({ title: 'On-call rota', body: 'Weekly.', pinned: true });
    const held = await on('keepers/evidence')({ title: 'Meeting with the vendor', body: 'They promised a refund.' });
    await age([oldNote, retracted, retracting, pinned, held], 40);
    await age([youngNote, scratchFact], 10);
    await age([unruled], 400);
    const placed = await post('/v1/admin/hold', owner.token, { action: 'place', node: 'keepers/evidence', reason: 'vendor dispute' });
    expect(placed.status).toBe(201);
    const all = [oldNote, youngNote, scratchFact, unruled, retracted, retracting, pinned, held];

    const dry = await post('/v1/admin/retention', owner.token, {});
    expect(dry.status, dry.text).toBe(200);
    expect(dry.body).toMatchObject({ object: 'compliance_job', kind: 'retention', apply: false, status: 'completed', result: { dry_run: true } });
    expect(idsOf(dry.body.memories.would_delete)).toEqual(sorted([oldNote, scratchFact]));
    expect(dry.body.memories.would_delete.map((item: { title: string }) => item.title).sort()).toEqual(['Old standup notes', 'Temporary port']);
    expect(dry.body.memories.would_delete.find((item: { id: string }) => item.id === scratchFact)).toMatchObject({ node: { path: 'keepers/app' }, scope: 'scratch', kind: 'fact', max_age_days: 7 });
    const keptReasons = (body: { memories: { kept?: { id: string; reason: string }[] } }) => Object.fromEntries((body.memories.kept ?? []).map((item) => [item.id, item.reason]));
    expect(keptReasons(dry.body)).toEqual({ [retracted]: 'superseded', [retracting]: 'supersedes', [pinned]: 'pinned', [held]: 'legal_hold' });
    expect(await existing(all)).toEqual(sorted(all));

    // Since the dry run another note has expired: applying the dry run deletes only what it named.
    await age([youngNote], 40);
    expect((await post('/v1/admin/retention', owner.token, { from_dry_run: dry.body.id })).status).toBe(400);
    const applied = await post('/v1/admin/retention', owner.token, { apply: true, from_dry_run: dry.body.id });
    expect(applied.status, applied.text).toBe(200);
    expect(applied.body).toMatchObject({ apply: true, status: 'completed', result: { dry_run: false, memories: { deleted: 2, kept: 5 } } });
    expect(idsOf(applied.body.memories.deleted)).toEqual(sorted([oldNote, scratchFact]));
    expect(applied.body.memories.would_delete).toBeUndefined();
    expect(keptReasons(applied.body)).toEqual({ ...keptReasons(dry.body), [youngNote]: 'not_in_dry_run' });
    expect(await existing(all)).toEqual(sorted([youngNote, unruled, retracted, retracting, pinned, held]));
    expect((await post('/v1/admin/retention', owner.token, { apply: true, from_dry_run: applied.body.id })).status).toBe(409);
    expect((await post('/v1/admin/retention', owner.token, { apply: true, from_dry_run: 'cmp_elsewhere' })).status).toBe(404);

    // Each deletion is audited once, on its node, in the page that made it.
    const deletions = (await db().query(`SELECT node_id, detail FROM hive.audit_log WHERE job_id = $1 AND action = 'retention.deleted'`, [applied.body.id])).rows;
    expect(deletions.flatMap((row) => row.detail.memory_ids).sort()).toEqual(sorted([oldNote, scratchFact]));
    expect((await post('/v1/admin/job', owner.token, { id: applied.body.id })).body).toEqual(applied.body);
    expect(await auditActions(owner.orgId)).toEqual(['settings.replaced', 'hold.placed', 'retention.requested', 'retention.dry_run', 'retention.requested', 'retention.deleted', 'retention.completed']);

    // The daily schedule runs the applied sweep of every organisation: the expired note goes, the retraction stays.
    const scheduleId = `hive-retention-${world.hive.config.TEMPORAL_TASK_QUEUE}`;
    const schedule = await temporal().schedule.getHandle(scheduleId).describe();
    expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'hiveRetentionWorkflow' });
    await temporal().schedule.getHandle(scheduleId).trigger();
    const scheduled = await pollUntil(
      async () => (await db().query(`SELECT id, status, result FROM hive.compliance_jobs WHERE org_id IS NULL AND kind = 'retention'`)).rows,
      (rows) => rows.length > 0 && rows.every((row) => row.status === 'completed'),
      { context: workerLog },
    );
    expect(scheduled[0].id.startsWith(scheduleId)).toBe(true);
    expect(await existing(all)).toEqual(sorted([unruled, retracted, retracting, pinned, held]));
    const scheduledDeletion = (await db().query(`SELECT org_id, node_id, person_id, detail FROM hive.audit_log WHERE job_id = ANY($1)`, [scheduled.map((row) => row.id)])).rows;
    expect(scheduledDeletion).toEqual([{ org_id: owner.orgId, node_id: expect.stringMatching(/^nd_/), person_id: null, detail: { memory_ids: [youngNote], rules: [30] } }]);
  }, 120_000);
});

describe('audit rows', () => {
  it('expire by the audit-row lifetime of their node, except under a legal hold', async () => {
    const owner = await signUp(world, 'auditors');
    await createNode(world, owner.token, 'auditors', 'vault');
    await post('/v1/admin/settings', owner.token, { node: 'auditors', settings: { retention: [], sensitivity: 'internal', audit_row_days: 2 } });
    const hold = await post('/v1/admin/hold', owner.token, { action: 'place', node: 'auditors/vault', reason: 'audit' });
    await post('/v1/admin/settings', owner.token, { node: 'auditors/vault', settings: { retention: [], sensitivity: 'restricted', audit_row_days: 2 } });
    await post('/v1/admin/settings', owner.token, { node: 'auditors', settings: { retention: [], sensitivity: 'internal', audit_row_days: 1 } });
    // The first two rows of the root and the vault's rows are three days old; the last root row is one day old.
    await db().query(`UPDATE hive.audit_log SET created_at = created_at - interval '3 days' WHERE org_id = $1`, [owner.orgId]);
    await db().query(
      `UPDATE hive.audit_log SET created_at = now() - interval '30 hours' WHERE id = (SELECT id FROM hive.audit_log WHERE org_id = $1 AND action = 'settings.replaced' AND node_id = $2 ORDER BY created_at DESC LIMIT 1)`,
      [owner.orgId, owner.rootNodeId],
    );
    const before = (await db().query(`SELECT id, node_id, action, created_at FROM hive.audit_log WHERE org_id = $1 ORDER BY created_at`, [owner.orgId])).rows;
    expect(before.map((row) => row.action)).toEqual(['settings.replaced', 'hold.placed', 'settings.replaced', 'settings.replaced']);

    // A dry run removes nothing.
    const dryRun = await post('/v1/admin/retention', owner.token, {});
    expect((await db().query(`SELECT count(*)::int AS n FROM hive.audit_log WHERE id = ANY($1)`, [before.map((row) => row.id)])).rows[0].n).toBe(4);

    const applied = await post('/v1/admin/retention', owner.token, { apply: true });
    // Root rows live one day: both of them go (three days and 30 hours old). The vault's rows are held.
    expect(applied.body.result.audit_rows_expired).toBe(2);
    const after = (await db().query(`SELECT id, node_id, action FROM hive.audit_log WHERE org_id = $1 ORDER BY created_at, id`, [owner.orgId])).rows;
    expect(after.filter((row) => before.some((old) => old.id === row.id)).map((row) => [row.node_id, row.action])).toEqual([
      [hold.body.hold.node.id, 'hold.placed'],
      [hold.body.hold.node.id, 'settings.replaced'],
    ]);
    expect(after.slice(2).map((row) => row.action)).toEqual(['retention.requested', 'retention.dry_run', 'retention.requested', 'retention.completed']);

    // Lifted, the vault's rows (two days' lifetime, three days old) expire with the next sweep; so
    // does a job finished longer ago than the root's lifetime.
    await post('/v1/admin/hold', owner.token, { action: 'lift', id: hold.body.hold.id });
    await db().query(`UPDATE hive.compliance_jobs SET finished_at = now() - interval '3 days' WHERE id = $1`, [dryRun.body.id]);
    const next = await post('/v1/admin/retention', owner.token, { apply: true });
    expect(next.body.result).toMatchObject({ audit_rows_expired: 2, jobs_expired: 1 });
    expect((await post('/v1/admin/job', owner.token, { id: dryRun.body.id })).status).toBe(404);
    expect((await post('/v1/admin/job', owner.token, { id: applied.body.id })).body.status).toBe('completed');
    const left = (await db().query(`SELECT action FROM hive.audit_log WHERE org_id = $1 AND id = ANY($2)`, [owner.orgId, before.map((row) => row.id)])).rows;
    expect(left).toEqual([]);
  }, 60_000);
});

describe('POST /v1/admin/erase', () => {
  it("deletes what the person wrote, anonymises a memory that retracts another and one others wrote too, and removes their events and traits", async () => {
    const owner = await signUp(world, 'erasers');
    await createNode(world, owner.token, 'erasers', 'app');
    const email = 'leaver@erasers.test';
    const leaver = await admitPerson(world, owner.token, { email, node: 'erasers', role: 'member' });
    const { rows: [person] } = await db().query(`SELECT id FROM hive.people WHERE email = $1`, [email]);

    const ownersOld = await remember(owner.token, { node: 'erasers/app', title: 'Deploy target', body: 'Kubernetes.' });
    const ownersShared = await remember(owner.token, { node: 'erasers/app', title: 'Code review', body: 'One approval.' });
    const plain = await remember(leaver, { node: 'erasers/app', title: 'My scratch idea', body: 'Try sqlite for tests.', source: 'session s1' });
    const retracting = await remember(leaver, { node: 'erasers/app', title: 'Deploy target is Nomad', body: 'Kubernetes was dropped.', supersedes: [ownersOld] });
    await remember(leaver, { node: 'erasers/app', title: 'Code review', body: 'Two approvals.', force: true });
    const event = await post('/v1/log', leaver, { node: 'erasers/app', text: 'leaver was here' });
    const trait = await post('/v1/traits', leaver, { action: 'add', trait: 'Prefers tabs', evidence: { text: 'Said so', memory: plain } });
    expect([event.status, trait.status]).toEqual([201, 201]);
    const ownersEvent = await post('/v1/log', owner.token, { node: 'erasers/app', text: 'owner was here' });

    const erased = await post('/v1/admin/erase', owner.token, { person: email.toUpperCase() });
    expect(erased.status, erased.text).toBe(200);
    expect(erased.body).toMatchObject({ kind: 'erasure', status: 'completed', result: { subject: person.id, events_deleted: 1, traits_deleted: 1, memories: { deleted: 1, anonymised: 2 } } });
    expect(idsOf(erased.body.memories.deleted)).toEqual([plain]);
    expect(Object.fromEntries(erased.body.memories.anonymised.map((item: { id: string; reason: string }) => [item.id, item.reason]))).toEqual({ [retracting]: 'retracts', [ownersShared]: 'created_by_another' });

    expect(await existing([plain, retracting, ownersOld, ownersShared])).toEqual(sorted([retracting, ownersOld, ownersShared]));
    // The retraction keeps its content and what it retracts, without the person's name.
    const kept = (await post('/v1/memory/get', owner.token, { id: retracting })).body;
    expect(kept).toMatchObject({ body: 'Kubernetes was dropped.', supersedes: [ownersOld], provenance: { created: { by: null, token_id: null, source: null }, updated: { by: null } } });
    expect((await post('/v1/memory/get', owner.token, { id: ownersOld })).body).toMatchObject({ status: 'superseded', superseded_by: retracting });
    const shared = (await post('/v1/memory/get', owner.token, { id: ownersShared })).body;
    expect(shared).toMatchObject({ body: 'Two approvals.', provenance: { created: { by: { email: owner.email } }, updated: { by: null, token_id: null } } });
    expect(shared.versions.map((version: { written: { by: { email: string } | null } }) => version.written.by?.email)).toEqual([owner.email]);

    const traces = (await db().query(
      `SELECT (SELECT count(*)::int FROM hive.memories WHERE $1 IN (created_by, updated_by, verified_by, forgotten_by)) AS memories,
              (SELECT count(*)::int FROM hive.memory_versions WHERE written_by = $1) AS versions,
              (SELECT count(*)::int FROM hive.events WHERE person_id = $1) AS events,
              (SELECT count(*)::int FROM hive.traits WHERE person_id = $1) AS traits`,
      [person.id],
    )).rows[0];
    expect(traces).toEqual({ memories: 0, versions: 0, events: 0, traits: 0 });
    expect((await db().query(`SELECT count(*)::int AS n FROM hive.events WHERE id = $1`, [ownersEvent.body.id])).rows[0].n).toBe(1);
    expect(await auditActions(owner.orgId)).toEqual(['erasure.requested', 'erasure.memories', 'erasure.events', 'erasure.completed']);

    expect((await post('/v1/admin/erase', owner.token, { person: 'nobody@erasers.test' })).status).toBe(404);
  }, 60_000);

  it('under a legal hold answers 409 with the would-be result, deletes nothing, and runs queued once the hold lifts', async () => {
    const owner = await signUp(world, 'holders');
    await createNode(world, owner.token, 'holders', 'case');
    const email = 'witness@holders.test';
    const witness = await admitPerson(world, owner.token, { email, node: 'holders', role: 'member' });
    const memories = [
      await remember(witness, { node: 'holders/case', title: 'What I saw', body: 'The lorry was red.' }),
      await remember(witness, { node: 'holders', title: 'Lunch order', body: 'Soup.' }),
    ];
    await post('/v1/log', witness, { node: 'holders/case', text: 'statement given' });
    const hold = await post('/v1/admin/hold', owner.token, { action: 'place', node: 'holders/case', reason: 'court order 12' });
    expect(hold.body.hold).toMatchObject({ id: expect.stringMatching(/^hld_/), node: { path: 'holders/case' }, status: 'active', reason: 'court order 12' });

    const { rows: [person] } = await db().query(`SELECT id FROM hive.people WHERE email = $1`, [email]);
    const refused = await post('/v1/admin/erase', owner.token, { person: person.id });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatch(/legal hold covers what witness@holders.test wrote .*nothing was erased.*queued/);
    expect(refused.body).toMatchObject({
      would_be: { memories: { deleted: 2, anonymised: 0 }, events_deleted: 1, traits_deleted: 0 },
      holds: [{ id: hold.body.hold.id, node: 'holders/case' }],
      job: { kind: 'erasure', status: 'queued' },
    });
    expect(idsOf(refused.body.job.memories.would_delete)).toEqual(sorted(memories));
    const jobId = refused.body.job.id;

    // Nothing went, and nothing goes while the hold stands.
    expect(await existing(memories)).toEqual(sorted(memories));
    const events = async () => (await db().query(`SELECT count(*)::int AS n FROM hive.events WHERE person_id = $1`, [person.id])).rows[0].n;
    expect(await events()).toBe(1);
    // The workflow has tried its first page and found the hold (the plan's pages, then the page: two activities done).
    const activitiesDone = async () => (await temporal().workflow.getHandle(jobId).fetchHistory()).events?.filter((event) => event.activityTaskCompletedEventAttributes).length ?? 0;
    await pollUntil(activitiesDone, (count) => count >= 2, { context: workerLog });
    expect((await post('/v1/admin/job', owner.token, { id: jobId })).body).toMatchObject({ status: 'queued', memories: { would_delete: expect.any(Array) } });
    expect(await existing(memories)).toEqual(sorted(memories));

    const listed = await post('/v1/admin/hold', owner.token, { action: 'list' });
    expect(listed.body.data.map((item: { id: string }) => item.id)).toEqual([hold.body.hold.id]);
    const lifted = await post('/v1/admin/hold', owner.token, { action: 'lift', id: hold.body.hold.id });
    expect(lifted.status).toBe(200);
    expect(lifted.body).toMatchObject({ hold: { status: 'lifted' }, woken_erasures: [jobId] });
    // Placing and lifting ran as workflows, readable in the Web UI; the lift's signals came from its workflow.
    const { rows: [{ placed_token: tokenId }] } = await db().query(`SELECT placed_token FROM hive.legal_holds WHERE id = $1`, [hold.body.hold.id]);
    const by = { personId: null, tokenId };
    for (const workflowId of [
      adminChangeWorkflowId({ kind: 'hold.place', holdId: '', orgId: owner.orgId, nodeId: hold.body.hold.node.id, reason: 'court order 12', by }),
      adminChangeWorkflowId({ kind: 'hold.lift', holdId: hold.body.hold.id, orgId: owner.orgId, by }),
    ]) {
      const described = await temporal().workflow.getHandle(workflowId).describe();
      expect([described.type, described.status.name]).toEqual(['hiveAdminChangeWorkflow', 'COMPLETED']);
    }
    const liftHistory = await temporal().workflow.getHandle(`hive-hold-${hold.body.hold.id}-lifted`).fetchHistory();
    expect(liftHistory.events?.filter((event) => event.signalExternalWorkflowExecutionInitiatedEventAttributes).map((event) => event.signalExternalWorkflowExecutionInitiatedEventAttributes!.workflowExecution?.workflowId)).toEqual([jobId]);

    const done = await pollUntil(() => post('/v1/admin/job', owner.token, { id: jobId }), (response) => response.body.status === 'completed', { context: workerLog });
    expect(idsOf(done.body.memories.deleted)).toEqual(sorted(memories));
    expect(done.body.result).toMatchObject({ events_deleted: 1, memories: { deleted: 2 } });
    expect(await existing(memories)).toEqual([]);
    expect(await events()).toBe(0);
    expect((await post('/v1/admin/hold', owner.token, { action: 'list' })).body.data).toEqual([]);
    expect(await auditActions(owner.orgId)).toEqual(['hold.placed', 'erasure.queued', 'hold.lifted', 'erasure.memories', 'erasure.memories', 'erasure.events', 'erasure.completed']);
  }, 60_000);
});

describe('a job whose workflow could not start', () => {
  // A second hive over the same database whose Temporal is away: nothing listens on port 1.
  let away: { hive: HiveServices; server: http.Server; baseUrl: string };
  beforeAll(async () => {
    const hive = createHiveServices(loadConfig({ ...world.emulated.gateway.env, TEMPORAL_ADDRESS: '127.0.0.1:1' }), 'test-hive-temporal-away');
    await hive.ready;
    const server = await listen(createHiveApp(hive), 0, '127.0.0.1', { errorBody: toHiveErrorBody });
    away = { hive, server, baseUrl: serverUrl(server) };
  });
  afterAll(async () => {
    if (!away) return;
    away.server.closeAllConnections();
    await new Promise((resolve) => away.server.close(resolve));
    await away.hive.close();
  });
  const postAway = (path: string, token: string, body: Record<string, unknown>) => call(away.baseUrl, path, { method: 'POST', json: body, headers: bearer(token) });
  const jobsOf = async (orgId: string) => (await db().query(`SELECT id, status, workflow_started FROM hive.compliance_jobs WHERE org_id = $1`, [orgId])).rows;

  it('answers an erasure 202 with its job, not 503, makes one job, and the start sweep runs it', async () => {
    const owner = await signUp(world, 'unreached');
    const email = 'leaver@unreached.test';
    const leaver = await admitPerson(world, owner.token, { email, node: 'unreached', role: 'member' });
    const written = await remember(leaver, { node: 'unreached', title: 'Scratch idea', body: 'Try sqlite for tests.' });

    const requested = await postAway('/v1/admin/erase', owner.token, { person: email });
    expect(requested.status, requested.text).toBe(202);
    expect(requested.body).toMatchObject({ id: expect.stringMatching(/^cmp_/), object: 'compliance_job', kind: 'erasure', status: 'running', memories: { would_delete: [{ id: written }] } });
    const jobId = requested.body.id;
    expect(await jobsOf(owner.orgId)).toEqual([{ id: jobId, status: 'running', workflow_started: false }]);
    expect(await auditActions(owner.orgId)).toEqual(['erasure.requested']);
    await expect(temporal().workflow.getHandle(jobId).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);

    // The worker's sweep, against the real Temporal: it starts the workflow under the job's id, and the worker runs it.
    expect(await startUnstartedComplianceJobs(world.hive, 0)).toBeGreaterThanOrEqual(1);
    expect(await temporal().workflow.getHandle(jobId).result()).toBe(jobId);
    expect(await jobsOf(owner.orgId)).toEqual([{ id: jobId, status: 'completed', workflow_started: true }]);
    expect(await existing([written])).toEqual([]);
    expect(await auditActions(owner.orgId)).toEqual(['erasure.requested', 'erasure.memories', 'erasure.completed']);
  }, 60_000);

  it('keeps the 409 of a legal hold, and a workflow that closed without its job is not started again', async () => {
    const owner = await signUp(world, 'unreachedhold');
    const email = 'witness@unreachedhold.test';
    const witness = await admitPerson(world, owner.token, { email, node: 'unreachedhold', role: 'member' });
    const written = await remember(witness, { node: 'unreachedhold', title: 'What I saw', body: 'The lorry was red.' });
    expect((await post('/v1/admin/hold', owner.token, { action: 'place', node: 'unreachedhold', reason: 'court order 7' })).status).toBe(201);

    const refused = await postAway('/v1/admin/erase', owner.token, { person: email });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body).toMatchObject({ would_be: { memories: { deleted: 1 } }, job: { kind: 'erasure', status: 'queued' } });
    const jobId = refused.body.job.id;
    expect(await jobsOf(owner.orgId)).toEqual([{ id: jobId, status: 'queued', workflow_started: false }]);

    expect(await startUnstartedComplianceJobs(world.hive, 0)).toBeGreaterThanOrEqual(1);
    const handle = temporal().workflow.getHandle(jobId);
    const started = await handle.describe();
    expect([started.type, started.status.name]).toEqual(['hiveErasureWorkflow', 'RUNNING']);
    // An operator ends it; the job stays queued, for them, and no sweep starts it again.
    await handle.terminate('stopped by an operator');
    await startUnstartedComplianceJobs(world.hive, 0);
    const after = await handle.describe();
    expect([after.runId, after.status.name]).toEqual([started.runId, 'TERMINATED']);
    expect(await jobsOf(owner.orgId)).toEqual([{ id: jobId, status: 'queued', workflow_started: true }]);
    expect(await existing([written])).toEqual([written]);
  }, 60_000);
});

describe('POST /v1/admin/embed', () => {
  it('embeds memories never embedded and those embedded with another model, and leaves the current ones', async () => {
    const owner = await signUp(world, 'embedders');
    const ids = [
      await remember(owner.token, { node: 'embedders', title: 'Queue backend', body: 'Redis streams.' }),
      await remember(owner.token, { node: 'embedders', title: 'Cache backend', body: 'Memcached.' }),
      await remember(owner.token, { node: 'embedders', title: 'Search backend', body: 'PostgreSQL full text.' }),
    ];
    const [missed, olderModel, current] = ids as [string, string, string];
    const state = async () => (await db().query(`SELECT id, embedding_model, embedded_version, version, embedding IS NOT NULL AS has_vector FROM hive.memories WHERE id = ANY($1) ORDER BY id`, [ids])).rows;
    // The worker's queue consumer embeds every write; then one is as if its job was lost, one as if embedded before a model change.
    await pollUntil(state, (rows) => rows.every((row) => row.embedded_version === row.version), { context: workerLog });
    await db().query(`UPDATE hive.memories SET embedding = NULL, embedding_model = NULL, embedded_version = NULL WHERE id = $1`, [missed]);
    await db().query(`UPDATE hive.memories SET embedding_model = 'svc:openai/text-embedding-ada-002' WHERE id = $1`, [olderModel]);
    const currentBefore = (await db().query(`SELECT embedding::text AS vector FROM hive.memories WHERE id = $1`, [current])).rows[0].vector;

    const swept = await post('/v1/admin/embed', owner.token, {});
    expect(swept.status, swept.text).toBe(200);
    expect(swept.body).toMatchObject({ kind: 'embed', status: 'completed', result: { model: world.hive.config.HIVE_EMBEDDING_MODEL, embedded: 2, stale: 0 } });
    const model = world.hive.config.HIVE_EMBEDDING_MODEL;
    expect((await state()).map((row) => [row.id, row.embedding_model, row.embedded_version === row.version, row.has_vector])).toEqual(sorted(ids).map((id) => [id, model, true, true]));
    expect((await db().query(`SELECT embedding::text AS vector FROM hive.memories WHERE id = $1`, [current])).rows[0].vector).toBe(currentBefore);
    expect(await auditActions(owner.orgId)).toEqual(['embed.requested', 'embed.completed']);

    const again = await post('/v1/admin/embed', owner.token, {});
    expect(again.body.result).toMatchObject({ embedded: 0, pages: 0 });
    const schedule = await temporal().schedule.getHandle(`hive-embed-sweep-${world.hive.config.TEMPORAL_TASK_QUEUE}`).describe();
    expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'hiveEmbedSweepWorkflow' });
  }, 60_000);
});

describe('a change asked while no worker runs', () => {
  it('answers 503 with Retry-After, stays queued, and the same request sent again once a worker runs joins it: one hold, one settings change', async () => {
    const owner = await signUp(world, 'outage');
    await createNode(world, owner.token, 'outage', 'case');
    const placement = { action: 'place', node: 'outage/case', reason: 'regulator inquiry' };
    const replacement = { node: 'outage', settings: { retention: [{ kind: 'note', max_age_days: 30 }], sensitivity: 'confidential', audit_row_days: 90 } };
    const holds = async () => (await post('/v1/admin/hold', owner.token, { action: 'list', include_lifted: true })).body.data;

    await worker.stop();
    try {
      // Both wait out the bound together, each on its own workflow that no worker polls.
      const answers = await Promise.all([post('/v1/admin/hold', owner.token, placement), post('/v1/admin/settings', owner.token, replacement)]);
      for (const answer of answers) {
        expect([answer.status, answer.headers.get('retry-after')]).toEqual([503, '10']);
        expect(answer.body).toEqual({ error: expect.stringMatching(/^The change is queued: no worker has run it within 10 seconds, and it applies once one does\. Send the same request again to see it; it joins this change/) });
      }
      expect(await holds()).toEqual([]);
      expect(await auditActions(owner.orgId)).toEqual([]);
    } finally {
      await worker.restart();
    }

    // Sent again: it joins the queued change (or, once that has run, finds its hold standing), so there is one hold and the answer carries it.
    const placed = await post('/v1/admin/hold', owner.token, placement);
    expect(placed.status, placed.text).toBe(201);
    expect(placed.body.hold).toMatchObject({ id: expect.stringMatching(/^hld_/), node: { path: 'outage/case' }, reason: 'regulator inquiry', status: 'active' });
    expect(await holds()).toEqual([placed.body.hold]);
    const replaced = await post('/v1/admin/settings', owner.token, replacement);
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body).toMatchObject({ settings: replacement.settings, source: 'own' });
    expect((await auditActions(owner.orgId)).sort()).toEqual(['hold.placed', 'settings.replaced']);

    // Once the hold is lifted, the same placement is a new hold.
    expect((await post('/v1/admin/hold', owner.token, { action: 'lift', id: placed.body.hold.id })).status).toBe(200);
    const again = await post('/v1/admin/hold', owner.token, placement);
    expect(again.status, again.text).toBe(201);
    expect(again.body.hold.id).not.toBe(placed.body.hold.id);
    expect((await holds()).map((hold: { id: string; status: string }) => [hold.id, hold.status])).toEqual([[placed.body.hold.id, 'lifted'], [again.body.hold.id, 'active']]);
  }, 300_000);
});

const { PendingActivityState } = proto.temporal.api.enums.v1;

describe('a worker killed mid-sweep', () => {
  it('deletes nothing twice and misses nothing: the sweep finishes on the next worker', async () => {
    const owner = await signUp(world, 'sweepers');
    await post('/v1/admin/settings', owner.token, { node: 'sweepers', settings: { retention: [{ kind: 'note', max_age_days: 1 }], sensitivity: 'internal', audit_row_days: 365 } });
    // 600 expired notes: three pages of 250, 250 and 100 (shared/hive/compliance/jobs.ts PAGE_SIZE).
    const { rows } = await db().query<{ id: string }>(
      `INSERT INTO hive.memories (id, org_id, node_id, scope, title, title_key, body, kind, updated_at, created_at)
       SELECT 'mem_sweep' || lpad(g::text, 19, '0'), $1, $2, 'general', 'Sweep note ' || g, 'sweep note ' || g, 'Old.', 'note', now() - interval '10 days', now() - interval '10 days'
         FROM generate_series(1, 600) g
       RETURNING id`,
      [owner.orgId, owner.rootNodeId],
    );
    const seeded = sorted(rows.map((row) => row.id));

    // The last page's first memory is locked, so the kill lands while that page's activity waits on it.
    const blocker = await db().connect();
    let jobId = '';
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT id FROM hive.memories WHERE id = $1 FOR UPDATE`, [seeded[500]]);
      const started = await post('/v1/admin/retention', owner.token, { apply: true, wait_seconds: 0 });
      expect(started.status, started.text).toBe(202);
      expect(started.body.status).toBe('running');
      jobId = started.body.id;

      const settled = async () => (await db().query(`SELECT count(*)::int AS n FROM hive.compliance_items WHERE job_id = $1 AND outcome = 'deleted'`, [jobId])).rows[0].n;
      const pageRunning = async () => {
        const pending = (await temporal().workflow.getHandle(jobId).describe()).raw.pendingActivities ?? [];
        return pending.filter((activity) => activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_STARTED && activity.activityType?.name === 'applyHiveRetentionPage');
      };
      await pollUntil(async () => ({ settled: await settled(), running: await pageRunning() }), (now) => now.settled === 500 && now.running.length === 1, { context: workerLog });
      const killed = worker.pid!;
      const held = await pageRunning();
      expect(held[0]!.lastWorkerIdentity?.startsWith(`${killed}@`)).toBe(true);
      await worker.kill('SIGKILL');
      expect(await settled()).toBe(500);
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    await worker.restart();

    const done = await pollUntil(() => post('/v1/admin/job', owner.token, { id: jobId }), (response) => response.body.status === 'completed', { timeoutMs: 120_000, context: workerLog });
    expect(done.body.result.memories).toEqual({ deleted: 600 });
    expect(await existing(seeded)).toEqual([]);
    const audited = (await db().query(`SELECT detail FROM hive.audit_log WHERE job_id = $1 AND action = 'retention.deleted'`, [jobId])).rows.flatMap((row) => row.detail.memory_ids as string[]);
    // Every memory deleted is audited once: none twice, none missed.
    expect(audited.length).toBe(600);
    expect(sorted(audited)).toEqual(seeded);
    const outcomes = (await db().query(`SELECT outcome, count(*)::int AS n FROM hive.compliance_items WHERE job_id = $1 GROUP BY outcome`, [jobId])).rows;
    expect(outcomes).toEqual([{ outcome: 'deleted', n: 600 }]);
    expect(await temporal().workflow.getHandle(jobId).result()).toMatchObject({ dry_run: false, memories: { deleted: 600 } });
  }, 240_000);
});
