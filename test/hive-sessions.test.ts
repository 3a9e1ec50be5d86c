import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitPerson, createNode, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';

let world: HiveWorld;
let owner: HiveOwner;
beforeAll(async () => {
  world = await startHiveWorld();
  owner = await signUp(world, 'hooli');
  await createNode(world, owner.token, 'hooli', 'search');
  await createNode(world, owner.token, 'hooli/search', 'ranker');
  await createNode(world, owner.token, 'hooli', 'mail');
});
afterAll(async () => {
  await world?.close();
});

const remember = (body: Record<string, unknown>, token = owner.token) => world.post('/v1/remember', token, body);
const hoursFromNow = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString();

describe('POST /v1/brief', () => {
  it('assembles guardrails from above, preferences, pins, due tasks, the inbox and recent activity of a node, and nothing from elsewhere', async () => {
    const guardrail = await remember({ node: 'hooli', kind: 'guardrail', title: 'No customer data in logs', body: 'Redact before logging.' });
    const preference = await remember({ node: 'hooli/search', kind: 'preference', title: 'Small pull requests', body: 'Under 400 lines.' });
    const pin = await remember({ node: 'hooli/search/ranker', title: 'Ranker owner', body: 'Gavin owns the ranker.', pinned: true });
    const unpinned = await remember({ node: 'hooli/search', title: 'Ranker latency', body: 'p95 40 ms.' });
    const elsewhere = await remember({ node: 'hooli/mail', kind: 'guardrail', title: 'Mail retention', body: 'Thirty days.', pinned: true });
    const due = await world.post('/v1/task', owner.token, { action: 'add', node: 'hooli/search', title: 'Reindex the corpus', due: hoursFromNow(-1) });
    const inbox = await world.post('/v1/task', owner.token, { action: 'add', node: 'hooli/mail', title: 'Review the spam filter', assignee: 'me' });
    const event = await world.post('/v1/log', owner.token, { node: 'hooli/search/ranker', kind: 'deploy', text: 'Ranker v2 deployed' });
    await world.post('/v1/log', owner.token, { node: 'hooli/mail', text: 'Mail event' });

    const answer = await world.post('/v1/brief', owner.token, { node: 'hooli/search' });
    expect(answer.status).toBe(200);
    const ids = (section: string) => answer.body.sections[section].map((item: { id: string }) => item.id);
    expect(ids('guardrails')).toEqual([guardrail.body.memory.id]);
    expect(ids('preferences')).toEqual([preference.body.memory.id]);
    expect(ids('pins')).toEqual([pin.body.memory.id]);
    expect(ids('due')).toEqual([due.body.id]);
    expect(ids('inbox')).toEqual([inbox.body.id]);
    expect(ids('recent')).toEqual([event.body.id]);
    expect(JSON.stringify(answer.body)).not.toContain(elsewhere.body.memory.id);
    expect(JSON.stringify(answer.body)).not.toContain(unpinned.body.memory.id);
    expect(answer.body.cut).toEqual([]);
    expect(answer.body.text).toContain('No customer data in logs');
    expect(answer.body.used_tokens).toBeLessThanOrEqual(answer.body.budget_tokens);
    expect(answer.body.session.id).toMatch(/^ses_/);
  });

  it('keeps within its budget, guardrails first, and names every item it cut', async () => {
    await createNode(world, owner.token, 'hooli', 'ads');
    const guardrail = await remember({ node: 'hooli/ads', kind: 'guardrail', title: 'Never target minors', body: 'Age-gate every campaign.' });
    const pins = [];
    for (let index = 0; index < 12; index++) {
      pins.push((await remember({ node: 'hooli/ads', title: `Campaign rule ${index}`, body: 'x'.repeat(200), pinned: true })).body.memory.id);
    }
    const answer = await world.post('/v1/brief', owner.token, { node: 'hooli/ads', budget_tokens: 300, session: false });
    expect(answer.status).toBe(200);
    expect(answer.body.session).toBeNull();
    expect(answer.body.used_tokens).toBeLessThanOrEqual(300);
    expect(answer.body.text.length).toBeLessThanOrEqual(300 * 4);
    expect(answer.body.sections.guardrails.map((item: { id: string }) => item.id)).toContain(guardrail.body.memory.id);
    const kept = answer.body.sections.pins.map((item: { id: string }) => item.id);
    const cut = answer.body.cut.find((entry: { section: string }) => entry.section === 'pins');
    expect(kept.length).toBeGreaterThan(0);
    expect(cut.count).toBe(cut.ids.length);
    expect([...kept, ...cut.ids].sort()).toEqual([...pins].sort());
  });

  it('refuses a node outside the reach', async () => {
    const stranger = await signUp(world, 'piedpiper');
    expect((await world.post('/v1/brief', stranger.token, { node: 'hooli' })).status).toBe(403);
    expect((await world.post('/v1/brief', undefined, { node: 'hooli' })).status).toBe(401);
  });
});

describe('POST /v1/session/end', () => {
  it("reports what the session's token wrote since its brief, once", async () => {
    const agent = await admitPerson(world, owner.token, { email: 'agent@hooli.test', node: 'hooli/search', role: 'member' });
    const before = await remember({ node: 'hooli/search', title: 'Written before the session', body: 'old' }, agent);
    const opened = await world.post('/v1/brief', agent, { node: 'hooli/search' });
    const session = opened.body.session.id;

    const created = await remember({ node: 'hooli/search', title: 'Query cache', body: 'Redis, 5 minutes.' }, agent);
    const refined = await remember({ node: 'hooli/search', title: 'Written before the session', body: 'new' }, agent);
    const event = await world.post('/v1/log', agent, { node: 'hooli/search', text: 'Tuned the cache' });
    const added = await world.post('/v1/task', agent, { action: 'add', node: 'hooli/search', title: 'Measure the hit rate' });
    // Someone else's write in the same window is not the session's.
    const others = await remember({ node: 'hooli/search', title: 'Owner note', body: 'not the agent' });

    const ended = await world.post('/v1/session/end', agent, { session, summary: 'Added a query cache.' });
    expect(ended.status).toBe(200);
    const wrote = ended.body.wrote.map((write: { what: string; action: string; id: string }) => `${write.what}.${write.action}:${write.id}`);
    expect(wrote.sort()).toEqual([
      `event.logged:${event.body.id}`,
      `memory.created:${created.body.memory.id}`,
      `memory.refined:${refined.body.memory.id}`,
      `task.added:${added.body.id}`,
    ].sort());
    expect(refined.body.memory.id).toBe(before.body.memory.id);
    expect(JSON.stringify(ended.body)).not.toContain(others.body.memory.id);
    expect(ended.body.counts).toEqual({ 'event.logged': 1, 'memory.created': 1, 'memory.refined': 1, 'task.added': 1 });
    expect(ended.body.summary_event).toMatch(/^evt_/);

    const events = await world.post('/v1/events', owner.token, { node: 'hooli/search', kinds: ['session.end'] });
    expect(events.body.data.map((row: { id: string; text: string }) => [row.id, row.text])).toEqual([[ended.body.summary_event, 'Added a query cache.']]);

    expect((await world.post('/v1/session/end', agent, { session })).status).toBe(409);
    // Another token cannot end it, or learn it exists.
    expect((await world.post('/v1/session/end', owner.token, { session })).status).toBe(404);
  });
});

describe('POST /v1/traits and the user model in /v1/whoami', () => {
  it('keeps one line per trait with every piece of evidence, shown in whoami', async () => {
    const memory = await remember({ node: 'hooli/search', kind: 'preference', title: 'Tabs over spaces', body: 'Said so in review.' });
    const first = await world.post('/v1/traits', owner.token, { action: 'add', trait: 'Prefers tabs', evidence: { text: 'Asked for tabs in review', memory: memory.body.memory.id, source: 'session s9' } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ result: 'created', trait: { trait: 'Prefers tabs', evidence: [{ text: 'Asked for tabs in review', memory_id: memory.body.memory.id, source: 'session s9' }] } });
    const second = await world.post('/v1/traits', owner.token, { action: 'add', trait: 'prefers  TABS.', evidence: { text: 'Reformatted a file to tabs' } });
    expect(second.status).toBe(200);
    expect(second.body.result).toBe('evidence_added');
    expect(second.body.trait.id).toBe(first.body.trait.id);
    expect(second.body.trait.evidence.map((item: { text: string }) => item.text)).toEqual(['Asked for tabs in review', 'Reformatted a file to tabs']);

    const listed = await world.post('/v1/traits', owner.token, {});
    expect(listed.body.data.map((line: { id: string }) => line.id)).toEqual([first.body.trait.id]);
    const who = await world.post('/v1/whoami', owner.token, {});
    expect(who.body.traits).toEqual(listed.body.data);

    const dropped = await world.post('/v1/traits', owner.token, { action: 'drop', id: first.body.trait.id });
    expect(dropped.body).toEqual({ id: first.body.trait.id, object: 'trait', deleted: true });
    expect((await world.post('/v1/whoami', owner.token, {})).body.traits).toEqual([]);
  });

  it("is each person's own: another person cannot drop a line, evidence outside the reach is refused, a grant token has no user model", async () => {
    const line = await world.post('/v1/traits', owner.token, { action: 'add', trait: 'Reviews in the morning', evidence: { text: 'All reviews before 10:00' } });
    const colleague = await admitPerson(world, owner.token, { email: 'colleague@hooli.test', node: 'hooli/mail', role: 'member' });
    expect((await world.post('/v1/traits', colleague, {})).body.data).toEqual([]);
    expect((await world.post('/v1/traits', colleague, { action: 'drop', id: line.body.trait.id })).status).toBe(404);
    const hidden = await remember({ node: 'hooli/search', title: 'Search secret', body: 'x' });
    expect((await world.post('/v1/traits', colleague, { action: 'add', trait: 'Curious', evidence: { text: 'x', memory: hidden.body.memory.id } })).status).toBe(404);

    const grant = await world.post('/v1/token/create', owner.token, { node: 'hooli/search', role: 'reader' });
    expect((await world.post('/v1/traits', grant.body.token, {})).status).toBe(403);
    expect((await world.post('/v1/whoami', owner.token, {})).body.traits.map((entry: { id: string }) => entry.id)).toContain(line.body.trait.id);
  });
});
