import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './support/expect-error.js';
import { meteredProbeRoutes } from '../bench/support/metered-probe.js';
import { bearer, call, createDeveloper, createProvisioningKeyFor, startSecondInstance, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * The governance chain of every metered call, through real HTTP requests: authentication by
 * either scheme, customer attribution, the four rate-limit layers, reserve and settle.
 */
let gateway: TestPlatform;
let developer: TestDeveloper;
const probe = (platform: Parameters<typeof meteredProbeRoutes>[0]) => [meteredProbeRoutes(platform)];

beforeAll(async () => {
  gateway = await startTestPlatform({ DATABASE_POOL_MAX: '20', LAZY_CREATE_PER_MINUTE: '5' }, { routes: probe });
  developer = await createDeveloper(gateway.platform, { creditMicros: 10_000_000 });
});
afterAll(() => gateway?.close());

const meter = (headers: Record<string, string>, json: Record<string, unknown> = {}, baseUrl = gateway.baseUrl) =>
  call(baseUrl, '/v1/_probe/metered', { method: 'POST', json, headers });
const customerOf = async (id: string) => (await call(gateway.baseUrl, `/v1/customers/${id}`, { headers: bearer(developer.key) })).body;
const createCustomer = async (json: Record<string, unknown>, key = developer.key) =>
  (await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json, headers: bearer(key) })).body;


describe('developer keys', () => {
  it('reserves, settles and reports the charge in headers', async () => {
    const response = await meter(bearer(developer.key), { max_cost_micros: 2_000, cost_micros: 1_250 });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-svc-wallet-deducted')).toBe('0.00125');
    expect(response.headers.get('x-svc-wallet-balance')).toBe('9.99875');
    expect(Number(response.headers.get('x-ratelimit-remaining'))).toBeGreaterThan(0);
  });

  it('times each step of the call in /metrics', async () => {
    const steps = async () => {
      const { text } = await call(gateway.baseUrl, '/metrics');
      return Object.fromEntries(['rate_limit', 'reserve', 'upstream', 'settle'].map((step) => [step, Number(new RegExp(`^svc_metering_step_seconds_count\\{step="${step}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)]));
    };
    const before = await steps();
    expect((await meter(bearer(developer.key))).status).toBe(200);
    const after = await steps();
    expect(Object.fromEntries(Object.entries(after).map(([step, count]) => [step, count - before[step]!]))).toEqual({ rate_limit: 1, reserve: 1, upstream: 1, settle: 1 });
  });

  it('403 insufficient_scope without api:chat', async () => {
    const reader = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    expectError(await meter(bearer(reader.key)), 403, 'insufficient_scope');
  });

  it('402 wallet_empty when the developer wallet cannot cover the reservation', async () => {
    const poor = await createDeveloper(gateway.platform, { creditMicros: 1_000 });
    expectError(await meter(bearer(poor.key), { max_cost_micros: 1_001 }), 402, 'wallet_empty');
    expect((await meter(bearer(poor.key), { max_cost_micros: 1_000, cost_micros: 1_000 })).status).toBe(200);
  });

  it('400 for a malformed X-Svc-Billable-Amount; a valid one is the billed amount', async () => {
    const response = await meter({ ...bearer(developer.key), 'X-Svc-Billable-Amount': '-5' });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({
      status: 400,
      code: 'invalid_request',
      param: 'X-Svc-Billable-Amount',
    });
    const biller = await createDeveloper(gateway.platform, { creditMicros: 1_000_000, scopes: ['admin'] });
    await meter({ ...bearer(biller.key), 'X-Svc-Billable-Amount': '9000' }, { cost_micros: 500 });
    const usage = await call(gateway.baseUrl, '/v1/margin', { headers: bearer(biller.key) });
    expect(usage.body.totals).toMatchObject({ requests: 1, cost_usd: 0.0005, billable_usd: 0.009, margin_usd: 0.0085 });
  });
});

describe('provisioned accounts', () => {
  it("bills a linked account's calls to its parent's wallet, and a standalone account's to its own", async () => {
    const parent = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const rsk = await createProvisioningKeyFor(gateway.platform, parent.accountId);
    const provision = (json: Record<string, unknown>) => call(gateway.baseUrl, '/v1/accounts', { method: 'POST', json, headers: bearer(rsk) });
    const linked = (await provision({ email: 'linked@example.test', username: 'linked_user', password: 'long password', funding: 'linked' })).body;
    const granted = (await provision({ email: 'granted@example.test', username: 'granted_user', password: 'long password', funding: 'grant', amount_usd: 0.1 })).body;

    expect((await meter(bearer(linked.api_key), { max_cost_micros: 3_000, cost_micros: 2_500 })).status).toBe(200);
    expect((await meter(bearer(granted.api_key), { max_cost_micros: 3_000, cost_micros: 1_000 })).status).toBe(200);

    const balances = await gateway.platform.db.query<{ account_id: string; balance_micros: string }>(
      'SELECT account_id, balance_micros FROM wallets WHERE account_id = ANY($1)',
      [[parent.accountId, granted.account.id]],
    );
    const balanceOf = (id: string) => Number(balances.rows.find((row) => row.account_id === id)!.balance_micros);
    expect(balanceOf(parent.accountId)).toBe(1_000_000 - 100_000 - 2_500); // the grant, then the linked call
    expect(balanceOf(granted.account.id)).toBe(100_000 - 1_000);
    const usage = await gateway.platform.db.query('SELECT developer_id, cost_micros FROM usage_records WHERE developer_id = $1', [linked.account.id]);
    expect(usage.rows).toEqual([{ developer_id: linked.account.id, cost_micros: '2500' }]);
    expect((await call(gateway.baseUrl, '/v1/balance', { headers: bearer(linked.api_key) })).body).toMatchObject({ billing: 'linked' });
  });
});

describe('customer attribution', () => {
  it('creates a customer on first use from Svc-Customer or body user, and bills its calls', async () => {
    const viaHeader = await meter({ ...bearer(developer.key), 'Svc-Customer': 'end-user-1' });
    expect(viaHeader.status).toBe(200);
    const viaBody = await meter(bearer(developer.key), { user: 'end-user-1' });
    expect(viaBody.body.customer_id).toBe(viaHeader.body.customer_id);
    expect((await customerOf('ext:end-user-1')).created_on_first_use).toBe(true);
    const usage = await call(gateway.baseUrl, '/v1/customers/ext:end-user-1/usage', { headers: bearer(developer.key) });
    expect(usage.body.totals.requests).toBe(2);
  });

  it('404 customer_not_found with Svc-Customer-Strict: true, or when lazy creation is off', async () => {
    expectError(await meter({ ...bearer(developer.key), 'Svc-Customer': 'stranger', 'Svc-Customer-Strict': 'true' }), 404, 'customer_not_found');
    const careful = await createDeveloper(gateway.platform);
    await gateway.platform.db.query('UPDATE accounts SET lazy_create_customers = false WHERE id = $1', [careful.accountId]);
    expectError(await meter({ ...bearer(careful.key), 'Svc-Customer': 'stranger' }), 404, 'customer_not_found');
  });

  it('402 customer_budget_exceeded once a customer has spent its monthly budget', async () => {
    const budgeted = await createCustomer({ external_id: 'budgeted', monthly_budget_usd: 0.002 });
    expect((await meter({ ...bearer(developer.key), 'Svc-Customer': budgeted.id }, { max_cost_micros: 1_000, cost_micros: 1_000 })).status).toBe(200);
    expect((await meter({ ...bearer(developer.key), 'Svc-Customer': budgeted.id }, { max_cost_micros: 1_000, cost_micros: 1_000 })).status).toBe(200);
    expectError(await meter({ ...bearer(developer.key), 'Svc-Customer': budgeted.id }, { max_cost_micros: 1, cost_micros: 1 }), 402, 'customer_budget_exceeded');
  });

  it("402 customer_wallet_empty when a prepaid customer's wallet cannot cover the call", async () => {
    const prepaid = await createCustomer({ external_id: 'prepaid' });
    await call(gateway.baseUrl, `/v1/customers/${prepaid.id}/wallet/topup`, { method: 'POST', json: { amount_usd: 0.001 }, headers: bearer(developer.key) });
    expect((await meter({ ...bearer(developer.key), 'Svc-Customer': prepaid.id }, { max_cost_micros: 1_000, cost_micros: 1_000 })).status).toBe(200);
    expectError(await meter({ ...bearer(developer.key), 'Svc-Customer': prepaid.id }, { max_cost_micros: 1_000 }), 402, 'customer_wallet_empty');
  });

  it('429 customer_rate_limit_exceeded when the tokens used fill the customer tpm', async () => {
    const thrifty = await createCustomer({ external_id: 'thrifty', tpm_limit: 100 });
    const headers = { ...bearer(developer.key), 'Svc-Customer': thrifty.id };
    expect((await meter(headers, { tokens_in: 40, tokens_out: 20 })).status).toBe(200);
    expect((await meter(headers, { tokens_in: 40, tokens_out: 20 })).status).toBe(200); // 60 < 100 when it started
    expectError(await meter(headers), 429, 'customer_rate_limit_exceeded');
  });
});

describe('limits on creation and ledger failures', () => {
  it('429 lazy_create_rate_exceeded once first uses create more customers than allowed per minute', async () => {
    const eager = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const limits = Number(gateway.config.LAZY_CREATE_PER_MINUTE);
    for (let i = 0; i < limits; i++) expect((await meter({ ...bearer(eager.key), 'Svc-Customer': `new-${i}` })).status).toBe(200);
    expectError(await meter({ ...bearer(eager.key), 'Svc-Customer': `new-${limits}` }), 429, 'lazy_create_rate_exceeded');
    expect((await meter({ ...bearer(eager.key), 'Svc-Customer': 'new-0' })).status).toBe(200);
  });

  it('500 wallet_error (type api_error) when the ledger cannot be written, and nothing is charged', async () => {
    const unlucky = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const client = await gateway.platform.db.connect();
    try {
      await client.query(`CREATE FUNCTION fail_ledger_http() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.account_id = '${unlucky.accountId}' THEN RAISE EXCEPTION 'ledger unavailable'; END IF; RETURN NEW; END $$`);
      await client.query('CREATE TRIGGER fail_ledger_http BEFORE INSERT ON wallet_ledger FOR EACH ROW EXECUTE FUNCTION fail_ledger_http()');
      const response = await meter(bearer(unlucky.key), { cost_micros: 700 });
      expect({ status: response.status, type: response.body.error.type, code: response.body.error.code }).toEqual({ status: 500, type: 'api_error', code: 'wallet_error' });
      expect(response.text).not.toContain('ledger unavailable');
    } finally {
      await client.query('DROP TRIGGER fail_ledger_http ON wallet_ledger; DROP FUNCTION fail_ledger_http()');
      client.release();
    }
    const { rows } = await gateway.platform.db.query('SELECT balance_micros::bigint AS balance FROM wallets WHERE account_id = $1', [unlucky.accountId]);
    expect(Number(rows[0].balance)).toBe(1_000_000);
  });
});

describe('customer rpm across two API instances', () => {
  it('lets exactly 60 of 1,000 concurrent requests through and records customer.rate_limit_exceeded once', async () => {
    const replica = await startSecondInstance(gateway, { routes: probe });
    try {
      const limited = await createCustomer({ external_id: 'limited', rpm_limit: 60 });
      const headers = { ...bearer(developer.key), 'Svc-Customer': limited.id };
      const responses = await Promise.all(Array.from({ length: 1000 }, (_, i) => meter(headers, { cost_micros: 1 }, i % 2 ? replica.baseUrl : gateway.baseUrl)));
      expect(responses.filter((response) => response.status === 200)).toHaveLength(60);
      const refused = responses.filter((response) => response.status !== 200);
      expect(refused).toHaveLength(940);
      for (const response of refused) expectError(response, 429, 'customer_rate_limit_exceeded');
      const { rows } = await gateway.platform.db.query(`SELECT data FROM outbox_events WHERE type = 'customer.rate_limit_exceeded' AND data->>'customer_id' = $1`, [limited.id]);
      expect(rows).toHaveLength(1);
      const usage = await call(gateway.baseUrl, '/v1/customers/ext:limited/usage', { headers: bearer(developer.key) });
      expect(usage.body.totals.requests).toBe(60);
    } finally {
      await replica.close();
    }
  }, 60_000);
});

describe('client tokens', () => {
  let customerId: string;
  const mint = async (json: Record<string, unknown>) =>
    (await call(gateway.baseUrl, `/v1/customers/${customerId}/client_tokens`, { method: 'POST', json, headers: bearer(developer.key) })).body;
  const client = (token: string, extra: Record<string, string> = {}) => ({ Authorization: `Client ${token}`, ...extra });

  beforeAll(async () => {
    customerId = (await createCustomer({ external_id: 'browser-user' })).id;
  });

  it("bills the token's pinned customer, whatever Svc-Customer says", async () => {
    const { token } = await mint({ scope: ['chat'] });
    const response = await meter(client(token, { 'Svc-Customer': 'someone-else' }), { user: 'ignored' });
    expect(response.status).toBe(200);
    expect(response.body.customer_id).toBe(customerId);
  });

  it('refuses tokens of an archived customer: minting is 404 customer_not_found, and live tokens stop working', async () => {
    const leaving = await createCustomer({ external_id: 'leaving' });
    const { token } = (await call(gateway.baseUrl, `/v1/customers/${leaving.id}/client_tokens`, { method: 'POST', json: {}, headers: bearer(developer.key) })).body;
    expect((await meter(client(token))).status).toBe(200);
    await call(gateway.baseUrl, `/v1/customers/${leaving.id}/archive`, { method: 'POST', json: {}, headers: bearer(developer.key) });
    expectError(await meter(client(token)), 404, 'customer_not_found');
    const mint = await call(gateway.baseUrl, `/v1/customers/${leaving.id}/client_tokens`, { method: 'POST', json: {}, headers: bearer(developer.key) });
    expectError(mint, 404, 'customer_not_found');
  });

  it('401 invalid_client_token for a token that is not one', async () => {
    expectError(await meter(client('not.a.jwt')), 401, 'invalid_client_token');
  });

  it('403 endpoint_not_allowed_for_client_token when the token lacks the route scope', async () => {
    const { token } = await mint({ scope: ['embeddings'] });
    expectError(await meter(client(token)), 403, 'endpoint_not_allowed_for_client_token');
  });

  it('403 origin_not_allowed outside the allowlist; 200 from a listed origin', async () => {
    const { token } = await mint({ origin_allowlist: ['https://app.example'] });
    expect((await meter(client(token, { Origin: 'https://app.example' }))).status).toBe(200);
    expectError(await meter(client(token, { Origin: 'https://evil.example' })), 403, 'origin_not_allowed');
    expectError(await meter(client(token)), 403, 'origin_not_allowed');
  });

  it('429 client_token_rate_limit_exceeded past the token rpm, a layer above the customer', async () => {
    const { token } = await mint({ rpm_limit: 2 });
    expect((await meter(client(token))).status).toBe(200);
    expect((await meter(client(token))).status).toBe(200);
    expectError(await meter(client(token)), 429, 'client_token_rate_limit_exceeded');
    // Another token of the same customer has its own counter.
    const { token: other } = await mint({ rpm_limit: 2 });
    expect((await meter(client(other))).status).toBe(200);
  });
});
