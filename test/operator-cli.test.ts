import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readWallet } from '../shared/hive/wallet.js';
import { bearer, call, startTestPlatform, type TestPlatform } from './support/test-platform.js';
import { runAdmin, runAdminWith } from './support/admin-cli.js';
import { startHiveWorld, type HiveWorld } from './support/hive-world.js';


let gateway: TestPlatform;
beforeAll(async () => {
  gateway = await startTestPlatform();
});
afterAll(() => gateway?.close());

const admin = (...args: string[]) => runAdmin(gateway.config.DATABASE_URL, ...args);

describe('npm run admin', () => {
  let accountId: string;
  let keyId: string;
  let apiKey: string;

  it('creates a developer account with a wallet credit, printed as JSON', async () => {
    const created = await admin('create-developer', '--email', 'ops@example.test', '--password', 'a long password', '--credit-usd', '12.5', '--name', 'Ops');
    expect(created.code).toBe(0);
    expect(created.json).toMatchObject({ object: 'account', owner_type: 'developer', email: 'ops@example.test', balance_usd: 12.5, status: 'active' });
    accountId = created.json.id;
    const { rows } = await gateway.platform.db.query('SELECT amount_micros, balance_after_micros, kind FROM wallet_ledger WHERE account_id = $1', [accountId]);
    expect(rows).toEqual([{ amount_micros: '12500000', balance_after_micros: '12500000', kind: 'credit' }]);
    const { rows: password } = await gateway.platform.db.query('SELECT password_hash FROM accounts WHERE id = $1', [accountId]);
    expect(password[0].password_hash).toMatch(/^scrypt\$/);
    expect(password[0].password_hash).not.toContain('a long password');
  });

  it('refuses a second account with the same email', async () => {
    const again = await admin('create-developer', '--email', 'OPS@example.test', '--password', 'another password');
    expect(again.code).toBe(1);
    expect(again.json.error.code).toBe('account_exists');
  });

  it('creates a key with chosen scopes, printed once, that authenticates', async () => {
    const created = await admin('create-key', '--account', accountId, '--scopes', 'api:read,api:chat', '--name', 'ci');
    expect(created.code).toBe(0);
    expect(created.json.api_key).toMatch(/^ko_[0-9a-f]{64}$/);
    expect(created.json).toMatchObject({ object: 'api_key', name: 'ci', scopes: ['api:read', 'api:chat'], display_prefix: created.json.api_key.slice(0, 11) });
    keyId = created.json.id;
    apiKey = created.json.api_key;
    const response = await call(gateway.baseUrl, '/v1/balance', { headers: bearer(apiKey) });
    expect(response.body).toMatchObject({ account_id: accountId, balance_usd: 12.5 });
  });

  it('lists keys without ever showing the key itself', async () => {
    const listed = await admin('list-keys', '--account', accountId);
    expect(listed.json.data).toHaveLength(1);
    expect(listed.json.data[0]).toMatchObject({ id: keyId, display_prefix: apiKey.slice(0, 11) });
    expect(JSON.stringify(listed.json)).not.toContain(apiKey);
  });

  it('revokes a key so that the next request fails with invalid_token', async () => {
    const revoked = await admin('revoke-key', '--account', accountId, '--key', keyId);
    expect(revoked.json).toEqual({ id: keyId, object: 'api_key', revoked: true });
    const response = await call(gateway.baseUrl, '/v1/balance', { headers: bearer(apiKey) });
    expect(response.status).toBe(401);
    expect(response.body.error.code).toBe('invalid_token');
    const again = await admin('revoke-key', '--account', accountId, '--key', keyId);
    expect(again.code).toBe(1);
    expect(again.json.error.code).toBe('not_found');
  });

  it('creates an rsk_ provisioning key that opens /v1/accounts', async () => {
    const created = await admin('create-provisioning-key', '--account', accountId);
    expect(created.json.provisioning_key).toMatch(/^rsk_[0-9a-f]{64}$/);
    const response = await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(created.json.provisioning_key) });
    expect(response.status).toBe(200);
  });

  it.each([
    [['create-key', '--account', '00000000-0000-4000-8000-000000000000', '--scopes', 'api:everything'], 'invalid_arguments'],
    [['create-key', '--account', '00000000-0000-4000-8000-000000000000', '--scopes', ''], 'invalid_arguments'],
    [['create-key', '--account', '00000000-0000-4000-8000-000000000000', '--scopes', 'api:read', '--expires-at', '2001-01-01T00:00:00Z'], 'invalid_arguments'],
    [['create-developer', '--email', 'not-an-email', '--password', 'long enough'], 'invalid_arguments'],
    [['create-developer', '--email', 'a@example.test', '--password', 'short'], 'invalid_arguments'],
    [['frobnicate'], 'unknown_command'],
  ])('rejects %j with a JSON error and exit code 2', async (args, code) => {
    const result = await admin(...args);
    expect(result.code).toBe(2);
    expect(result.json.error.code).toBe(code);
  });

  it('credits a developer wallet with a ledger row, and switches lazy customer creation', async () => {
    const credited = await admin('credit-wallet', '--account', accountId, '--amount-usd', '7.25', '--note', 'invoice 42');
    expect(credited.json).toMatchObject({ id: accountId, balance_usd: 19.75 });
    const { rows } = await gateway.platform.db.query(`SELECT amount_micros, note FROM wallet_ledger WHERE account_id = $1 ORDER BY id DESC LIMIT 1`, [accountId]);
    expect(rows[0]).toEqual({ amount_micros: '7250000', note: 'invoice 42' });
    expect((await admin('set-lazy-create', '--account', accountId, '--enabled', 'false')).json).toMatchObject({ lazy_create_customers: false });
    const { rows: flags } = await gateway.platform.db.query('SELECT lazy_create_customers FROM accounts WHERE id = $1', [accountId]);
    expect(flags[0].lazy_create_customers).toBe(false);
    expect((await admin('set-lazy-create', '--account', accountId, '--enabled', 'maybe')).code).toBe(2);
    expect((await admin('credit-wallet', '--account', accountId, '--amount-usd', '0')).code).toBe(2);
  }, 60_000);

  it('refuses a key for an account that does not exist', async () => {
    const result = await admin('create-key', '--account', '00000000-0000-4000-8000-000000000000', '--scopes', 'api:read');
    expect(result.code).toBe(1);
    expect(result.json.error.code).toBe('account_not_found');
  });
});

/** Each command starts a process of its own; a test running several needs more than the default 30 s on a busy machine. */
const SEVERAL_COMMANDS = 90_000;

describe('npm run admin: the memory hive, on a hive started without signup', () => {
  let world: HiveWorld;
  beforeAll(async () => {
    world = await startHiveWorld({ HIVE_SIGNUP_ENABLED: 'false' });
  });
  afterAll(() => world?.close());

  const hiveAdmin = (...args: string[]) => runAdmin(world.hive.config.DATABASE_URL, ...args);
  let orgId: string;
  let rootNodeId: string;
  let ownerToken: string;

  it('creates an organisation whose owner token remembers and recalls on the hive', async () => {
    expect((await world.post('/v1/signup', undefined, { email: 'a@opsco.test', password: 'a long passphrase', organisation: 'opsco' })).status).toBe(404);

    const created = await hiveAdmin('create-hive-organisation', '--name', 'Opsco', '--email', 'Owner@Opsco.test', '--password', 'a long passphrase');
    expect(created.code).toBe(0);
    // The signup answer, field for field: the hive's rules lowercase the node name and the address.
    expect(created.json).toEqual({
      organisation: { id: expect.stringMatching(/^org_[0-9A-Za-z]{24}$/), name: 'opsco' },
      node: { id: expect.stringMatching(/^nd_/), name: 'opsco', path: 'opsco', parent_id: null, kind: 'organisation', role: 'owner' },
      person: { id: expect.stringMatching(/^per_/), email: 'owner@opsco.test', role: 'owner', guardrail_authority: true, axiom_authority: true },
      token: { id: expect.stringMatching(/^tok_/), token: expect.stringMatching(/^hvt_[A-Za-z0-9_-]{43}$/), prefix: created.json.token.token.slice(0, 10), created_at: expect.any(String) },
    });
    orgId = created.json.organisation.id;
    rootNodeId = created.json.node.id;
    ownerToken = created.json.token.token;

    const remembered = await world.post('/v1/remember', ownerToken, { node: 'opsco', scope: 'release', title: 'Never deploy on Fridays', body: 'Releases wait for Monday.' });
    expect(remembered.status).toBe(201);
    const recalled = await world.post('/v1/recall', ownerToken, { query: 'friday deploys' });
    expect(recalled.status).toBe(200);
    expect(recalled.body.data[0]).toMatchObject({ memory: { id: remembered.body.memory.id, title: 'Never deploy on Fridays' } });
  });

  it('refuses a second organisation for an address that has an account, and a name that is not a node name', async () => {
    const again = await hiveAdmin('create-hive-organisation', '--name', 'other', '--email', 'owner@opsco.test', '--password', 'a long passphrase');
    expect(again.code).toBe(1);
    expect(again.json.error).toEqual({ code: 'conflict', message: 'This address already has an account.' });
    const badName = await hiveAdmin('create-hive-organisation', '--name', 'two words', '--email', 'x@opsco.test', '--password', 'a long passphrase');
    expect(badName.code).toBe(2);
    expect(badName.json.error.code).toBe('invalid_arguments');
  }, SEVERAL_COMMANDS);

  it('lists the organisation with its root node, people and balance', async () => {
    const listed = await hiveAdmin('list-hive-organisations');
    expect(listed.code).toBe(0);
    const balance = (await readWallet(world.hive.db, orgId)).balanceMicros;
    expect(listed.json.object).toBe('list');
    expect(listed.json.data.find((org: { id: string }) => org.id === orgId)).toEqual({
      id: orgId,
      name: 'opsco',
      root_node_id: rootNodeId,
      people: 1,
      balance_usd: Number(balance) / 1e6,
      suspended: false,
      created_at: expect.any(String),
    });
    // The 5 USD signup credit, less the remember and the recall above.
    expect(balance).toBeLessThan(5_000_000n);
    expect(balance).toBeGreaterThan(4_000_000n);
  });

  it("adds a person whose operator-made token carries the role given, read afresh at each use", async () => {
    const added = await hiveAdmin('add-hive-person', '--organisation', orgId, '--email', 'Bob@Opsco.test', '--role', 'reader');
    expect(added.code).toBe(0);
    expect(added.json).toEqual({
      organisation: { id: orgId },
      person: { id: expect.stringMatching(/^per_/), email: 'bob@opsco.test', guardrail_authority: false, axiom_authority: false },
      grant: { node: expect.objectContaining({ id: rootNodeId, path: 'opsco', role: 'reader' }), role: 'reader' },
    });
    const bobId = added.json.person.id;

    const minted = await hiveAdmin('create-hive-token', '--organisation', orgId, '--person', 'BOB@opsco.test', '--name', 'laptop');
    expect(minted.code).toBe(0);
    expect(minted.json).toMatchObject({ organisation: { id: orgId }, person: { id: bobId, email: 'bob@opsco.test' }, token: { id: expect.stringMatching(/^tok_/) } });
    const bobToken: string = minted.json.token.token;
    const who = await world.post('/v1/whoami', bobToken);
    expect(who.body).toMatchObject({ organisation: { id: orgId }, person: { id: bobId }, grants: [{ node: { id: rootNodeId, path: 'opsco' }, role: 'reader' }] });
    expect((await world.post('/v1/recall', bobToken, { query: 'friday deploys' })).body.data).toHaveLength(1);
    expect((await world.post('/v1/remember', bobToken, { node: 'opsco', title: 'Bob was here' })).status).toBe(403);

    // A second admission of the same person replaces their role there; the token they hold has it at once.
    const promoted = await hiveAdmin('add-hive-person', '--organisation', orgId, '--email', 'bob@opsco.test', '--role', 'member', '--node', 'opsco');
    expect(promoted.json.person.id).toBe(bobId);
    expect((await world.post('/v1/remember', bobToken, { node: 'opsco', title: 'Bob was here' })).status).toBe(201);

    // The person's id names them too, and each token is a new one.
    const byId = await hiveAdmin('create-hive-token', '--organisation', orgId, '--person', bobId);
    expect(byId.json.token.token).not.toBe(bobToken);
    expect((await world.post('/v1/whoami', byId.json.token.token)).body.person.id).toBe(bobId);
  }, SEVERAL_COMMANDS);

  it('refuses an admission or a token it cannot make', async () => {
    const other = await hiveAdmin('create-hive-organisation', '--name', 'otherco', '--email', 'carol@otherco.test', '--password', 'a long passphrase');
    const elsewhere = await hiveAdmin('add-hive-person', '--organisation', orgId, '--email', 'carol@otherco.test');
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.json.error.code).toBe('conflict');
    const crossToken = await hiveAdmin('create-hive-token', '--organisation', orgId, '--person', other.json.person.id);
    expect(crossToken.code).toBe(1);
    expect(crossToken.json.error.code).toBe('not_found');
    const noNode = await hiveAdmin('add-hive-person', '--organisation', orgId, '--email', 'dan@opsco.test', '--node', 'opsco/nowhere');
    expect(noNode.code).toBe(1);
    expect(noNode.json.error.code).toBe('not_found');
    const noOrg = await hiveAdmin('add-hive-person', '--organisation', 'org_000000000000000000000000', '--email', 'dan@opsco.test');
    expect(noOrg.code).toBe(1);
    expect(noOrg.json.error.code).toBe('not_found');
    const badRole = await hiveAdmin('add-hive-person', '--organisation', orgId, '--email', 'dan@opsco.test', '--role', 'emperor');
    expect(badRole.code).toBe(2);
    // Nothing of the refused admissions was written.
    const { rows } = await world.hive.db.query('SELECT 1 FROM hive.people WHERE email = $1', ['dan@opsco.test']);
    expect(rows).toEqual([]);
  }, SEVERAL_COMMANDS);

  it('credits a wallet with a topup ledger row, and a suspended organisation writes again', async () => {
    // An organisation made with no starting credit is suspended from the start.
    const empty = await runAdminWith(
      { DATABASE_URL: world.hive.config.DATABASE_URL, HIVE_SIGNUP_CREDIT_USD: '0' },
      'create-hive-organisation', '--name', 'emptyco', '--email', 'erin@emptyco.test', '--password', 'a long passphrase',
    );
    const emptyId: string = empty.json.organisation.id;
    const token: string = empty.json.token.token;
    expect(await readWallet(world.hive.db, emptyId)).toMatchObject({ balanceMicros: 0n, suspended: true });
    expect((await world.post('/v1/remember', token, { node: 'emptyco', title: 'First' })).status).toBe(402);

    const credited = await hiveAdmin('credit-hive-wallet', '--organisation', emptyId, '--amount-usd', '2.5', '--note', 'invoice 42');
    expect(credited.code).toBe(0);
    expect(credited.json).toEqual({ organisation: { id: emptyId }, credited_usd: 2.5, balance_usd: 2.5, reference: expect.stringMatching(/^operator opc_[0-9A-Za-z]{24}: invoice 42$/) });
    const { rows } = await world.hive.db.query('SELECT kind, amount_micros, balance_after_micros, reference FROM hive.wallet_ledger WHERE org_id = $1 ORDER BY id', [emptyId]);
    expect(rows).toEqual([{ kind: 'topup', amount_micros: '2500000', balance_after_micros: '2500000', reference: credited.json.reference }]);
    expect((await world.post('/v1/remember', token, { node: 'emptyco', title: 'First' })).status).toBe(201);

    // Two credits with the same note are two rows (each reference is unique), and the list shows the sum.
    await hiveAdmin('credit-hive-wallet', '--organisation', emptyId, '--amount-usd', '1', '--note', 'invoice 42');
    const balance = (await readWallet(world.hive.db, emptyId)).balanceMicros;
    expect(balance).toBeGreaterThan(3_000_000n);
    expect(balance).toBeLessThan(3_500_000n);
    const listed = await hiveAdmin('list-hive-organisations');
    expect(listed.json.data.find((org: { id: string }) => org.id === emptyId)).toMatchObject({ balance_usd: Number(balance) / 1e6, suspended: false });

    expect((await hiveAdmin('credit-hive-wallet', '--organisation', 'org_000000000000000000000000', '--amount-usd', '1')).json.error.code).toBe('not_found');
    expect((await hiveAdmin('credit-hive-wallet', '--organisation', emptyId, '--amount-usd', '0')).code).toBe(2);
  }, SEVERAL_COMMANDS);
});
