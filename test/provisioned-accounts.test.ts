import { randomBytes } from 'node:crypto';
import { expectError } from './support/expect-error.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey } from '../shared/accounts/keys.js';
import { verifyPassword } from '../shared/accounts/passwords.js';
import {
  bearer,
  call,
  createDeveloper,
  createProvisioningKeyFor,
  startTestPlatform,
  type ApiResponse,
  type TestDeveloper,
  type TestPlatform,
} from './support/test-platform.js';
import { runAdmin } from './support/admin-cli.js';


let gateway: TestPlatform;

beforeAll(async () => {
  // A high provisioning rate limit here; the 429 has its own platform below.
  // The concurrency test holds 20 transactions open at once, so the pool must be larger than that.
  gateway = await startTestPlatform({ PROVISIONING_RPM_LIMIT: '10000', ACCOUNT_CAP: '10', DATABASE_POOL_MAX: '30' });
});
afterAll(() => gateway?.close());

interface Tenant extends TestDeveloper {
  rsk: string;
}

/** A fresh developer (its own cap count and wallet) with its rsk_ key. */
async function newTenant(on: TestPlatform = gateway, creditMicros = 5_000_000): Promise<Tenant> {
  const developer = await createDeveloper(on.platform, { creditMicros });
  return { ...developer, rsk: await createProvisioningKeyFor(on.platform, developer.accountId) };
}

let userCount = 0;
function newUser() {
  const tag = `${++userCount}_${randomBytes(3).toString('hex')}`;
  return { email: `user${tag}@example.test`, username: `u${tag}`, password: 'end user password' };
}

const createAccount = (tenant: Tenant, body: unknown, on: TestPlatform = gateway) =>
  call(on.baseUrl, '/v1/accounts', { method: 'POST', headers: bearer(tenant.rsk), json: body });
const getAccount = (tenant: Tenant, id: string, on: TestPlatform = gateway) => call(on.baseUrl, `/v1/accounts/${id}`, { headers: bearer(tenant.rsk) });
const closeAccount = (tenant: Tenant, id: string, on: TestPlatform = gateway) =>
  call(on.baseUrl, `/v1/accounts/${id}`, { method: 'DELETE', headers: bearer(tenant.rsk) });
const balanceWith = (key: string, on: TestPlatform = gateway) => call(on.baseUrl, '/v1/balance', { headers: bearer(key) });


async function walletMicros(accountId: string): Promise<number | undefined> {
  const { rows } = await gateway.platform.db.query<{ balance_micros: string }>('SELECT balance_micros FROM wallets WHERE account_id = $1', [accountId]);
  return rows[0] ? Number(rows[0].balance_micros) : undefined;
}

async function ledger(accountId: string): Promise<{ amount: number; kind: string; reference: string | null }[]> {
  const { rows } = await gateway.platform.db.query('SELECT amount_micros, kind, reference FROM wallet_ledger WHERE account_id = $1 ORDER BY id', [accountId]);
  return rows.map((row) => ({ amount: Number(row.amount_micros), kind: row.kind, reference: row.reference }));
}

/** Every wallet's balance is exactly the sum of its ledger. */
async function expectLedgerMatchesBalance(accountId: string): Promise<void> {
  const rows = await ledger(accountId);
  expect(rows.reduce((sum, row) => sum + row.amount, 0)).toBe(await walletMicros(accountId));
}

async function accountIdsByEmail(email: string): Promise<string[]> {
  const { rows } = await gateway.platform.db.query<{ id: string }>('SELECT id FROM accounts WHERE lower(email) = lower($1)', [email]);
  return rows.map((row) => row.id);
}

const admin = (...args: string[]) => runAdmin(gateway.config.DATABASE_URL, ...args);

describe('POST /v1/accounts', () => {
  it('creates a standalone account with its own empty wallet by default, and a ko_ key shown once', async () => {
    const tenant = await newTenant();
    const user = newUser();
    const response = await createAccount(tenant, user);

    expect(response.status).toBe(201);
    const { account, api_key, api_key_prefix, credit, message } = response.body;
    expect(Object.keys(response.body).sort()).toEqual(['account', 'api_key', 'api_key_prefix', 'credit', 'message']);
    expect(account).toEqual({ id: expect.any(String), email: user.email, username: user.username, owner_type: 'api_end_user' });
    expect(api_key).toMatch(/^ko_[0-9a-f]{64}$/);
    expect(api_key_prefix).toBe(api_key.slice(0, 11));
    expect(credit).toEqual({ balance_usd: 0, funding: 'self', applied: false, reason: 'own_empty_wallet' });
    expect(message).toEqual(expect.stringContaining('shown once'));

    const { rows } = await gateway.platform.db.query('SELECT owner_type, parent_account_id, funding, password_hash, vault_password_hash FROM accounts WHERE id = $1', [account.id]);
    expect(rows[0]).toMatchObject({ owner_type: 'api_end_user', parent_account_id: tenant.accountId, funding: 'standalone' });
    expect(await verifyPassword(user.password, rows[0].password_hash)).toBe(true);
    // vault_password defaults to the password.
    expect(await verifyPassword(user.password, rows[0].vault_password_hash)).toBe(true);
    expect(rows[0].vault_password_hash).not.toContain(user.password);
    expect(await walletMicros(account.id)).toBe(0);
    expect(await ledger(account.id)).toEqual([]);

    const keys = await gateway.platform.db.query('SELECT key_hash, scopes FROM api_keys WHERE account_id = $1', [account.id]);
    expect(keys.rows).toHaveLength(1);
    expect(keys.rows[0].scopes).toEqual(['api:chat', 'api:read']);
    expect(keys.rows[0].key_hash.equals(hashKey(api_key))).toBe(true);

    expect((await balanceWith(api_key)).body).toEqual({ object: 'balance', account_id: account.id, billing: 'wallet', balance_usd: 0 });
    const fetched = await getAccount(tenant, account.id);
    expect(fetched.body).toEqual({
      id: account.id,
      object: 'account',
      email: user.email,
      username: user.username,
      owner_type: 'api_end_user',
      status: 'active',
      funding: 'standalone',
      balance_usd: 0,
      spend_usd: 0,
      created_at: expect.any(String),
      closed_at: null,
    });
    const listed = await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(tenant.rsk) });
    expect(listed.body.data).toEqual([fetched.body]);
  });

  it('stores a separate vault_password hashed, and never returns either secret', async () => {
    const tenant = await newTenant();
    const user = { ...newUser(), vault_password: 'a separate vault secret' };
    const response = await createAccount(tenant, user);
    expect(response.status).toBe(201);
    expect(response.text).not.toContain(user.password);
    expect(response.text).not.toContain(user.vault_password);
    const { rows } = await gateway.platform.db.query('SELECT password_hash, vault_password_hash FROM accounts WHERE id = $1', [response.body.account.id]);
    expect(await verifyPassword(user.vault_password, rows[0].vault_password_hash)).toBe(true);
    expect(await verifyPassword(user.password, rows[0].vault_password_hash)).toBe(false);
    expect(rows[0].vault_password_hash).not.toContain(user.vault_password);
    const fetched = await getAccount(tenant, response.body.account.id);
    expect(JSON.stringify(fetched.body)).not.toMatch(/password/);
  });

  it('grant: moves amount_usd from the developer wallet to the new wallet, two ledger rows in one go', async () => {
    const tenant = await newTenant(gateway, 5_000_000);
    const response = await createAccount(tenant, { ...newUser(), funding: 'grant', amount_usd: 1.25 });
    expect(response.status).toBe(201);
    const id = response.body.account.id;
    expect(response.body.credit).toEqual({ balance_usd: 1.25, funding: 'grant', applied: true, reason: 'granted_from_developer_wallet' });

    expect(await walletMicros(tenant.accountId)).toBe(3_750_000);
    expect(await walletMicros(id)).toBe(1_250_000);
    expect(await ledger(tenant.accountId)).toEqual([
      { amount: 5_000_000, kind: 'credit', reference: null },
      { amount: -1_250_000, kind: 'grant_out', reference: id },
    ]);
    expect(await ledger(id)).toEqual([{ amount: 1_250_000, kind: 'grant_in', reference: tenant.accountId }]);
    await expectLedgerMatchesBalance(tenant.accountId);
    await expectLedgerMatchesBalance(id);

    expect((await balanceWith(response.body.api_key)).body).toEqual({ object: 'balance', account_id: id, billing: 'wallet', balance_usd: 1.25 });
    expect((await getAccount(tenant, id)).body).toMatchObject({ funding: 'standalone', balance_usd: 1.25, spend_usd: 0 });
    expect((await balanceWith(tenant.key)).body.balance_usd).toBe(3.75);
  });

  it('linked: no wallet of its own; its key reports billing linked without the parent wallet', async () => {
    const tenant = await newTenant(gateway, 7_000_000);
    const response = await createAccount(tenant, { ...newUser(), funding: 'linked' });
    expect(response.status).toBe(201);
    const id = response.body.account.id;
    expect(response.body.credit).toEqual({ balance_usd: 0, funding: 'linked', applied: false, reason: 'bills_developer_wallet' });

    const balance = await balanceWith(response.body.api_key);
    expect(balance.status).toBe(200);
    expect(balance.body).toEqual({ object: 'balance', account_id: id, billing: 'linked' });
    expect((await getAccount(tenant, id)).body).toMatchObject({ funding: 'linked', balance_usd: 0, spend_usd: 0, status: 'active' });
    expect(await walletMicros(id)).toBeUndefined();
    expect(await walletMicros(tenant.accountId)).toBe(7_000_000);
  });

  it('grant races for one wallet: only what the wallet holds is granted, the rest get 402', async () => {
    const tenant = await newTenant(gateway, 5_000_000);
    const responses = await Promise.all(Array.from({ length: 5 }, () => createAccount(tenant, { ...newUser(), funding: 'grant', amount_usd: 2 })));
    expect(responses.map((response) => response.status).sort()).toEqual([201, 201, 402, 402, 402]);
    expect(await walletMicros(tenant.accountId)).toBe(1_000_000);
    await expectLedgerMatchesBalance(tenant.accountId);
    const { rows } = await gateway.platform.db.query('SELECT count(*)::int AS n FROM accounts WHERE parent_account_id = $1', [tenant.accountId]);
    expect(rows[0].n).toBe(2);
  });
});

describe('errors of the Accounts table', () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await newTenant();
  });

  it.each([
    ['email missing', { email: undefined }, 'email'],
    ['email malformed', { email: 'not-an-email' }, 'email'],
    ['username too short', { username: 'ab' }, 'username'],
    ['username too long', { username: 'a'.repeat(21) }, 'username'],
    ['username with a dash', { username: 'bad-name' }, 'username'],
    ['username with a space', { username: 'bad name' }, 'username'],
    ['username missing', { username: undefined }, 'username'],
    ['password of 7 characters', { password: '1234567' }, 'password'],
    ['password of 257 characters', { password: 'p'.repeat(257) }, 'password'],
    ['password missing', { password: undefined }, 'password'],
    ['vault_password too short', { vault_password: 'short' }, 'vault_password'],
    ['unknown funding', { funding: 'credit_card' }, 'funding'],
    ['grant without amount_usd', { funding: 'grant' }, 'amount_usd'],
    ['grant with a zero amount', { funding: 'grant', amount_usd: 0 }, 'amount_usd'],
    ['grant with a negative amount', { funding: 'grant', amount_usd: -1 }, 'amount_usd'],
    ['grant with a string amount', { funding: 'grant', amount_usd: '5' }, 'amount_usd'],
    ['grant below one micro-dollar', { funding: 'grant', amount_usd: 0.0000001 }, 'amount_usd'],
    ['amount_usd without grant', { amount_usd: 1 }, 'amount_usd'],
    ['voucher without voucher_code', { funding: 'voucher' }, 'voucher_code'],
    ['voucher_code without voucher', { funding: 'linked', voucher_code: 'vch_x' }, 'voucher_code'],
  ])('400 invalid_request for %s, naming the field', async (_label, override, param) => {
    const user = newUser();
    const response = await createAccount(tenant, { ...user, ...override });
    expectError(response, 400, 'invalid_request', { param: param });
    expect(response.body.error.type).toBe('invalid_request_error');
    expect(await accountIdsByEmail(user.email)).toEqual([]);
  });

  it('accepts the boundaries: username of 3 and 20, password of 8 and 256 characters', async () => {
    const short = await createAccount(tenant, { ...newUser(), username: `a${randomBytes(1).toString('hex')}`, password: '12345678' });
    expect(short.status).toBe(201);
    const long = await createAccount(tenant, { ...newUser(), username: `Z_${randomBytes(9).toString('hex')}`, password: 'p'.repeat(256) });
    expect(long.status).toBe(201);
    expect(long.body.account.username).toHaveLength(20);
  });

  it('400 invalid_request for a body that is not an object', async () => {
    const response = await call(gateway.baseUrl, '/v1/accounts', { method: 'POST', headers: bearer(tenant.rsk), json: ['email'] });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_request');
  });

  it('409 account_exists for a taken email or username, case-insensitively, platform-wide', async () => {
    const other = await newTenant();
    const user = newUser();
    expect((await createAccount(tenant, user)).status).toBe(201);

    const sameEmail = await createAccount(other, { ...newUser(), email: user.email.toUpperCase() });
    expectError(sameEmail, 409, 'account_exists', { param: undefined });
    expect(sameEmail.body.error.message).toContain('email');

    const sameUsername = await createAccount(tenant, { ...newUser(), username: user.username.toUpperCase() });
    expectError(sameUsername, 409, 'account_exists', { param: undefined });
    expect(sameUsername.body.error.message).toContain('username');

    // A developer's own email is taken too.
    expectError(await createAccount(other, { ...newUser(), email: tenant.email }), 409, 'account_exists', { param: undefined });
    expect(await accountIdsByEmail(user.email)).toHaveLength(1);
  });

  it('402 insufficient_funds for a grant over the developer wallet: nothing is created or moved', async () => {
    const poor = await newTenant(gateway, 1_000_000);
    const user = newUser();
    const response = await createAccount(poor, { ...user, funding: 'grant', amount_usd: 1.000001 });
    expectError(response, 402, 'insufficient_funds', { param: undefined });
    expect(response.body.error.type).toBe('payment_required');
    expect(await accountIdsByEmail(user.email)).toEqual([]);
    expect(await walletMicros(poor.accountId)).toBe(1_000_000);
    expect(await ledger(poor.accountId)).toHaveLength(1);
    const { rows } = await gateway.platform.db.query('SELECT count(*)::int AS n FROM api_keys a JOIN accounts c ON c.id = a.account_id WHERE c.parent_account_id = $1', [poor.accountId]);
    expect(rows[0].n).toBe(0);
    // The same email and username are free afterwards, and the exact balance can be granted.
    const exact = await createAccount(poor, { ...user, funding: 'grant', amount_usd: 1 });
    expect(exact.status).toBe(201);
    expect(await walletMicros(poor.accountId)).toBe(0);
  });

  it("404 account_not_found for GET and DELETE of unknown, malformed, another developer's and the developer's own id", async () => {
    const other = await newTenant();
    const theirs = (await createAccount(other, newUser())).body.account.id;
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', theirs, tenant.accountId, other.accountId]) {
      expectError(await getAccount(tenant, id), 404, 'account_not_found', { param: undefined });
      expectError(await closeAccount(tenant, id), 404, 'account_not_found', { param: undefined });
    }
    expect((await getAccount(other, theirs)).body.status).toBe('active');
  });

  it('429 rate_limited after PROVISIONING_RPM_LIMIT calls on one rsk_ key in a minute', async () => {
    const limited = await startTestPlatform({ PROVISIONING_RPM_LIMIT: '3' });
    try {
      const developer = await newTenant(limited);
      for (let i = 0; i < 2; i++) expect((await call(limited.baseUrl, '/v1/accounts', { headers: bearer(developer.rsk) })).status).toBe(200);
      expect((await createAccount(developer, newUser(), limited)).status).toBe(201);
      const user = newUser();
      const refused = await createAccount(developer, user, limited);
      expectError(refused, 429, 'rate_limited', { param: undefined });
      expect(refused.body.error.retry_after_seconds).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers.get('retry-after'))).toBe(refused.body.error.retry_after_seconds);
      const { rows } = await limited.platform.db.query('SELECT 1 FROM accounts WHERE email = $1', [user.email]);
      expect(rows).toHaveLength(0);
      // The limit is per key: another developer's key is untouched.
      const neighbour = await newTenant(limited);
      expect((await call(limited.baseUrl, '/v1/accounts', { headers: bearer(neighbour.rsk) })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('the active-account cap', () => {
  let capped: TestPlatform;
  beforeAll(async () => {
    capped = await startTestPlatform({ ACCOUNT_CAP: '2', PROVISIONING_RPM_LIMIT: '10000' });
  });
  afterAll(() => capped?.close());

  it('403 cap_reached at the cap; closing an account frees its slot', async () => {
    const developer = await newTenant(capped);
    const first = await createAccount(developer, newUser(), capped);
    const second = await createAccount(developer, { ...newUser(), funding: 'linked' }, capped);
    expect([first.status, second.status]).toEqual([201, 201]);

    const user = newUser();
    const refused = await createAccount(developer, user, capped);
    expectError(refused, 403, 'cap_reached', { param: undefined });
    expect(refused.body.error.type).toBe('permission_error');
    expect((await capped.platform.db.query('SELECT 1 FROM accounts WHERE email = $1', [user.email])).rows).toHaveLength(0);

    // Another developer has a cap of its own.
    expect((await createAccount(await newTenant(capped), newUser(), capped)).status).toBe(201);

    expect((await closeAccount(developer, first.body.account.id, capped)).status).toBe(200);
    expect((await createAccount(developer, user, capped)).status).toBe(201);
    expectError(await createAccount(developer, newUser(), capped), 403, 'cap_reached', { param: undefined });
  });
});

describe('DELETE /v1/accounts/{id}', () => {
  it('closes the account, revokes its ko_ key at once, and leaves its balance in its own wallet', async () => {
    const tenant = await newTenant(gateway, 5_000_000);
    const created = await createAccount(tenant, { ...newUser(), funding: 'grant', amount_usd: 2 });
    const id = created.body.account.id;
    expect((await balanceWith(created.body.api_key)).status).toBe(200);

    const closed = await closeAccount(tenant, id);
    expect(closed.status).toBe(200);
    expect(closed.body).toEqual({ id, object: 'account', status: 'closed', deleted: true });

    const refused = await balanceWith(created.body.api_key);
    expectError(refused, 401, 'invalid_token', { param: undefined });
    expect((await gateway.platform.db.query('SELECT 1 FROM api_keys WHERE account_id = $1', [id])).rows).toHaveLength(0);

    const fetched = await getAccount(tenant, id);
    expect(fetched.body).toMatchObject({ id, status: 'closed', balance_usd: 2, closed_at: expect.any(String) });
    expect(await walletMicros(tenant.accountId)).toBe(3_000_000);
    await expectLedgerMatchesBalance(id);

    // Closing again: not an open account any more.
    expectError(await closeAccount(tenant, id), 404, 'account_not_found', { param: undefined });
  });

  it("cannot close another developer's account", async () => {
    const owner = await newTenant();
    const intruder = await newTenant();
    const created = await createAccount(owner, newUser());
    expectError(await closeAccount(intruder, created.body.account.id), 404, 'account_not_found', { param: undefined });
    expect((await balanceWith(created.body.api_key)).status).toBe(200);
    expect((await getAccount(owner, created.body.account.id)).body.status).toBe('active');
  });
});

describe('concurrent creates', () => {
  it('20 parallel creates against a cap of 10: exactly 10 succeed and 10 get cap_reached', async () => {
    const tenant = await newTenant();
    // Hold back every insert into accounts until all 20 creates are inside their transactions, so
    // they truly overlap: only the developer-row lock can then keep the count honest.
    const blocker = await gateway.platform.db.connect();
    let responses: ApiResponse[];
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE');
      let settled = false;
      const pending = Promise.all(Array.from({ length: 20 }, () => createAccount(tenant, newUser()))).finally(() => {
        settled = true;
      });
      await waitUntil(async () => settled || (await backendsWaitingOnLocks()) >= 20);
      await blocker.query('COMMIT');
      responses = await pending;
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      blocker.release();
    }
    const outcomes = responses.map((response) => (response.status === 201 ? 'created' : response.body?.error?.code));
    expect(outcomes.filter((outcome) => outcome === 'created')).toHaveLength(10);
    expect(outcomes.filter((outcome) => outcome === 'cap_reached')).toHaveLength(10);
    const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM accounts WHERE parent_account_id = $1 AND status = 'active'`, [tenant.accountId]);
    expect(rows[0].n).toBe(10);
  });
});

async function backendsWaitingOnLocks(): Promise<number> {
  const { rows } = await gateway.platform.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
  );
  return rows[0]!.n;
}

/** Polls a condition (a synchronisation point, not a timing assertion); gives up after 20 s. */
async function waitUntil(condition: () => Promise<boolean>): Promise<void> {
  for (let tries = 0; tries < 400; tries++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('condition not reached within 20 s');
}

describe('vouchers (operator CLI)', () => {
  let tenant: Tenant;
  let code: string;
  let voucherId: string;

  beforeAll(async () => {
    tenant = await newTenant(gateway, 5_000_000);
  });

  it('create-voucher reserves the amount from the developer wallet and prints the code once', async () => {
    const minted = await admin('create-voucher', '--account', tenant.accountId, '--amount-usd', '2');
    expect(minted.code).toBe(0);
    expect(minted.json).toMatchObject({ object: 'voucher', account_id: tenant.accountId, amount_usd: 2, status: 'available', redeemed_account_id: null });
    expect(minted.json.voucher_code).toMatch(/^vch_[0-9a-f]{32}$/);
    code = minted.json.voucher_code;
    voucherId = minted.json.id;

    expect(await walletMicros(tenant.accountId)).toBe(3_000_000);
    expect((await ledger(tenant.accountId)).at(-1)).toEqual({ amount: -2_000_000, kind: 'voucher_reserve', reference: voucherId });
    await expectLedgerMatchesBalance(tenant.accountId);
    const { rows } = await gateway.platform.db.query('SELECT code_hash, display_prefix, amount_micros FROM vouchers WHERE id = $1', [voucherId]);
    expect(rows[0].code_hash.equals(hashKey(code))).toBe(true);
    expect(rows[0]).toMatchObject({ display_prefix: code.slice(0, 12), amount_micros: '2000000' });
  });

  it('list-vouchers shows the voucher without its code', async () => {
    const listed = await admin('list-vouchers', '--account', tenant.accountId);
    expect(listed.json.data).toEqual([expect.objectContaining({ id: voucherId, amount_usd: 2, status: 'available' })]);
    expect(listed.stdout).not.toContain(code);
  });

  it("refuses another developer's voucher and an unknown code with invalid_request on voucher_code", async () => {
    const other = await newTenant();
    for (const [who, voucherCode] of [
      [other, code],
      [tenant, `vch_${'0'.repeat(32)}`],
      [tenant, 'not a voucher'],
    ] as const) {
      const user = newUser();
      expectError(await createAccount(who, { ...user, funding: 'voucher', voucher_code: voucherCode }), 400, 'invalid_request', { param: 'voucher_code' });
      expect(await accountIdsByEmail(user.email)).toEqual([]);
    }
  });

  it('redeems once into a new standalone account; a second redemption is refused', async () => {
    const [first, second] = await Promise.all([
      createAccount(tenant, { ...newUser(), funding: 'voucher', voucher_code: code }),
      createAccount(tenant, { ...newUser(), funding: 'voucher', voucher_code: code }),
    ]);
    const [redeemed, refused] = first.status === 201 ? [first, second] : [second, first];
    expect(redeemed.status).toBe(201);
    expectError(refused, 400, 'invalid_request', { param: 'voucher_code' });

    const id = redeemed.body.account.id;
    expect(redeemed.body.credit).toEqual({ balance_usd: 2, funding: 'voucher', applied: true, reason: 'voucher_redeemed' });
    expect(await ledger(id)).toEqual([{ amount: 2_000_000, kind: 'voucher_redeem', reference: voucherId }]);
    await expectLedgerMatchesBalance(id);
    expect((await balanceWith(redeemed.body.api_key)).body).toMatchObject({ billing: 'wallet', balance_usd: 2 });
    expect(await walletMicros(tenant.accountId)).toBe(3_000_000);

    const again = await createAccount(tenant, { ...newUser(), funding: 'voucher', voucher_code: code });
    expectError(again, 400, 'invalid_request', { param: 'voucher_code' });

    const listed = await admin('list-vouchers', '--account', tenant.accountId);
    expect(listed.json.data[0]).toMatchObject({ id: voucherId, status: 'redeemed', redeemed_account_id: id, redeemed_at: expect.any(String) });
  });

  it('create-voucher over the wallet fails with insufficient_funds and reserves nothing', async () => {
    const result = await admin('create-voucher', '--account', tenant.accountId, '--amount-usd', '3.5');
    expect(result.code).toBe(1);
    expect(result.json.error.code).toBe('insufficient_funds');
    expect(await walletMicros(tenant.accountId)).toBe(3_000_000);
    const { rows } = await gateway.platform.db.query('SELECT count(*)::int AS n FROM vouchers WHERE account_id = $1', [tenant.accountId]);
    expect(rows[0].n).toBe(1);
  });

  it.each([
    [['create-voucher', '--account', '00000000-0000-4000-8000-000000000000', '--amount-usd', '0'], 2, 'invalid_arguments'],
    [['create-voucher', '--account', '00000000-0000-4000-8000-000000000000', '--amount-usd', '-1'], 2, 'invalid_arguments'],
    [['create-voucher', '--account', '00000000-0000-4000-8000-000000000000'], 2, 'invalid_arguments'],
    [['create-voucher', '--account', '00000000-0000-4000-8000-000000000000', '--amount-usd', '1'], 1, 'account_not_found'],
  ])('create-voucher %j exits %i with %s', async (args, exitCode, errorCode) => {
    const result = await admin(...args);
    expect(result.code).toBe(exitCode);
    expect(result.json.error.code).toBe(errorCode);
  });
});
