import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitPerson, createNode, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';

let world: HiveWorld;
let owner: HiveOwner;
let other: HiveOwner;
beforeAll(async () => {
  world = await startHiveWorld();
  owner = await signUp(world, 'umbrella');
  other = await signUp(world, 'cyberdyne');
  await createNode(world, owner.token, 'umbrella', 'api');
  await createNode(world, owner.token, 'umbrella', 'web');
});
afterAll(async () => {
  await world?.close();
});

const task = (body: Record<string, unknown>, token = owner.token) => world.post('/v1/task', token, body);
const hoursFromNow = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString();

describe('POST /v1/task', () => {
  it('adds, lists, closes and drops tasks; a closed task stays closed', async () => {
    const added = await task({ action: 'add', node: 'umbrella/api', title: 'Rotate the signing key', body: 'Before the audit.', due: hoursFromNow(-1), assignee: 'me' });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ object: 'task', status: 'open', title: 'Rotate the signing key', node: { path: 'umbrella/api' }, due: true, assignee: { email: owner.email }, closed: null });
    expect(added.body.id).toMatch(/^tsk_/);
    const later = await task({ action: 'add', node: 'umbrella/web', title: 'Upgrade the bundler' });
    expect(later.body).toMatchObject({ due_at: null, due: false, assignee: null });

    const listed = await task({ action: 'list' });
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((row: { id: string }) => row.id)).toEqual(expect.arrayContaining([added.body.id, later.body.id]));
    const underApi = await task({ action: 'list', node: 'umbrella/api' });
    expect(underApi.body.data.map((row: { id: string }) => row.id)).toContain(added.body.id);
    expect(underApi.body.data.map((row: { id: string }) => row.id)).not.toContain(later.body.id);

    const done = await task({ action: 'done', id: added.body.id, note: 'Rotated on the 3rd.' });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'done', due: false, closed: { note: 'Rotated on the 3rd.', token_id: expect.stringMatching(/^tok_/) } });
    const again = await task({ action: 'drop', id: added.body.id });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/already done/);

    const dropped = await task({ action: 'drop', id: later.body.id });
    expect(dropped.body.status).toBe('dropped');
    const open = await task({ action: 'list', node: 'umbrella' });
    expect(open.body.data.map((row: { id: string }) => row.id)).not.toContain(added.body.id);
    const closed = await task({ action: 'list', node: 'umbrella', status: 'all' });
    expect(closed.body.data.map((row: { id: string; status: string }) => [row.id, row.status])).toEqual(expect.arrayContaining([[added.body.id, 'done'], [later.body.id, 'dropped']]));
  });

  it('answers what is due, soonest first; snoozing moves the due date and keeps the first', async () => {
    const overdue = await task({ action: 'add', node: 'umbrella/api', title: 'Renew the certificate', due: hoursFromNow(-48) });
    const dueSoon = await task({ action: 'add', node: 'umbrella/api', title: 'Answer the pen-test report', due: hoursFromNow(-2) });
    const nextWeek = await task({ action: 'add', node: 'umbrella/api', title: 'Plan the migration', due: hoursFromNow(24 * 7) });

    const due = await task({ action: 'due', node: 'umbrella/api' });
    const ids = due.body.data.map((row: { id: string }) => row.id);
    expect(ids.indexOf(overdue.body.id)).toBeGreaterThanOrEqual(0);
    expect(ids.indexOf(overdue.body.id)).toBeLessThan(ids.indexOf(dueSoon.body.id));
    expect(ids).not.toContain(nextWeek.body.id);
    const withinWeeks = await task({ action: 'due', node: 'umbrella/api', within_hours: 24 * 8 });
    expect(withinWeeks.body.data.map((row: { id: string }) => row.id)).toContain(nextWeek.body.id);

    const until = hoursFromNow(3);
    const snoozed = await task({ action: 'snooze', id: overdue.body.id, until });
    expect(snoozed.status).toBe(200);
    expect(snoozed.body).toMatchObject({ status: 'open', due: false, snoozes: 1, due_at: until, first_due_at: overdue.body.due_at });
    expect((await task({ action: 'due', node: 'umbrella/api' })).body.data.map((row: { id: string }) => row.id)).not.toContain(overdue.body.id);
    const byHours = await task({ action: 'snooze', id: dueSoon.body.id, hours: 1 });
    expect(byHours.body.snoozes).toBe(1);
    expect(Date.parse(byHours.body.due_at)).toBeGreaterThan(Date.now());

    expect((await task({ action: 'snooze', id: nextWeek.body.id, until: hoursFromNow(-1) })).status).toBe(400);
    expect((await task({ action: 'snooze', id: nextWeek.body.id })).status).toBe(400);
    expect((await task({ action: 'snooze', id: nextWeek.body.id, hours: 1, until })).status).toBe(400);
  });

  it('filters by assignee and refuses an address outside the organisation', async () => {
    const dev = await admitPerson(world, owner.token, { email: 'dev@umbrella.test', node: 'umbrella/web', role: 'member' });
    const assigned = await task({ action: 'add', node: 'umbrella/web', title: 'Fix the login form', assignee: 'dev@umbrella.test' });
    expect(assigned.body.assignee).toMatchObject({ email: 'dev@umbrella.test' });
    const mine = await task({ action: 'list', assignee: 'me' }, dev);
    expect(mine.body.data.map((row: { id: string }) => row.id)).toEqual([assigned.body.id]);
    const stranger = await task({ action: 'add', node: 'umbrella/web', title: 'Nope', assignee: other.email });
    expect(stranger.status).toBe(404);
  });

  it('refuses unknown actions and fields, a reader writing, and every probe from outside the reach', async () => {
    expect((await task({ action: 'archive', id: 'tsk_x' })).status).toBe(400);
    expect((await task({ action: 'add', node: 'umbrella/api', title: 'x', colour: 'red' })).status).toBe(400);
    expect((await world.post('/v1/task', undefined, { action: 'list' })).status).toBe(401);

    const secret = await task({ action: 'add', node: 'umbrella/api', title: 'Internal task' });
    const reader = await admitPerson(world, owner.token, { email: 'reader@umbrella.test', node: 'umbrella/api', role: 'reader' });
    expect((await task({ action: 'list', node: 'umbrella/api' }, reader)).body.data.map((row: { id: string }) => row.id)).toContain(secret.body.id);
    const refused = await task({ action: 'done', id: secret.body.id }, reader);
    expect(refused.status).toBe(403);
    expect((await task({ action: 'add', node: 'umbrella/api', title: 'x' }, reader)).status).toBe(403);

    // Another organisation: the task is not there, and its node answers as a missing one.
    expect((await task({ action: 'done', id: secret.body.id }, other.token)).status).toBe(404);
    expect((await task({ action: 'list', node: 'umbrella/api' }, other.token)).status).toBe(403);
    expect((await task({ action: 'list' }, other.token)).body.data.map((row: { id: string }) => row.id)).not.toContain(secret.body.id);
    expect((await task({ action: 'add', node: 'umbrella/api', title: 'x' }, other.token)).status).toBe(403);
    const { rows } = await world.hive.db.query(`SELECT status FROM hive.tasks WHERE id = $1`, [secret.body.id]);
    expect(rows[0].status).toBe('open');
  });
});
