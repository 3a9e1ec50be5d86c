import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitPerson, createNode, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';
import { pollUntil } from './support/poll.js';

let world: HiveWorld;
let owner: HiveOwner;
beforeAll(async () => {
  world = await startHiveWorld();
  owner = await signUp(world, 'initech');
  await createNode(world, owner.token, 'initech', 'app');
});
afterAll(async () => {
  await world?.close();
});

const remember = (body: Record<string, unknown>, token = owner.token) => world.post('/v1/remember', token, { node: 'initech/app', ...body });
const get = (id: string, token = owner.token) => world.post('/v1/memory/get', token, { id });
const recall = (query: string, extra: Record<string, unknown> = {}) => world.post('/v1/recall', owner.token, { query, ...extra });

describe('POST /v1/remember', () => {
  it('refines an existing identity into a new version instead of duplicating it', async () => {
    const first = await remember({ scope: 'conventions', title: 'Error handling', body: 'Wrap errors with context.', source: 'session s1' });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ result: 'created', memory: { version: 1, status: 'active', title: 'Error handling', node: { path: 'initech/app' } } });
    const id = first.body.memory.id;

    // The same node, scope and title up to case, spacing and a trailing full stop: the same memory.
    const refined = await remember({ scope: 'conventions', title: '  error   HANDLING. ', body: 'Wrap errors with context; never swallow them.', source: 'session s2' });
    expect(refined.status).toBe(200);
    expect(refined.body).toMatchObject({ result: 'refined', memory: { id, version: 2, body: 'Wrap errors with context; never swallow them.' } });
    expect(refined.body.memory.versions).toEqual([
      expect.objectContaining({ version: 1, body: 'Wrap errors with context.', written: expect.objectContaining({ by: { id: expect.any(String), email: owner.email }, source: 'session s1' }) }),
    ]);

    const same = await remember({ scope: 'conventions', title: '  error   HANDLING. ', body: 'Wrap errors with context; never swallow them.' });
    expect(same.body).toMatchObject({ result: 'unchanged', memory: { id, version: 2 } });

    // Another scope is another identity.
    const elsewhere = await remember({ scope: 'reviews', title: 'Error handling', body: 'Reviewers check error paths.' });
    expect(elsewhere.body.result).toBe('created');
    expect(elsewhere.body.memory.id).not.toBe(id);

    const { rows } = await world.hive.db.query(`SELECT count(*)::int AS n FROM hive.memories WHERE title_key = 'error handling' AND scope = 'conventions'`);
    expect(rows[0].n).toBe(1);
  });

  it('answers get with provenance: who, which token, when, from what', async () => {
    const written = await remember({ title: 'Logging library', body: 'We use pino.', source: 'file docs/logging.md' });
    const { rows } = await world.hive.db.query(`SELECT id FROM hive.tokens WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, [owner.token]);
    const memory = (await get(written.body.memory.id)).body;
    expect(memory.provenance.created).toEqual({ by: { id: expect.stringMatching(/^per_/), email: owner.email }, token_id: rows[0].id, at: expect.any(String), source: 'file docs/logging.md' });
    expect(Date.parse(memory.provenance.created.at)).not.toBeNaN();
    expect(memory.provenance.verified).toBeNull();

    const verified = await world.post('/v1/memory/verify', owner.token, { id: memory.id });
    expect(verified.status).toBe(200);
    expect(verified.body.provenance.verified).toMatchObject({ by: { email: owner.email }, token_id: rows[0].id });
    expect(verified.body.verified_at).toEqual(verified.body.provenance.verified.at);
  });

  it('guards refuse to overwrite a pinned memory or one that supersedes others, unless forced', async () => {
    const pinned = await remember({ title: 'Release branch', body: 'Release from main.', pinned: true });
    const refused = await remember({ title: 'Release branch', body: 'Release from develop.' });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatch(/is pinned/);
    expect((await get(pinned.body.memory.id)).body).toMatchObject({ body: 'Release from main.', version: 1 });
    const forced = await remember({ title: 'Release branch', body: 'Release from develop.', force: true });
    expect(forced.body).toMatchObject({ result: 'refined', memory: { version: 2, pinned: true, body: 'Release from develop.' } });

    const old = await remember({ title: 'CI runner', body: 'Jenkins runs the builds.' });
    const replacement = await remember({ title: 'Build system', body: 'GitHub Actions runs the builds.', supersedes: [old.body.memory.id] });
    expect(replacement.body.memory.supersedes).toEqual([old.body.memory.id]);
    expect((await get(old.body.memory.id)).body).toMatchObject({ status: 'superseded', superseded_by: replacement.body.memory.id });
    const overwrite = await remember({ title: 'Build system', body: 'Something else entirely.' });
    expect(overwrite.status).toBe(409);
    expect(overwrite.body.error).toMatch(/supersedes other memories/);
  });

  it('refuses a reader and a write to a node outside the reach', async () => {
    const reader = await admitPerson(world, owner.token, { email: 'reader@initech.test', node: 'initech/app', role: 'reader' });
    const response = await remember({ title: 'From a reader' }, reader);
    expect(response.status).toBe(403);
    expect(response.body).toEqual({ error: 'This needs the member role on node initech/app; this credential holds reader.' });
    const { rows } = await world.hive.db.query(`SELECT count(*)::int AS n FROM hive.memories WHERE title = 'From a reader'`);
    expect(rows[0].n).toBe(0);
  });
});

describe('POST /v1/memory/update', () => {
  it("refuses renaming onto another memory's identity, and versions a rename that is free", async () => {
    const a = await remember({ scope: 'infra', title: 'Queue backend', body: 'Redis.' });
    await remember({ scope: 'infra', title: 'Cache backend', body: 'Redis too.' });
    const clash = await world.post('/v1/memory/update', owner.token, { id: a.body.memory.id, title: 'cache BACKEND' });
    expect(clash.status).toBe(409);
    expect(clash.body.error).toMatch(/^Another memory \(mem_\w+\) already has the title/);
    expect((await get(a.body.memory.id)).body).toMatchObject({ title: 'Queue backend', version: 1 });

    const renamed = await world.post('/v1/memory/update', owner.token, { id: a.body.memory.id, title: 'Job queue backend' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ title: 'Job queue backend', version: 2, versions: [expect.objectContaining({ title: 'Queue backend' })] });
  });
});

describe('POST /v1/memory/forget', () => {
  it('leaves a tombstone: content and history gone, identity and who kept, and not recalled', async () => {
    const written = await remember({ title: 'Staging password rotation', body: 'Rotate the staging secrets every quarter.' });
    await remember({ title: 'Staging password rotation', body: 'Rotate the staging secrets every month.' });
    const id = written.body.memory.id;
    expect((await recall('rotate staging secrets')).body.data.map((hit: { memory: { id: string } }) => hit.memory.id)).toContain(id);

    const forgotten = await world.post('/v1/memory/forget', owner.token, { id });
    expect(forgotten.status).toBe(200);
    expect(forgotten.body).toMatchObject({ id, status: 'forgotten', body: null, title: 'Staging password rotation', versions: [] });
    expect(forgotten.body.provenance.forgotten).toMatchObject({ by: { email: owner.email } });
    expect((await get(id)).body.status).toBe('forgotten');
    const { rows } = await world.hive.db.query(
      `SELECT m.body, m.embedding IS NULL AS no_vector, (SELECT count(*)::int FROM hive.memory_versions v WHERE v.memory_id = m.id) AS versions FROM hive.memories m WHERE id = $1`,
      [id],
    );
    expect(rows).toEqual([{ body: '', no_vector: true, versions: 0 }]);
    expect((await recall('rotate staging secrets')).body.data.map((hit: { memory: { id: string } }) => hit.memory.id)).not.toContain(id);

    // The identity is free again: remembering it makes a new memory.
    const anew = await remember({ title: 'Staging password rotation', body: 'Staging uses short-lived credentials now.' });
    expect(anew.body.result).toBe('created');
    expect(anew.body.memory.id).not.toBe(id);
  });

  it('refuses a pinned memory and one that supersedes others unless forced', async () => {
    const pinned = await remember({ title: 'Code owners', body: 'Two approvals.', pinned: true });
    const refused = await world.post('/v1/memory/forget', owner.token, { id: pinned.body.memory.id });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: `Memory ${pinned.body.memory.id} is pinned; unpin it or forget with force.` });
    expect((await get(pinned.body.memory.id)).body.status).toBe('active');
    expect((await world.post('/v1/memory/forget', owner.token, { id: pinned.body.memory.id, force: true })).body.status).toBe('forgotten');

    const old = await remember({ title: 'Linter', body: 'eslint.' });
    const newer = await remember({ title: 'Formatter and linter', body: 'biome.', supersedes: [old.body.memory.id] });
    const superseding = await world.post('/v1/memory/forget', owner.token, { id: newer.body.memory.id });
    expect(superseding.status).toBe(409);
    expect(superseding.body.error).toMatch(/supersedes other memories/);
    expect((await world.post('/v1/memory/forget', owner.token, { id: old.body.memory.id })).body.status).toBe('forgotten');
  });
});

describe('POST /v1/recall', () => {
  it('finds a memory by text at once, and by meaning once the worker has embedded it', async () => {
    const written = await remember({ scope: 'release', title: 'Never deploy on Fridays', body: 'Releases wait for Monday so the weekend stays quiet.' });
    const id = written.body.memory.id;
    expect(written.body.memory.embedded).toBe(false);

    const byText = await recall('monday releases');
    expect(byText.body.ranking).toEqual({ text: true, meaning: true });
    expect(byText.body.data[0]).toMatchObject({ memory: { id }, matched: { text: true, meaning: false } });

    // Shares words with it but not all of them: no text match, and no vector yet.
    const meaningQuery = 'deploy fridays weekend freeze';
    expect((await recall(meaningQuery)).body.data).toEqual([]);

    const embedding = await world.startEmbedding();
    try {
      await pollUntil(() => get(id), (response) => response.body.embedded === true);
    } finally {
      await embedding.stop();
    }
    const byMeaning = await recall(meaningQuery);
    expect(byMeaning.body.data[0]).toMatchObject({ memory: { id }, matched: { text: false, meaning: true } });
    expect(byMeaning.body.data[0].similarity).toBeGreaterThan(0.25);
    const { rows } = await world.hive.db.query(`SELECT embedding_model, embedded_version FROM hive.memories WHERE id = $1`, [id]);
    expect(rows).toEqual([{ embedding_model: world.hive.config.HIVE_EMBEDDING_MODEL, embedded_version: 1 }]);
  });

  it('resolves a match onto the memory that replaced it', async () => {
    const old = await remember({ title: 'Database version', body: 'Production runs PostgreSQL 14.' });
    const newer = await remember({ title: 'Database upgrade', body: 'Production moved to the next major release in May.', supersedes: [old.body.memory.id] });
    const response = await recall('production postgresql 14');
    expect(response.body.data).toHaveLength(1);
    expect(response.body.data[0]).toMatchObject({ memory: { id: newer.body.memory.id, status: 'active' }, resolved_from: [old.body.memory.id] });
  });

  it('ranks a pinned memory above an equal match', async () => {
    await remember({ scope: 'ranking', title: 'Lint rule alpha', body: 'The widget lint rule applies to components.' });
    await remember({ scope: 'ranking', title: 'Lint rule beta', body: 'The widget lint rule applies to components.' });
    const before = await recall('widget lint rule', { scope: 'ranking' });
    expect(before.body.data).toHaveLength(2);
    const second = before.body.data[1].memory.id;
    await world.post('/v1/memory/update', owner.token, { id: second, pinned: true });
    const after = await recall('widget lint rule', { scope: 'ranking' });
    expect(after.body.data.map((hit: { memory: { id: string } }) => hit.memory.id)[0]).toBe(second);
  });

  it('searches only below the nodes asked for', async () => {
    await createNode(world, owner.token, 'initech', 'billing');
    await world.post('/v1/remember', owner.token, { node: 'initech/billing', title: 'Invoice numbering', body: 'Invoices are numbered per tenant.' });
    expect((await recall('invoices numbered', { nodes: ['initech/app'] })).body.data).toEqual([]);
    expect((await recall('invoices numbered', { nodes: ['initech/billing'] })).body.data).toHaveLength(1);
    expect((await recall('invoices numbered')).body.data).toHaveLength(1);
  });
});

describe('POST /v1/log and /v1/events', () => {
  it('appends events and reads recent ones, newest first', async () => {
    const first = await world.post('/v1/log', owner.token, { node: 'initech/app', kind: 'session', text: 'session started' });
    expect(first.status).toBe(201);
    await world.post('/v1/log', owner.token, { node: 'initech/app', kind: 'commit', text: 'fixed the flaky test', data: { sha: 'abc123' } });
    const events = await world.post('/v1/events', owner.token, { node: 'initech/app' });
    expect(events.body.data.slice(0, 2).map((event: { text: string }) => event.text)).toEqual(['fixed the flaky test', 'session started']);
    expect(events.body.data[0]).toMatchObject({ kind: 'commit', data: { sha: 'abc123' }, node: { path: 'initech/app' } });
    const commits = await world.post('/v1/events', owner.token, { kinds: ['commit'] });
    expect(commits.body.data.map((event: { kind: string }) => event.kind)).toEqual(['commit']);
  });
});
