import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitPerson, createNode, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';

let world: HiveWorld;
let acme: HiveOwner;
let globex: HiveOwner;
beforeAll(async () => {
  world = await startHiveWorld();
  acme = await signUp(world, 'acme');
  globex = await signUp(world, 'globex');
});
afterAll(async () => {
  await world?.close();
});

describe('POST /v1/signup', () => {
  it('creates an organisation whose owner holds a working token, stored only as its hash', async () => {
    const who = await world.post('/v1/whoami', acme.token);
    expect(who.status).toBe(200);
    expect(who.body).toMatchObject({
      organisation: { id: acme.orgId, name: 'acme' },
      token: { kind: 'person' },
      person: { email: acme.email, guardrail_authority: true, axiom_authority: true },
      grants: [{ node: { id: acme.rootNodeId, path: 'acme' }, role: 'owner' }],
    });
    const { rows } = await world.hive.db.query(`SELECT count(*)::int AS n FROM hive.tokens WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, [acme.token]);
    expect(rows[0].n).toBe(1);
    const { rows: plain } = await world.hive.db.query(`SELECT count(*)::int AS n FROM hive.tokens WHERE display_prefix = $1`, [acme.token]);
    expect(plain[0].n).toBe(0);
  });

  it('refuses an address that already has an account, whatever its case', async () => {
    const again = await world.post('/v1/signup', undefined, { email: acme.email.toUpperCase(), password: 'another long password', organisation: 'acme-two' });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: 'This address already has an account.' });
    const { rows } = await world.hive.db.query(`SELECT count(*)::int AS n FROM hive.organisations WHERE name = 'acme-two'`);
    expect(rows[0].n).toBe(0);
  });

  it('answers 400 for a body that does not parse, in the hive error body', async () => {
    const response = await world.post('/v1/signup', undefined, { email: 'not-an-address', password: 'correct horse battery', organisation: 'x' });
    expect(response.status).toBe(400);
    expect(Object.keys(response.body)).toEqual(['error']);
    expect(response.body.error).toMatch(/email/);
  });

  it('is rate limited per client address, counted in the database', async () => {
    const limited = await startHiveWorld({ HIVE_SIGNUP_PER_HOUR: '2' });
    try {
      const attempt = (n: number) => limited.post('/v1/signup', undefined, { email: `limit${n}@example.test`, password: 'correct horse battery', organisation: `limit${n}` });
      expect((await attempt(1)).status).toBe(201);
      expect((await attempt(2)).status).toBe(201);
      const third = await attempt(3);
      expect(third.status).toBe(429);
      expect(third.body.error).toMatch(/^Too many signups from this address/);
      const { rows } = await limited.hive.db.query(`SELECT sum(count)::int AS n FROM hive.rate_windows WHERE key LIKE 'signup:%'`);
      expect(rows[0].n).toBe(3);
    } finally {
      await limited.close();
    }
  });

  it('is not there unless the server was started with the signup option', async () => {
    const closed = await startHiveWorld({ HIVE_SIGNUP_ENABLED: 'false' });
    try {
      const response = await closed.post('/v1/signup', undefined, { email: 'closed@example.test', password: 'correct horse battery', organisation: 'closed' });
      expect(response).toMatchObject({ status: 404, body: { error: 'Not found: POST /v1/signup' } });
      // Whatever the body: nothing is validated on a path that is not served.
      expect(await closed.post('/v1/signup', undefined, { email: 'not an address' })).toMatchObject({ status: 404 });
    } finally {
      await closed.close();
    }
  });
});

describe('credentials', () => {
  it('answers 401 without a credential and with an unknown one', async () => {
    for (const path of ['/v1/whoami', '/v1/nodes', '/v1/remember', '/v1/recall']) {
      const none = await world.post(path, undefined, {});
      expect({ path, status: none.status }).toEqual({ path, status: 401 });
      expect(Object.keys(none.body)).toEqual(['error']);
    }
    const forged = await world.post('/v1/whoami', `hvt_${'A'.repeat(43)}`);
    expect(forged.status).toBe(401);
    expect(forged.body).toEqual({ error: 'The token is not valid: unknown, revoked or expired.' });
  });

  it('revokes the credential in hand and no other', async () => {
    const second = await admitPerson(world, acme.token, { email: 'revoker@example.test', node: 'acme', role: 'reader' });
    const third = await admitPerson(world, acme.token, { email: 'revoker@example.test', node: 'acme', role: 'reader' });
    const revoked = await world.post('/v1/token/revoke', second);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ revoked: true });
    expect((await world.post('/v1/whoami', second)).status).toBe(401);
    expect((await world.post('/v1/whoami', third)).status).toBe(200);
  });

  it('sets a password for a person, and refuses a token with a grant of its own', async () => {
    const set = await world.post('/v1/password', acme.token, { password: 'a brand new long password' });
    expect(set.status).toBe(200);
    const { rows } = await world.hive.db.query(`SELECT password_hash FROM hive.people WHERE email = $1`, [acme.email]);
    expect(rows[0].password_hash).toMatch(/^scrypt\$/);
    const grant = await world.post('/v1/token/create', acme.token, { node: 'acme', role: 'reader', name: 'ci' });
    const refused = await world.post('/v1/password', grant.body.token, { password: 'a brand new long password' });
    expect(refused.status).toBe(403);
  });
});

describe('roles on the node tree', () => {
  it('inherit downward, and a demotion applies to a token already issued', async () => {
    const project = await createNode(world, acme.token, 'acme', 'backend');
    const deeper = await createNode(world, acme.token, project.id, 'api');
    const bob = await admitPerson(world, acme.token, { email: 'bob@example.test', node: project.path, role: 'admin' });

    // Admin on acme/backend reaches it and what lies below, not its parent.
    const nodes = await world.post('/v1/nodes', bob);
    expect(nodes.body.data.map((node: { path: string; role: string }) => [node.path, node.role])).toEqual([
      ['acme/backend', 'admin'],
      ['acme/backend/api', 'admin'],
    ]);
    expect((await createNode(world, bob, deeper.id, 'handlers')).path).toBe('acme/backend/api/handlers');
    expect((await world.post('/v1/nodes/create', bob, { parent: 'acme', name: 'frontend' })).status).toBe(403);

    // A second approval of the same person replaces the grant: bob is a reader now.
    await admitPerson(world, acme.token, { email: 'bob@example.test', node: project.path, role: 'reader' });
    const demoted = await world.post('/v1/nodes/create', bob, { parent: deeper.id, name: 'jobs' });
    expect(demoted.status).toBe(403);
    expect(demoted.body.error).toMatch(/needs the admin role .* holds reader/);
    const write = await world.post('/v1/remember', bob, { node: deeper.id, title: 'after demotion', body: 'a reader cannot write' });
    expect(write.status).toBe(403);
    expect((await world.post('/v1/whoami', bob)).body.grants).toEqual([{ node: { id: project.id, path: 'acme/backend' }, role: 'reader' }]);
  });

  it('refuses to grant above the approver, and passes authority on only from an owner who holds it', async () => {
    await createNode(world, acme.token, 'acme', 'ops');
    const carol = await admitPerson(world, acme.token, { email: 'carol@example.test', node: 'acme/ops', role: 'admin' });
    const started = await world.post('/v1/device/start', undefined);
    const above = await world.post('/v1/device/approve', carol, { code: started.body.user_code, email: 'dave@example.test', node: 'acme/ops', role: 'owner' });
    expect(above.status).toBe(403);
    const authority = await world.post('/v1/device/approve', carol, { code: started.body.user_code, email: 'dave@example.test', node: 'acme/ops', role: 'member', guardrail: true });
    expect(authority.status).toBe(403);
    // Nothing was granted by the refusals: the code is still pending.
    expect((await world.post('/v1/device/poll', undefined, { device_code: started.body.device_code })).body).toEqual({ status: 'pending' });

    const erin = await admitPerson(world, acme.token, { email: 'erin@example.test', node: 'acme/ops', role: 'member', guardrail: true });
    expect((await world.post('/v1/whoami', erin)).body.person).toMatchObject({ guardrail_authority: true, axiom_authority: false });
    expect((await world.post('/v1/remember', erin, { node: 'acme/ops', title: 'Never force-push main', kind: 'guardrail' })).status).toBe(201);
    expect((await world.post('/v1/remember', erin, { node: 'acme/ops', title: 'Everything is a file', kind: 'axiom' })).status).toBe(403);
  });

  it('a token with a grant of its own keeps to its node and role', async () => {
    await createNode(world, acme.token, 'acme', 'data');
    const minted = await world.post('/v1/token/create', acme.token, { node: 'acme/data', role: 'member', name: 'agent' });
    expect(minted.status).toBe(201);
    expect(minted.body.token).toMatch(/^hvt_/);
    const agent = minted.body.token;
    expect((await world.post('/v1/whoami', agent)).body).toMatchObject({ token: { kind: 'grant' }, person: null, grants: [{ node: { path: 'acme/data' }, role: 'member' }] });
    expect((await world.post('/v1/remember', agent, { node: 'acme/data', title: 'Tables are partitioned by month' })).status).toBe(201);
    expect((await world.post('/v1/remember', agent, { node: 'acme', title: 'Not here' })).status).toBe(403);
    expect((await world.post('/v1/token/create', agent, { node: 'acme/data', role: 'reader' })).status).toBe(403);
  });
});

describe('the device flow', () => {
  it('hands out a code and nothing else until approved, then the token once', async () => {
    const started = await world.post('/v1/device/start', undefined);
    expect(started.status).toBe(200);
    expect(Object.keys(started.body).sort()).toEqual(['device_code', 'expires_in', 'interval', 'user_code', 'verification_uri']);
    expect(started.body.user_code).toMatch(/^[A-Z]{4}-[A-Z]{4}$/);
    expect((await world.post('/v1/device/poll', undefined, { device_code: started.body.device_code })).body).toEqual({ status: 'pending' });

    const approved = await world.post('/v1/device/approve', acme.token, { code: started.body.user_code.toLowerCase().replace('-', ' '), email: 'frank@example.test', node: 'acme', role: 'reader' });
    expect(approved.status).toBe(200);
    const polled = await world.post('/v1/device/poll', undefined, { device_code: started.body.device_code });
    expect(polled.body).toMatchObject({ status: 'approved', token: expect.stringMatching(/^hvt_/) });
    expect((await world.post('/v1/whoami', polled.body.token)).body.person.email).toBe('frank@example.test');
    expect((await world.post('/v1/device/poll', undefined, { device_code: started.body.device_code })).status).toBe(404);
  });

  it('refuses to admit an address of another organisation', async () => {
    const started = await world.post('/v1/device/start', undefined);
    const response = await world.post('/v1/device/approve', acme.token, { code: started.body.user_code, email: globex.email, node: 'acme', role: 'reader' });
    expect(response.status).toBe(409);
  });
});

describe('probes across organisations and outside the reach', () => {
  it('find nothing: other organisations\' nodes, memories and events are never loaded', async () => {
    const secret = await world.post('/v1/remember', globex.token, { node: 'globex', title: 'Launch codename', body: 'tangerine' });
    expect(secret.status).toBe(201);
    const secretId = secret.body.memory.id;
    await world.post('/v1/log', globex.token, { node: 'globex', text: 'tangerine rollout begins' });

    // The node, by id and by name, is refused exactly as one that does not exist.
    for (const node of [globex.rootNodeId, 'globex', 'nd_000000000000000000000000']) {
      const response = await world.post('/v1/remember', acme.token, { node, title: 'probe' });
      expect({ node, status: response.status, body: response.body }).toEqual({ node, status: 403, body: { error: `This credential has no grant on node ${node}.` } });
    }
    for (const path of ['/v1/memory/get', '/v1/memory/update', '/v1/memory/forget', '/v1/memory/verify']) {
      const response = await world.post(path, acme.token, { id: secretId });
      expect({ path, status: response.status, body: response.body }).toEqual({ path, status: 404, body: { error: `No memory ${secretId}.` } });
    }
    const recalled = await world.post('/v1/recall', acme.token, { query: 'launch codename tangerine' });
    expect(recalled.status).toBe(200);
    expect(recalled.body.data).toEqual([]);
    const scoped = await world.post('/v1/recall', acme.token, { query: 'tangerine', nodes: ['globex'] });
    expect(scoped.status).toBe(403);
    const events = await world.post('/v1/events', acme.token, {});
    expect(events.body.data.map((event: { text: string }) => event.text)).not.toContain('tangerine rollout begins');
    expect((await world.post('/v1/nodes', acme.token)).body.data.map((node: { path: string }) => node.path)).not.toContain('globex');

    // And the owner of globex still sees all of it.
    expect((await world.post('/v1/memory/get', globex.token, { id: secretId })).body.body).toBe('tangerine');
    expect((await world.post('/v1/events', globex.token, {})).body.data[0].text).toBe('tangerine rollout begins');
  });

  it('keep a person inside their subtree of their own organisation', async () => {
    await createNode(world, acme.token, 'acme', 'payroll');
    await createNode(world, acme.token, 'acme', 'website');
    const hidden = await world.post('/v1/remember', acme.token, { node: 'acme/payroll', title: 'Salary bands', body: 'confidential salary bands' });
    const grace = await admitPerson(world, acme.token, { email: 'grace@example.test', node: 'acme/website', role: 'member' });
    expect((await world.post('/v1/memory/get', grace, { id: hidden.body.memory.id })).status).toBe(404);
    expect((await world.post('/v1/recall', grace, { query: 'salary bands' })).body.data).toEqual([]);
    expect((await world.post('/v1/remember', grace, { node: 'acme/payroll', title: 'probe' })).status).toBe(403);
  });
});
