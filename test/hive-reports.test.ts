import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hiveRouteTable } from '../api/hive/app.js';
import { admitPerson, createNode, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';

/**
 * Every report on a seeded store: one organisation with two projects, memories of several kinds,
 * pinned, superseded, forgotten, aged (by moving their timestamps back in the database), events
 * and tasks; a second organisation whose store must never show up.
 */
let world: HiveWorld;
let owner: HiveOwner;
let stranger: HiveOwner;
const seeded: Record<string, string> = {};

const remember = async (body: Record<string, unknown>) => {
  const response = await world.post('/v1/remember', owner.token, body);
  if (response.status >= 300) throw new Error(`remember failed: ${response.status} ${response.text}`);
  return response.body.memory.id as string;
};
const ageMemory = (id: string, days: number) =>
  world.hive.db.query(`UPDATE hive.memories SET updated_at = now() - make_interval(days => $2), created_at = now() - make_interval(days => $2) WHERE id = $1`, [id, days]);

beforeAll(async () => {
  world = await startHiveWorld();
  owner = await signUp(world, 'globex');
  stranger = await signUp(world, 'soylent');
  await createNode(world, owner.token, 'globex', 'billing');
  await createNode(world, owner.token, 'globex', 'portal');

  seeded.guardrail = await remember({ node: 'globex', kind: 'guardrail', scope: 'security', title: 'Secrets stay in the vault', body: 'Never commit a secret.' });
  seeded.deploy = await remember({ node: 'globex/billing', scope: 'release', title: 'Deploy window', body: 'Deploy billing on Tuesdays.', pinned: true });
  seeded.rollback = await remember({ node: 'globex/billing', scope: 'release', title: 'Rollback procedure', kind: 'procedure', body: 'Deploy the previous tag to roll back.' });
  seeded.freeze = await remember({ node: 'globex/billing', scope: 'release', title: 'Deploy freeze', kind: 'decision', body: 'No deploy during month-end close.' });
  seeded.currency = await remember({ node: 'globex/billing', scope: 'domain', title: 'Currency', kind: 'fact', body: 'Amounts are in cents.\nSecond line.' });
  seeded.oldRunner = await remember({ node: 'globex/billing', scope: 'ci', title: 'CI runner', body: 'Jenkins.' });
  seeded.newRunner = await remember({ node: 'globex/billing', scope: 'ci', title: 'Build system', body: 'GitHub Actions.', supersedes: [seeded.oldRunner] });
  seeded.ancient = await remember({ node: 'globex/billing', scope: 'domain', title: 'Legacy invoices', body: 'Invoices before 2019 live in the archive.' });
  seeded.twin = await remember({ node: 'globex/portal', scope: 'domain', title: 'Currency', kind: 'fact', body: 'The portal shows euros.' });
  seeded.forgotten = await remember({ node: 'globex/portal', title: 'Temporary flag', body: 'Remove after launch.' });
  seeded.about = (await world.post('/v1/task', owner.token, { action: 'add', node: 'globex/portal', title: 'Remove the temporary flag', memory: seeded.forgotten })).body.id;
  expect((await world.post('/v1/memory/forget', owner.token, { id: seeded.forgotten })).status).toBe(200);
  seeded.event = (await world.post('/v1/log', owner.token, { node: 'globex/billing', text: 'Deployed billing 4.2' })).body.id;
  seeded.overdue = (await world.post('/v1/task', owner.token, { action: 'add', node: 'globex/billing', title: 'Rotate keys', due: new Date(Date.now() - 3_600_000).toISOString() })).body.id;

  await ageMemory(seeded.ancient, 200);
  await ageMemory(seeded.currency, 45);

  await world.post('/v1/remember', stranger.token, { node: 'soylent', title: 'Deploy window', body: 'Deploy soylent on Mondays.', pinned: true });
});
afterAll(async () => {
  await world?.close();
});

const report = (path: string, body: Record<string, unknown> = {}, token = owner.token) => world.post(path, token, body);

describe('POST /v1/stats', () => {
  it('counts current memories by type, scope and age, and every memory by tier, inside the reach', async () => {
    const answer = await report('/v1/stats');
    expect(answer.status).toBe(200);
    expect(answer.body.by_type).toEqual({ note: 3, procedure: 1, decision: 1, fact: 2, guardrail: 1 });
    expect(answer.body.by_tier).toEqual({ pinned: 1, active: 7, superseded: 1, forgotten: 1 });
    expect(answer.body.by_scope).toEqual({ security: 1, release: 3, domain: 3, ci: 1 });
    expect(answer.body.by_age).toEqual({ day: 6, quarter: 1, older: 1 });
    expect(answer.body.totals).toMatchObject({ memories: 8, superseded: 1, forgotten: 1, events_7d: 1, open_tasks: 2, overdue_tasks: 1, nodes: 3 });

    const billing = await report('/v1/stats', { node: 'globex/billing' });
    expect(billing.body.by_scope).toEqual({ release: 3, domain: 2, ci: 1 });
    expect(billing.body.node).toMatchObject({ path: 'globex/billing' });

    const theirs = await report('/v1/stats', {}, stranger.token);
    expect(theirs.body.totals.memories).toBe(1);
    expect((await report('/v1/stats', { node: 'globex' }, stranger.token)).status).toBe(403);
  });
});

describe('POST /v1/map', () => {
  it('lists the scopes of each node, the pins, the recent tombstones and the measures', async () => {
    const answer = await report('/v1/map');
    expect(answer.status).toBe(200);
    expect(answer.body.scopes.map((row: { node: { path: string }; scope: string; memories: number }) => `${row.node.path}:${row.scope}:${row.memories}`)).toEqual([
      'globex:security:1',
      'globex/billing:ci:1',
      'globex/billing:domain:2',
      'globex/billing:release:3',
      'globex/portal:domain:1',
    ]);
    expect(answer.body.scopes.find((row: { scope: string }) => row.scope === 'release').kinds).toEqual({ note: 1, procedure: 1, decision: 1 });
    expect(answer.body.pins.map((pin: { id: string }) => pin.id)).toEqual([seeded.deploy]);
    expect(answer.body.recent_tombstones.map((tombstone: { id: string; status: string }) => [tombstone.id, tombstone.status])).toEqual([[seeded.forgotten, 'forgotten']]);
    expect(answer.body.measures).toMatchObject({ memories: 8, embedded: 0, embedded_share: 0 });
  });
});

describe('POST /v1/coverage', () => {
  it('says what the hive holds near a subject: covered, thin or nothing', async () => {
    const covered = await report('/v1/coverage', { subject: 'deploy' });
    expect(covered.status).toBe(200);
    expect(covered.body.verdict).toBe('covered');
    expect(covered.body.memories.map((memory: { id: string }) => memory.id)).toEqual(expect.arrayContaining([seeded.deploy, seeded.rollback, seeded.freeze]));
    expect(covered.body.memories.map((memory: { id: string }) => memory.id)).not.toContain(seeded.forgotten);
    expect(covered.body.by_scope.release).toBe(3);
    expect(JSON.stringify(covered.body)).not.toContain('soylent');

    expect((await report('/v1/coverage', { subject: 'invoices archive' })).body).toMatchObject({ verdict: 'thin', matches: 1 });
    expect((await report('/v1/coverage', { subject: 'kubernetes helm' })).body).toMatchObject({ verdict: 'none', matches: 0 });
    expect((await report('/v1/coverage', { subject: 'deploy', node: 'globex/portal' })).body.verdict).toBe('none');
  });
});

describe('POST /v1/review', () => {
  it('finds stale memories, load-bearing ones due for re-confirmation, and likely duplicates', async () => {
    const answer = await report('/v1/review');
    expect(answer.status).toBe(200);
    expect(answer.body.stale.map((memory: { id: string }) => memory.id)).toEqual([seeded.ancient]);
    expect(answer.body.due_for_reconfirmation.map((memory: { id: string }) => memory.id)).toEqual([seeded.currency]);
    expect(answer.body.duplicates).toHaveLength(1);
    expect(answer.body.duplicates[0]).toMatchObject({ reason: 'same_title', similarity: null });
    expect([...answer.body.duplicates[0].ids].sort()).toEqual([seeded.currency, seeded.twin].sort());

    // Verifying a memory re-confirms it.
    await world.post('/v1/memory/verify', owner.token, { id: seeded.currency });
    expect((await report('/v1/review')).body.due_for_reconfirmation).toEqual([]);
    expect((await report('/v1/review', { stale_days: 365 })).body.stale).toEqual([]);
  });
});

describe('POST /v1/doctor', () => {
  it('finds dangling supersession links, orphans and index drift, and is healthy on a clean store', async () => {
    // The replacement of a superseded memory is forgotten (with force): the old one's link now dangles.
    const old = await remember({ node: 'globex/portal', title: 'Old auth', body: 'Sessions in memory.' });
    const replacement = await remember({ node: 'globex/portal', title: 'New auth', body: 'Sessions in Redis.', supersedes: [old] });
    expect((await world.post('/v1/memory/forget', owner.token, { id: replacement, force: true })).status).toBe(200);
    await world.hive.db.query(`UPDATE hive.memories SET updated_at = now() - interval '1 hour' WHERE id = $1`, [seeded.rollback]);

    const answer = await report('/v1/doctor', { node: 'globex' });
    expect(answer.status).toBe(200);
    expect(answer.body.healthy).toBe(false);
    expect(answer.body.dangling_supersessions).toEqual([{ id: old, node: 'globex/portal', superseded_by: replacement, problem: 'replacement_forgotten' }]);
    expect(answer.body.orphans).toEqual([{ what: 'task', id: seeded.about, node: 'globex/portal', problem: 'memory_forgotten' }]);
    expect(answer.body.index_drift.items.map((item: { id: string; problem: string }) => [item.id, item.problem])).toEqual(expect.arrayContaining([[seeded.rollback, 'not_embedded'], [seeded.ancient, 'not_embedded']]));
    expect(answer.body.index_drift.items.map((item: { id: string }) => item.id)).not.toContain(seeded.deploy);

    const fresh = await signUp(world, 'initrode');
    expect((await report('/v1/doctor', {}, fresh.token)).body).toMatchObject({ healthy: true, dangling_supersessions: [], orphans: [], index_drift: { items: [] } });
  });
});

describe('POST /v1/snapshot', () => {
  it('digests each node and scope, pinned first, counting what it does not show', async () => {
    const answer = await report('/v1/snapshot', { node: 'globex/billing', per_scope: 2 });
    expect(answer.status).toBe(200);
    const release = answer.body.scopes.find((entry: { scope: string }) => entry.scope === 'release');
    expect(release).toMatchObject({ node: { path: 'globex/billing' }, memories: 3, more: 1 });
    expect(release.shown[0].id).toBe(seeded.deploy);
    const domain = answer.body.scopes.find((entry: { scope: string }) => entry.scope === 'domain');
    expect(domain.shown.find((entry: { id: string }) => entry.id === seeded.currency).summary).toBe('Amounts are in cents.');
    expect(answer.body.scopes.map((entry: { node: { path: string } }) => entry.node.path)).not.toContain('globex');
    expect(answer.body.text).toContain('## globex/billing · release (3)');
    expect(answer.body.text).toContain('… and 1 more');
    expect(answer.body.text).not.toContain('Jenkins');
  });
});

async function exportLines(token: string, body: Record<string, unknown>): Promise<{ status: number; type: string | null; lines: any[] }> {
  const response = await fetch(`${world.baseUrl}/v1/export`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, type: response.headers.get('content-type'), lines: response.ok ? text.trimEnd().split('\n').map((line) => JSON.parse(line)) : [JSON.parse(text)] };
}

describe('POST /v1/export', () => {
  it('streams every memory, version, link, event and task of a project as JSON lines, with provenance', async () => {
    const refined = await world.post('/v1/remember', owner.token, { node: 'globex/billing', scope: 'ci', title: 'Build system', body: 'GitHub Actions, self-hosted.', force: true, source: 'session export' });
    expect(refined.body.result).toBe('refined');
    const { status, type, lines } = await exportLines(owner.token, { node: 'globex/billing' });
    expect(status).toBe(200);
    expect(type).toMatch(/^application\/x-ndjson/);
    expect(lines[0]).toMatchObject({ type: 'export', node: { path: 'globex/billing' } });
    const end = lines.at(-1);
    expect(end.type).toBe('end');
    const of = (kind: string) => lines.filter((line) => line.type === kind);
    for (const kind of ['node', 'memory', 'memory_version', 'link', 'event', 'task']) expect(of(kind)).toHaveLength(end.counts[kind]);

    expect(of('node').map((node) => node.path)).toEqual(['globex/billing']);
    expect(of('memory').map((memory) => memory.id).sort()).toEqual([seeded.deploy, seeded.rollback, seeded.freeze, seeded.currency, seeded.oldRunner, seeded.newRunner, seeded.ancient].sort());
    const build = of('memory').find((memory) => memory.id === seeded.newRunner);
    expect(build).toMatchObject({ version: 2, updated_source: 'session export', created_by: expect.stringMatching(/^per_/), created_token: expect.stringMatching(/^tok_/), status: 'active' });
    expect(of('memory_version')).toEqual([expect.objectContaining({ memory_id: seeded.newRunner, version: 1, body: 'GitHub Actions.' })]);
    expect(of('link')).toEqual([{ type: 'link', relation: 'supersedes', from_id: seeded.newRunner, to_id: seeded.oldRunner }]);
    expect(of('event').map((event) => event.id)).toEqual([seeded.event]);
    expect(of('task').map((task) => task.id)).toEqual([seeded.overdue]);
    expect(JSON.stringify(lines)).not.toContain('soylent');
  });

  it('exports an organisation with tombstones, in pages, from one snapshot', async () => {
    // The export pauses for the client many times over; each pause must leave no listener behind on the response.
    const warnings: string[] = [];
    const warned = (warning: Error) => warnings.push(warning.name);
    process.on('warning', warned);
    // More memories than one cursor page holds.
    const { rows } = await world.hive.db.query(`SELECT id, org_id FROM hive.nodes WHERE name_path = 'globex/portal'`);
    await world.hive.db.query(
      `INSERT INTO hive.memories (id, org_id, node_id, scope, title, title_key, body, kind)
       SELECT 'mem_' || lpad(g::text, 24, '0'), $2, $1, 'bulk', 'Bulk ' || g, 'bulk ' || g, 'body ' || g, 'note' FROM generate_series(1, 1200) g`,
      [rows[0].id, rows[0].org_id],
    );
    const { status, lines } = await exportLines(owner.token, { node: 'globex' });
    expect(status).toBe(200);
    const memories = lines.filter((line) => line.type === 'memory');
    expect(lines.at(-1).counts.memory).toBe(memories.length);
    expect(memories.filter((memory) => memory.scope === 'bulk')).toHaveLength(1200);
    expect(new Set(memories.map((memory) => memory.id)).size).toBe(memories.length);
    expect(memories.find((memory) => memory.id === seeded.forgotten)).toMatchObject({ status: 'forgotten', body: '', forgotten_by: expect.stringMatching(/^per_/), forgotten_token: expect.stringMatching(/^tok_/) });
    expect(lines.filter((line) => line.type === 'link')).toContainEqual({ type: 'link', relation: 'task_about', from_id: seeded.about, to_id: seeded.forgotten });
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', warned);
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  });

  it('refuses a node outside the reach before streaming anything', async () => {
    const other = await exportLines(stranger.token, { node: 'globex' });
    expect(other.status).toBe(403);
    expect(other.lines[0]).toEqual({ error: 'This credential has no grant on node globex.' });
    const reader = await admitPerson(world, owner.token, { email: 'reader@globex.test', node: 'globex/portal', role: 'reader' });
    expect((await exportLines(reader, { node: 'globex/billing' })).status).toBe(403);
    const own = await exportLines(reader, { node: 'globex/portal' });
    expect(own.status).toBe(200);
    expect(own.lines.filter((line) => line.type === 'node').map((node) => node.path)).toEqual(['globex/portal']);
  });
});

describe('GET /llms.txt, GET /docs and GET /v1/device', () => {
  it('documents every route of the table the API is mounted from, with its body fields', async () => {
    const llms = await fetch(`${world.baseUrl}/llms.txt`);
    expect(llms.status).toBe(200);
    expect(llms.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await llms.text();
    const docs = await (await fetch(`${world.baseUrl}/docs`)).text();
    const table = hiveRouteTable(world.hive);
    expect(table.length).toBeGreaterThan(30);
    for (const route of table) {
      expect(text).toContain(`- ${route.method.toUpperCase()} ${route.path} [`);
      expect(text).toContain(route.summary);
      expect(docs).toContain(`<code>${route.method.toUpperCase()} ${route.path}</code>`);
    }
    expect(text).toContain(`Base URL: ${world.baseUrl}`);
    expect(text).toContain('  body (6): { action: "snooze", id: string, until?: string (date-time), hours?: number }');
    expect(text).toContain('  body: { node: string, scope?: string, title: string, body?: string, kind?: "note" | "fact"');
  });

  it('serves the page where a device code is typed', async () => {
    const page = await fetch(`${world.baseUrl}/v1/device`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('<input name="code"');
    expect(html).toContain("fetch('/v1/device/approve'");
  });
});
