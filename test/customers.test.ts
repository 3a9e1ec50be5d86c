import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './support/expect-error.js';
import { attributeCustomer } from '../shared/customers/customers.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

let gateway: TestPlatform;
let developer: TestDeveloper;

beforeAll(async () => {
  gateway = await startTestPlatform({ LAZY_CREATE_PER_MINUTE: '3' });
  developer = await createDeveloper(gateway.platform, { scopes: ['api:read', 'api:write'] });
});
afterAll(() => gateway?.close());

const post = (path: string, json: unknown, key = developer.key) => call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(key) });
const patch = (path: string, json: unknown) => call(gateway.baseUrl, path, { method: 'PATCH', json, headers: bearer(developer.key) });
const get = (path: string, key = developer.key) => call(gateway.baseUrl, path, { headers: bearer(key) });


async function events(type: string): Promise<any[]> {
  const { rows } = await gateway.platform.db.query('SELECT data FROM outbox_events WHERE developer_id = $1 AND type = $2 ORDER BY created_at', [developer.accountId, type]);
  return rows.map((row) => row.data);
}

describe('create and retrieve', () => {
  it('creates a customer with every field, and records customer.created in the outbox', async () => {
    const created = await post('/v1/customers', {
      external_id: 'user-1',
      monthly_budget_usd: 12.5,
      rpm_limit: 30,
      tpm_limit: 10_000,
      default_billable_markup_pct: 20,
      lazy_create_customers: false,
      metadata: { plan: 'pro' },
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      object: 'customer',
      external_id: 'user-1',
      monthly_budget_usd: 12.5,
      rpm_limit: 30,
      tpm_limit: 10_000,
      default_billable_markup_pct: 20,
      default_billable_amount_usd: null,
      lazy_create_customers: false,
      metadata: { plan: 'pro' },
      status: 'active',
    });
    expect(created.body.id).toMatch(/^cus_[0-9A-Za-z]{24}$/);
    const [event] = await events('customer.created');
    expect(event.customer.id).toBe(created.body.id);

    expect((await get(`/v1/customers/${created.body.id}`)).body.id).toBe(created.body.id);
    expect((await get('/v1/customers/ext:user-1')).body.id).toBe(created.body.id);
  });

  it('creates a customer with no fields at all', async () => {
    const created = await post('/v1/customers', {});
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ external_id: null, monthly_budget_usd: null, rpm_limit: null, metadata: {} });
  });

  it('409 external_id_taken for a second customer with the same external_id', async () => {
    await post('/v1/customers', { external_id: 'dup' });
    expectError(await post('/v1/customers', { external_id: 'dup' }), 409, 'external_id_taken', { param: 'external_id' });
  });

  it.each([
    [{ rpm_limit: 0 }, 'invalid_rpm_limit', 'rpm_limit'],
    [{ rpm_limit: 1.5 }, 'invalid_rpm_limit', 'rpm_limit'],
    [{ rpm_limit: '10' }, 'invalid_rpm_limit', 'rpm_limit'],
    [{ tpm_limit: -1 }, 'invalid_tpm_limit', 'tpm_limit'],
    [{ monthly_budget_usd: -0.01 }, 'invalid_monthly_budget_usd', 'monthly_budget_usd'],
    [{ monthly_budget_usd: 'ten' }, 'invalid_monthly_budget_usd', 'monthly_budget_usd'],
    [{ default_billable_markup_pct: -5 }, 'invalid_default_billable_markup_pct', 'default_billable_markup_pct'],
    [{ default_billable_amount_usd: 'x' }, 'invalid_default_billable_amount_usd', 'default_billable_amount_usd'],
    [{ lazy_create_customers: 'yes' }, 'invalid_lazy_create_customers', 'lazy_create_customers'],
    [{ metadata: 'plan=pro' }, 'invalid_metadata', 'metadata'],
    [{ metadata: [1] }, 'invalid_metadata', 'metadata'],
    [{ metadata: { ['k'.repeat(65)]: 'v' } }, 'invalid_metadata', 'metadata'],
    [{ metadata: { k: 'v'.repeat(513) } }, 'invalid_metadata', 'metadata'],
    [{ metadata: { k: 1 } }, 'invalid_metadata', 'metadata'],
    [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata_too_many_keys', 'metadata'],
    [{ metadata: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v'.repeat(300)])) }, 'metadata_too_large', 'metadata'],
    [{ external_id: '' }, 'invalid_external_id', 'external_id'],
    [{ nickname: 'x' }, 'invalid_request', 'nickname'],
  ])('400 for %j', async (body, code, param) => {
    expectError(await post('/v1/customers', body), 400, code, { param: param });
  });

  it('400 billable_defaults_mutex when both billable defaults are set', async () => {
    expectError(await post('/v1/customers', { default_billable_markup_pct: 10, default_billable_amount_usd: 0.01 }), 400, 'billable_defaults_mutex', { param: undefined });
  });

  it('404 for unknown ids, bare names, and another developer’s customer', async () => {
    const other = await createDeveloper(gateway.platform, { scopes: ['api:read', 'api:write'] });
    const theirs = await post('/v1/customers', { external_id: 'theirs' }, other.key);
    for (const id of [theirs.body.id, 'ext:theirs', 'cus_doesnotexist', 'user-1']) expectError(await get(`/v1/customers/${id}`), 404, 'not_found', { param: undefined });
  });

  it('403 insufficient_scope: writes need api:write, reads api:read', async () => {
    const reader = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    expectError(await post('/v1/customers', {}, reader.key), 403, 'insufficient_scope', { param: undefined });
    const writer = await createDeveloper(gateway.platform, { scopes: ['api:write'] });
    expectError(await get('/v1/customers', writer.key), 403, 'insufficient_scope', { param: undefined });
  });
});

describe('patch and archive', () => {
  let id: string;
  beforeAll(async () => {
    id = (await post('/v1/customers', { external_id: 'patchable', default_billable_amount_usd: 0.5 })).body.id;
  });

  it('400 empty_patch for a patch with no updatable field', async () => {
    expectError(await patch(`/v1/customers/${id}`, {}), 400, 'empty_patch', { param: undefined });
  });

  it('updates the named fields only, by cus_ id or ext: reference', async () => {
    const patched = await patch('/v1/customers/ext:patchable', { rpm_limit: 5, metadata: { tier: 'gold' } });
    expect(patched.body).toMatchObject({ id, rpm_limit: 5, metadata: { tier: 'gold' }, default_billable_amount_usd: 0.5 });
  });

  it('400 billable_defaults_mutex when a patch would leave both defaults set, and allows swapping them', async () => {
    expectError(await patch(`/v1/customers/${id}`, { default_billable_markup_pct: 10 }), 400, 'billable_defaults_mutex', { param: undefined });
    const swapped = await patch(`/v1/customers/${id}`, { default_billable_markup_pct: 10, default_billable_amount_usd: null });
    expect(swapped.body).toMatchObject({ default_billable_markup_pct: 10, default_billable_amount_usd: null });
  });

  it('409 external_id_taken when renaming onto a taken external_id', async () => {
    await post('/v1/customers', { external_id: 'taken' });
    expectError(await patch(`/v1/customers/${id}`, { external_id: 'taken' }), 409, 'external_id_taken', { param: 'external_id' });
  });

  it('archives once, records customer.archived, and lists by status', async () => {
    const archived = await post(`/v1/customers/${id}/archive`, {});
    expect(archived.body).toMatchObject({ id, status: 'archived' });
    expect(archived.body.archived_at).not.toBeNull();
    await post(`/v1/customers/${id}/archive`, {});
    expect((await events('customer.archived')).map((event) => event.customer.id)).toEqual([id]);
    const listed = await get('/v1/customers?status=archived');
    expect(listed.body.data.map((customer: { id: string }) => customer.id)).toEqual([id]);
    expectError(await get('/v1/customers?status=gone'), 400, 'invalid_request', { param: 'status' });
  });
});

describe('list', () => {
  it('pages with limit and after in the cursor envelope, clamping limit', async () => {
    const lister = await createDeveloper(gateway.platform, { scopes: ['api:read', 'api:write'] });
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await post('/v1/customers', { external_id: `l${i}` }, lister.key)).body.id);
    const seen = [];
    let after = '';
    for (;;) {
      const page = await get(`/v1/customers?limit=2${after ? `&after=${after}` : ''}`, lister.key);
      seen.push(...page.body.data.map((customer: { id: string }) => customer.id));
      if (!page.body.has_more) break;
      after = page.body.next_cursor;
    }
    expect(seen).toEqual(ids);
    expect((await get('/v1/customers?limit=500', lister.key)).body.data).toHaveLength(5);
    expect((await get('/v1/customers?limit=-3', lister.key)).body.data).toHaveLength(1);
    // A limit sent twice is not one number: the default applies, as to any limit that is not one.
    expect((await get('/v1/customers?limit=1&limit=2', lister.key)).body.data).toHaveLength(5);
    expect((await get('/v1/customers', lister.key)).body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
  });
});

describe('attribution and lazy creation', () => {
  const attribute = (developerId: string, reference: string, strict = false) =>
    attributeCustomer(gateway.platform.db, gateway.platform.limiter, developerId, { reference, strict }, gateway.config.LAZY_CREATE_PER_MINUTE);

  it('creates an unknown external id on first use, once, even when raced', async () => {
    const lazy = await createDeveloper(gateway.platform);
    const results = await Promise.all(Array.from({ length: 5 }, () => attribute(lazy.accountId, 'first-use')));
    expect(new Set(results.map((customer) => customer.id)).size).toBe(1);
    expect(results[0]).toMatchObject({ external_id: 'first-use', created_on_first_use: true });
    const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM outbox_events WHERE developer_id = $1 AND type = 'customer.created'`, [lazy.accountId]);
    expect(rows[0].n).toBe(1);
  });

  it('404 customer_not_found in strict mode, for unknown cus_ ids, and when the developer turned lazy creation off', async () => {
    const strict = await createDeveloper(gateway.platform);
    await expect(attribute(strict.accountId, 'nobody', true)).rejects.toMatchObject({ status: 404, code: 'customer_not_found' });
    await expect(attribute(strict.accountId, 'cus_unknown')).rejects.toMatchObject({ code: 'customer_not_found' });
    await gateway.platform.db.query('UPDATE accounts SET lazy_create_customers = false WHERE id = $1', [strict.accountId]);
    await expect(attribute(strict.accountId, 'nobody')).rejects.toMatchObject({ code: 'customer_not_found' });
  });

  it('429 lazy_create_rate_exceeded past the per-minute creations, while known customers still resolve', async () => {
    const busy = await createDeveloper(gateway.platform);
    for (let i = 0; i < 3; i++) await attribute(busy.accountId, `burst-${i}`);
    await expect(attribute(busy.accountId, 'burst-3')).rejects.toMatchObject({ status: 429, code: 'lazy_create_rate_exceeded', retryAfterSeconds: expect.any(Number) });
    expect((await attribute(busy.accountId, 'burst-0')).external_id).toBe('burst-0');
  });
});
