import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, startTestPlatform, type TestPlatform } from './support/test-platform.js';
import { runAdmin } from './support/admin-cli.js';


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
