import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredProbeRoutes } from '../bench/support/metered-probe.js';
import { createApiKey, revokeApiKey } from '../shared/accounts/accounts.js';
import { bearer, call, createDeveloper, startSecondInstance, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Metered calls keep verified keys and customers in each API process (CredentialCache). These
 * tests change what a warm cache holds, through the same domain functions and routes a developer
 * uses, and check that the very next metered call on any replica sees the change, and that the
 * refused call left no reservation behind.
 */
let gateway: TestPlatform;
let replica: { baseUrl: string; close(): Promise<void> };
let developer: TestDeveloper;
const probe = (platform: Parameters<typeof meteredProbeRoutes>[0]) => [meteredProbeRoutes(platform)];

beforeAll(async () => {
  gateway = await startTestPlatform({ CREDENTIAL_CACHE_SECONDS: '3600' }, { routes: probe });
  replica = await startSecondInstance(gateway, { routes: probe });
  developer = await createDeveloper(gateway.platform, { creditMicros: 10_000_000 });
});
afterAll(async () => {
  await replica?.close();
  await gateway?.close();
});

const meter = (key: string, headers: Record<string, string> = {}, json: Record<string, unknown> = {}, baseUrl = gateway.baseUrl) =>
  call(baseUrl, '/v1/_probe/metered', { method: 'POST', json, headers: { ...bearer(key), ...headers } });
const errorOf = (response: { status: number; body: any }) => ({ status: response.status, code: response.body?.error?.code });

async function openHolds(developerId: string): Promise<number> {
  const { rows } = await gateway.platform.db.query<{ n: string }>("SELECT count(*) AS n FROM billing_holds WHERE developer_id = $1 AND status = 'held'", [developerId]);
  return Number(rows[0]!.n);
}

async function newKey(accountId: string) {
  return createApiKey(gateway.platform.db, accountId, { name: 'cached', scopes: ['api:chat', 'admin'] });
}

describe('a key revoked while cached', () => {
  it('is refused with 401 invalid_token on the next metered call, on this replica and another', async () => {
    const { key, plaintext } = await newKey(developer.accountId);
    // Warm both replicas' caches.
    expect((await meter(plaintext)).status).toBe(200);
    expect((await meter(plaintext, {}, {}, replica.baseUrl)).status).toBe(200);

    await revokeApiKey(gateway.platform.db, developer.accountId, key.id);

    expect(errorOf(await meter(plaintext))).toEqual({ status: 401, code: 'invalid_token' });
    expect(errorOf(await meter(plaintext, {}, {}, replica.baseUrl))).toEqual({ status: 401, code: 'invalid_token' });
    expect(await openHolds(developer.accountId)).toBe(0);
  });

  it('leaves the developer’s other cached keys working once they are verified again', async () => {
    const doomed = await newKey(developer.accountId);
    const kept = await newKey(developer.accountId);
    expect((await meter(kept.plaintext)).status).toBe(200);
    await revokeApiKey(gateway.platform.db, developer.accountId, doomed.key.id);
    const after = await meter(kept.plaintext, {}, { cost_micros: 700 });
    expect(after.status).toBe(200);
    expect(after.headers.get('x-svc-wallet-deducted')).toBe('0.0007');
  });
});

describe('an account closed while its key is cached', () => {
  it('is refused with 401 invalid_token', async () => {
    const owner = await createDeveloper(gateway.platform, { creditMicros: 1_000_000, scopes: ['api:chat'] });
    expect((await meter(owner.key)).status).toBe(200);
    await gateway.platform.db.query("UPDATE accounts SET status = 'closed', closed_at = now() WHERE id = $1", [owner.accountId]);
    expect(errorOf(await meter(owner.key, {}, {}, replica.baseUrl))).toEqual({ status: 401, code: 'invalid_token' });
    expect(errorOf(await meter(owner.key))).toEqual({ status: 401, code: 'invalid_token' });
  });
});

describe('a customer changed while cached', () => {
  const patchCustomer = (id: string, json: Record<string, unknown>) => call(gateway.baseUrl, `/v1/customers/${id}`, { method: 'PATCH', json, headers: bearer(developer.key) });

  it('archived: the next call attributed to it is 404 customer_not_found, with nothing reserved', async () => {
    const customer = (await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json: { external_id: 'cached-archive' }, headers: bearer(developer.key) })).body;
    expect((await meter(developer.key, { 'Svc-Customer': customer.id })).status).toBe(200);
    expect((await meter(developer.key, { 'Svc-Customer': customer.id }, {}, replica.baseUrl)).status).toBe(200);
    const archived = await call(gateway.baseUrl, `/v1/customers/${customer.id}/archive`, { method: 'POST', json: {}, headers: bearer(developer.key) });
    expect(archived.status).toBe(200);

    expect(errorOf(await meter(developer.key, { 'Svc-Customer': customer.id }, {}, replica.baseUrl))).toEqual({ status: 404, code: 'customer_not_found' });
    expect(errorOf(await meter(developer.key, { 'Svc-Customer': 'cached-archive' }))).toEqual({ status: 404, code: 'customer_not_found' });
    expect(await openHolds(developer.accountId)).toBe(0);
  });

  it('given a lower monthly budget: the next call is held to it at once', async () => {
    const customer = (await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json: { external_id: 'cached-budget', monthly_budget_usd: 10 }, headers: bearer(developer.key) })).body;
    expect((await meter(developer.key, { 'Svc-Customer': customer.id }, { max_cost_micros: 5_000, cost_micros: 5_000 }, replica.baseUrl)).status).toBe(200);
    expect((await patchCustomer(customer.id, { monthly_budget_usd: 0.006 })).status).toBe(200);

    expect(errorOf(await meter(developer.key, { 'Svc-Customer': customer.id }, { max_cost_micros: 5_000 }, replica.baseUrl))).toEqual({
      status: 402,
      code: 'customer_budget_exceeded',
    });
    expect((await meter(developer.key, { 'Svc-Customer': customer.id }, { max_cost_micros: 1_000, cost_micros: 1_000 }, replica.baseUrl)).status).toBe(200);
  });

  it('given a billable markup: the next call bills with the new default', async () => {
    const customer = (await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json: { external_id: 'cached-markup' }, headers: bearer(developer.key) })).body;
    expect((await meter(developer.key, { 'Svc-Customer': customer.id }, { cost_micros: 1_000 })).status).toBe(200);
    expect((await patchCustomer(customer.id, { default_billable_markup_pct: 50 })).status).toBe(200);
    expect((await meter(developer.key, { 'Svc-Customer': customer.id }, { cost_micros: 1_000 })).status).toBe(200);

    const { rows } = await gateway.platform.db.query<{ billable_micros: string }>(
      'SELECT billable_micros FROM usage_records WHERE customer_id = $1 ORDER BY created_at',
      [customer.id],
    );
    expect(rows.map((row) => Number(row.billable_micros))).toEqual([1_000, 1_500]);
  });
});
