import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './support/expect-error.js';
import { createApiKey, revokeApiKey } from '../shared/accounts/accounts.js';
import { hashKey } from '../shared/accounts/keys.js';
import {
  bearer,
  call,
  createDeveloper,
  createProvisioningKeyFor,
  startTestPlatform,
  type TestDeveloper,
  type TestPlatform,
} from './support/test-platform.js';

let gateway: TestPlatform;
let alice: TestDeveloper;

beforeAll(async () => {
  gateway = await startTestPlatform();
  alice = await createDeveloper(gateway.platform, { scopes: ['api:read'], creditMicros: 12_345_678 });
});
afterAll(() => gateway?.close());

const balance = (headers: Record<string, string> = {}) => call(gateway.baseUrl, '/v1/balance', { headers });


describe('developer keys (Bearer ko_)', () => {
  it('lets a valid key with the scope through', async () => {
    const response = await balance(bearer(alice.key));
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ object: 'balance', account_id: alice.accountId, billing: 'wallet', balance_usd: 12.345678 });
  });

  it('stores only the SHA-256 and the 11-character display prefix', async () => {
    const { rows } = await gateway.platform.db.query('SELECT key_hash, display_prefix FROM api_keys WHERE account_id = $1', [alice.accountId]);
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash.equals(hashKey(alice.key))).toBe(true);
    expect(rows[0].display_prefix).toBe(alice.key.slice(0, 11));
    expect(alice.key).toMatch(/^ko_[0-9a-f]{64}$/);
    const { rows: anywhere } = await gateway.platform.db.query(`SELECT 1 FROM api_keys WHERE display_prefix = $1 OR name = $1`, [alice.key]);
    expect(anywhere).toHaveLength(0);
  });

  it('401 missing_token without an Authorization header', async () => {
    expectError(await balance(), 401, 'missing_token', { type: 'authentication_error' });
  });

  it.each([['Basic dXNlcjpwYXNz'], ['bearer ko_abc'], ['Token abc'], ['Bearer'], ['Bearer   '], ['Client']])(
    '401 invalid_auth_scheme for %j, saying which schemes exist',
    async (header) => {
      const response = await balance({ Authorization: header });
      expectError(response, 401, 'invalid_auth_scheme', { type: 'authentication_error' });
      expect(response.body.error.message).toContain("'Bearer ' or 'Client '");
    },
  );

  it('refuses a bad scheme before routing, even on an unknown path', async () => {
    const response = await call(gateway.baseUrl, '/v1/no-such-route', { headers: { Authorization: 'Basic abc' } });
    expectError(response, 401, 'invalid_auth_scheme', { type: 'authentication_error' });
  });

  it.each([
    ['not a ko_ key', 'sk-abc123'],
    ['a provisioning key', `rsk_${'a'.repeat(64)}`],
    ['a JWT sent with Bearer', 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln'],
    ['ko_ with uppercase hex', `ko_${'A'.repeat(64)}`],
    ['ko_ too short', `ko_${'a'.repeat(63)}`],
  ])('401 invalid_token_format for %s', async (_label, credential) => {
    expectError(await balance({ Authorization: `Bearer ${credential}` }), 401, 'invalid_token_format', { type: 'authentication_error' });
  });

  it('401 invalid_token for a well-formed key nobody issued', async () => {
    expectError(await balance(bearer(`ko_${'0'.repeat(64)}`)), 401, 'invalid_token', { type: 'authentication_error' });
  });

  it('401 invalid_token for an expired key', async () => {
    const { plaintext } = await createApiKey(gateway.platform.db, alice.accountId, { name: 'old', scopes: ['api:read'], expiresAt: new Date(Date.now() - 1000) });
    expectError(await balance(bearer(plaintext)), 401, 'invalid_token', { type: 'authentication_error' });
  });

  it('accepts a key whose expiry is still ahead', async () => {
    const { plaintext } = await createApiKey(gateway.platform.db, alice.accountId, { name: 'soon', scopes: ['api:read'], expiresAt: new Date(Date.now() + 3_600_000) });
    expect((await balance(bearer(plaintext))).status).toBe(200);
  });

  it('401 invalid_token on the very next request after revocation (a hard delete)', async () => {
    const { key, plaintext } = await createApiKey(gateway.platform.db, alice.accountId, { name: 'to revoke', scopes: ['api:read'] });
    expect((await balance(bearer(plaintext))).status).toBe(200);
    await revokeApiKey(gateway.platform.db, alice.accountId, key.id);
    expectError(await balance(bearer(plaintext)), 401, 'invalid_token', { type: 'authentication_error' });
    const { rowCount } = await gateway.platform.db.query('SELECT 1 FROM api_keys WHERE id = $1', [key.id]);
    expect(rowCount).toBe(0);
  });

  it("cannot revoke another developer's key: it is not found, and keeps working", async () => {
    const bob = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    const { key } = await createApiKey(gateway.platform.db, bob.accountId, { name: 'bob', scopes: ['api:read'] });
    await expect(revokeApiKey(gateway.platform.db, alice.accountId, key.id)).rejects.toMatchObject({ status: 404, type: 'not_found_error' });
    expect((await balance(bearer(bob.key))).status).toBe(200);
  });

  it('403 insufficient_scope when the key lacks the route scope', async () => {
    const chatOnly = await createDeveloper(gateway.platform, { scopes: ['api:chat'] });
    const response = await balance(bearer(chatOnly.key));
    expectError(response, 403, 'insufficient_scope', { type: 'permission_error' });
    expect(response.body.error.message).toContain('api:read');
  });

  it('lets admin satisfy any scope', async () => {
    const admin = await createDeveloper(gateway.platform, { scopes: ['admin'] });
    expect((await balance(bearer(admin.key))).status).toBe(200);
  });

  it('403 endpoint_not_allowed_for_client_token for a client token on a Bearer-only route', async () => {
    const response = await balance({ Authorization: 'Client eyJhbGciOiJFZERTQSJ9.e30.c2ln' });
    expectError(response, 403, 'endpoint_not_allowed_for_client_token', { type: 'permission_error' });
  });

  it('refuses a key of a closed account', async () => {
    const closing = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    await gateway.platform.db.query(`UPDATE accounts SET status = 'closed', closed_at = now() WHERE id = $1`, [closing.accountId]);
    expectError(await balance(bearer(closing.key)), 401, 'invalid_token', { type: 'authentication_error' });
  });
});

describe('provisioning keys (Bearer rsk_) on /v1/accounts', () => {
  let provisioningKey: string;

  beforeAll(async () => {
    provisioningKey = await createProvisioningKeyFor(gateway.platform, alice.accountId);
  });

  it('lists the accounts this developer provisioned, in the cursor envelope', async () => {
    const response = await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(provisioningKey) });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
  });

  it.each([
    ['no Authorization header', {}],
    ['a ko_ developer key', { Authorization: 'Bearer ko_' + 'a'.repeat(64) }],
    ['a malformed rsk_ key', { Authorization: 'Bearer rsk_123' }],
    ['an unknown rsk_ key', { Authorization: `Bearer rsk_${'b'.repeat(64)}` }],
  ])('401 invalid_provisioning_key for %s', async (_label, headers) => {
    expectError(await call(gateway.baseUrl, '/v1/accounts', { headers }), 401, 'invalid_provisioning_key', { type: 'authentication_error' });
  });

  it("401 invalid_provisioning_key for alice's real ko_ key too", async () => {
    expectError(await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(alice.key) }), 401, 'invalid_provisioning_key', { type: 'authentication_error' });
  });

  it('401 invalid_provisioning_key for a replaced (revoked) rsk_ key; the new one works', async () => {
    const replacement = await createProvisioningKeyFor(gateway.platform, alice.accountId);
    expectError(await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(provisioningKey) }), 401, 'invalid_provisioning_key', { type: 'authentication_error' });
    expect((await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(replacement) })).status).toBe(200);
    provisioningKey = replacement;
  });

  it('still refuses a bad scheme with invalid_auth_scheme', async () => {
    expectError(await call(gateway.baseUrl, '/v1/accounts', { headers: { Authorization: 'Basic x' } }), 401, 'invalid_auth_scheme', { type: 'authentication_error' });
  });
});

describe('cross-tenant ids are 404, never 403', () => {
  it("hides another developer's provisioned account and the developer account itself", async () => {
    const bob = await createDeveloper(gateway.platform);
    const bobsEndUser = await insertEndUserAccount(bob.accountId, 'bob-user');
    const aliceKey = await createProvisioningKeyFor(gateway.platform, alice.accountId);
    const bobKey = await createProvisioningKeyFor(gateway.platform, bob.accountId);

    const own = await call(gateway.baseUrl, `/v1/accounts/${bobsEndUser}`, { headers: bearer(bobKey) });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ id: bobsEndUser, object: 'account', owner_type: 'api_end_user', status: 'active', funding: 'standalone', balance_usd: 0 });

    for (const id of [bobsEndUser, bob.accountId, alice.accountId, 'not-a-uuid']) {
      const response = await call(gateway.baseUrl, `/v1/accounts/${id}`, { headers: bearer(aliceKey) });
      expectError(response, 404, 'account_not_found', { type: 'not_found_error' });
    }
    const list = await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(aliceKey) });
    expect(list.body.data).toEqual([]);
  });

  it('pages through provisioned accounts with limit and after', async () => {
    const carol = await createDeveloper(gateway.platform);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await insertEndUserAccount(carol.accountId, `carol-user-${i}`));
    const key = await createProvisioningKeyFor(gateway.platform, carol.accountId);
    const first = await call(gateway.baseUrl, '/v1/accounts?limit=2', { headers: bearer(key) });
    expect(first.body.data.map((account: { id: string }) => account.id)).toEqual(ids.slice(0, 2));
    expect(first.body.has_more).toBe(true);
    const second = await call(gateway.baseUrl, `/v1/accounts?limit=2&after=${first.body.next_cursor}`, { headers: bearer(key) });
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.body.data.map((account: { id: string }) => account.id)).toEqual(ids.slice(2));
    const clamped = await call(gateway.baseUrl, '/v1/accounts?limit=0', { headers: bearer(key) });
    expect(clamped.body.data).toHaveLength(1);
    const badCursor = await call(gateway.baseUrl, '/v1/accounts?after=garbage', { headers: bearer(key) });
    expectError(badCursor, 400, 'invalid_request', { type: 'invalid_request_error' });
    expect(badCursor.body.error.param).toBe('after');
  });
});

/** Provisioned accounts are created by POST /v1/accounts (a later change); tests insert them directly. */
async function insertEndUserAccount(developerId: string, username: string): Promise<string> {
  const { rows } = await gateway.platform.db.query<{ id: string }>(
    `WITH account AS (
       INSERT INTO accounts (owner_type, parent_account_id, email, username, password_hash)
       VALUES ('api_end_user', $1, $2 || '@example.test', $2, 'x') RETURNING id)
     INSERT INTO wallets (account_id) SELECT id FROM account RETURNING account_id AS id`,
    [developerId, username],
  );
  // Distinct created_at values keep the page order deterministic.
  await new Promise((resolve) => setTimeout(resolve, 5));
  return rows[0]!.id;
}
