import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredProbeRoutes } from '../bench/support/metered-probe.js';
import { listApiKeys, revokeApiKey } from '../shared/accounts/accounts.js';
import { QuotaGrants } from '../shared/billing/grants.js';
import type { Db } from '../shared/db/pool.js';
import { bearer, call, createDeveloper, startSecondInstance, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Quota grants (shared/billing/grants.ts): a busy payer's calls reserved and settled in the API
 * process's memory against one hold, and charged to PostgreSQL in bulk. Real requests through two
 * API instances; every figure checked in PostgreSQL.
 */
let gateway: TestPlatform;
const probe = (platform: Parameters<typeof meteredProbeRoutes>[0]) => [meteredProbeRoutes(platform)];
const unlimited = { EDGE_RPM_LIMIT: '1000000', DEVELOPER_RPM_LIMIT: '1000000', DEVELOPER_TPM_LIMIT: '1000000000' };

beforeAll(async () => {
  // Five calls a second of one payer open a grant, so a test needs no real load to reach one.
  gateway = await startTestPlatform({ ...unlimited, DATABASE_POOL_MAX: '20', METERING_GRANT_MIN_RATE: '5' }, { routes: probe });
});
afterAll(() => gateway?.close());

const meter = (key: string, json: Record<string, unknown>, baseUrl = gateway.baseUrl, headers: Record<string, string> = {}) =>
  call(baseUrl, '/v1/_probe/metered', { method: 'POST', json, headers: { ...bearer(key), ...headers } });

/** Runs `count` calls, `concurrency` at a time; returns their responses. */
async function burst(count: number, concurrency: number, one: (i: number) => ReturnType<typeof meter>) {
  const responses: Awaited<ReturnType<typeof meter>>[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) responses.push(await one(next++));
    }),
  );
  return responses;
}

async function books(accountId: string) {
  await gateway.platform.grants.flush();
  const { rows } = await gateway.platform.db.query<{ balance: string; reserved: string; ledger: string; usage: string; granted: string; usage_cost: string; broken_chain: string }>(
    `SELECT w.balance_micros::text AS balance, w.reserved_micros::text AS reserved,
            (SELECT sum(amount_micros) FROM wallet_ledger WHERE account_id = $1)::text AS ledger,
            (SELECT count(*) FROM usage_records WHERE developer_id = $1)::text AS usage,
            (SELECT count(*) FROM usage_records WHERE developer_id = $1 AND idempotency_key LIKE 'grant:%')::text AS granted,
            (SELECT COALESCE(sum(cost_micros), 0) FROM usage_records WHERE developer_id = $1)::text AS usage_cost,
            -- Every ledger row's balance_after follows from the one before it.
            (SELECT count(*) FROM (SELECT balance_after_micros - amount_micros AS before, lag(balance_after_micros) OVER (ORDER BY id) AS previous
                                     FROM wallet_ledger WHERE account_id = $1) chain WHERE previous IS NOT NULL AND before <> previous)::text AS broken_chain
       FROM wallets w WHERE w.account_id = $1`,
    [accountId],
  );
  return Object.fromEntries(Object.entries(rows[0]!).map(([name, value]) => [name, Number(value)]));
}

describe('a busy payer', () => {
  it('is metered against a grant: every call charged once, with its own usage record and ledger row', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 100_000_000 });
    const responses = await burst(400, 8, () => meter(developer.key, { max_cost_micros: 2_000, cost_micros: 1_250 }));
    expect(responses.map((response) => response.status)).toEqual(Array(400).fill(200));
    expect(responses.every((response) => response.headers.get('x-svc-wallet-deducted') === '0.00125')).toBe(true);

    const after = await books(developer.accountId);
    expect(after.granted).toBeGreaterThan(0);
    expect(after).toMatchObject({ balance: 100_000_000 - 400 * 1_250, usage: 400, usage_cost: 400 * 1_250, ledger: 100_000_000 - 400 * 1_250, broken_chain: 0 });
  });

  it('reports a balance in each call that counts down by its charges', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 50_000_000 });
    await burst(60, 4, () => meter(developer.key, { max_cost_micros: 1_000, cost_micros: 1_000 }));
    expect(gateway.platform.grants.servingFor(developer.accountId)).toBeGreaterThan(0);
    // The count-down starts from the balance PostgreSQL last reported, at a grant's opening or
    // charge, which misses the burst's calls reserved call by call and settled after it; the next
    // charge reports the balance after all of them (README, quota grants). A flush charges only
    // calls settled on a grant, and on a busy machine the burst's last calls may have gone call
    // by call (a grant being renewed), leaving nothing to charge. So calls are made, and flushed,
    // until one is charged under a grant: from that charge on, the count-down is exact.
    const chargedUnderGrants = async () => (await books(developer.accountId)).granted;
    const chargedBefore = await chargedUnderGrants();
    let calls = 60;
    do {
      await meter(developer.key, { max_cost_micros: 1_000, cost_micros: 1_000 });
      calls += 1;
    } while ((await chargedUnderGrants()) === chargedBefore && calls < 80);
    expect(await chargedUnderGrants()).toBeGreaterThan(chargedBefore!);
    const balances: number[] = [];
    for (let i = 0; i < 5; i++) balances.push(Number((await meter(developer.key, { max_cost_micros: 1_000, cost_micros: 1_000 })).headers.get('x-svc-wallet-balance')));
    // One process, one payer: each call's balance is the one before it less 0.001.
    expect(balances.slice(1).map((balance, i) => Math.round((balances[i]! - balance) * 1e6))).toEqual([1_000, 1_000, 1_000, 1_000]);
    expect(balances[4]).toBe((50_000_000 - (calls + 5) * 1_000) / 1e6);
  });

  it('never overdraws its wallet, across two instances holding grants, and is refused with wallet_empty when it runs out', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const second = await startSecondInstance(gateway, { routes: probe });
    try {
      const responses = await burst(1_500, 24, (i) => meter(developer.key, { max_cost_micros: 1_000, cost_micros: 1_000 }, i % 2 ? second.baseUrl : gateway.baseUrl));
      const passed = responses.filter((response) => response.status === 200).length;
      const refused = responses.filter((response) => response.status !== 200);
      expect(refused.map((response) => `${response.status} ${response.body.error?.code}`)).toEqual(Array(refused.length).fill('402 wallet_empty'));
      await second.close();
      const after = await books(developer.accountId);
      expect(after.granted).toBeGreaterThan(0);
      expect(after.balance).toBeGreaterThanOrEqual(0);
      expect(after).toMatchObject({ balance: 1_000_000 - passed * 1_000, usage: passed, ledger: 1_000_000 - passed * 1_000, broken_chain: 0 });
      // Grants never take the last of a wallet: the end of the money is reserved call by call.
      expect(passed).toBeGreaterThan(900);
    } finally {
      await second.close();
    }
  });

  it('leaves nothing reserved once its API process closes: settled calls charged, the rest of each grant released', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 20_000_000 });
    const second = await startSecondInstance(gateway, { routes: probe });
    const responses = await burst(120, 6, () => meter(developer.key, { max_cost_micros: 5_000, cost_micros: 700 }, second.baseUrl));
    expect(responses.every((response) => response.status === 200)).toBe(true);
    await second.close();
    const after = await books(developer.accountId);
    expect(after.granted).toBeGreaterThan(0);
    expect(after).toMatchObject({ reserved: 0, balance: 20_000_000 - 120 * 700, usage: 120 });
    const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS open FROM billing_holds WHERE developer_id = $1 AND status = 'held'`, [developer.accountId]);
    expect(rows[0].open).toBe(0);
  });

  it('stops using its grant when its key is revoked: the next request is refused', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 50_000_000 });
    await burst(60, 4, () => meter(developer.key, { max_cost_micros: 1_000, cost_micros: 100 }));
    expect(gateway.platform.grants.servingFor(developer.accountId)).toBeGreaterThan(0);

    // Nothing left to charge: each charge checks the generation too, and this test is about the announcement.
    await gateway.platform.grants.flush();
    const [key] = await listApiKeys(gateway.platform.db, developer.accountId);
    await revokeApiKey(gateway.platform.db, developer.accountId, key!.id);
    // The announcement of the commit reaches this process's listener on its own connection.
    await expect.poll(() => gateway.platform.grants.servingFor(developer.accountId)).toBe(0);
    const refused = await meter(developer.key, { max_cost_micros: 1_000, cost_micros: 100 });
    expect({ status: refused.status, code: refused.body.error.code }).toEqual({ status: 401, code: 'invalid_token' });
  });

  it('stops using its grant when its account closes, a change whose generation bump a BEFORE trigger makes', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 50_000_000 });
    await burst(60, 4, () => meter(developer.key, { max_cost_micros: 1_000, cost_micros: 100 }));
    expect(gateway.platform.grants.servingFor(developer.accountId)).toBeGreaterThan(0);

    await gateway.platform.grants.flush();
    await gateway.platform.db.query(`UPDATE accounts SET status = 'closed', closed_at = now() WHERE id = $1`, [developer.accountId]);
    await expect.poll(() => gateway.platform.grants.servingFor(developer.accountId)).toBe(0);
    const refused = await meter(developer.key, { max_cost_micros: 1_000, cost_micros: 100 });
    expect(refused.status).toBe(401);
  });

  it('reserves call by call for a customer with a monthly budget, so the budget refuses exactly', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 50_000_000 });
    const customer = (await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json: { external_id: 'budgeted', monthly_budget_usd: 0.05 }, headers: bearer(developer.key) })).body;
    const responses = await burst(80, 4, () => meter(developer.key, { max_cost_micros: 1_000, cost_micros: 1_000 }, gateway.baseUrl, { 'Svc-Customer': customer.id }));
    expect(responses.filter((response) => response.status === 200)).toHaveLength(50);
    expect(new Set(responses.filter((response) => response.status !== 200).map((response) => response.body.error.code))).toEqual(new Set(['customer_budget_exceeded']));
    expect((await books(developer.accountId)).granted).toBe(0);
  });
});

describe('a payer near the end of its money', () => {
  it('gets no grant: its calls reserve in PostgreSQL one by one', async () => {
    const developer: TestDeveloper = await createDeveloper(gateway.platform, { creditMicros: 100_000 });
    const responses = await burst(150, 4, () => meter(developer.key, { max_cost_micros: 1_000, cost_micros: 1_000 }));
    expect(responses.filter((response) => response.status === 200)).toHaveLength(100);
    expect(await books(developer.accountId)).toMatchObject({ balance: 0, granted: 0, usage: 100 });
  });
});

/**
 * A QuotaGrants of its own over `db`, with a developer to pay and a grant of it open: `hold` is a
 * call reserved on that grant, still running. Its own instance, so a test can close it.
 */
async function grantHeldFor(db: Db) {
  const developer = await createDeveloper(gateway.platform, { creditMicros: 10_000_000 });
  const grants = new QuotaGrants(db, gateway.platform.config, gateway.platform.logger);
  grants.start();
  const { rows } = await gateway.platform.db.query<{ generation: string }>(`SELECT auth_generation::text AS generation FROM accounts WHERE id = $1`, [developer.accountId]);
  const payer = { developerId: developer.accountId, payerAccountId: developer.accountId, customer: null };
  const generation = Number(rows[0]!.generation);
  // Demand opens a grant once the instance listens for auth changes.
  let hold: ReturnType<QuotaGrants['take']>;
  await expect.poll(() => (hold = grants.take(payer, generation, 1_000)) !== undefined, { timeout: 10_000 }).toBe(true);
  return { developer, grants, payer, generation, hold: hold! };
}

const settlement = (costMicros: number) => ({ costMicros, billableMicros: costMicros, model: 'svc:probe/none', tokensIn: 1, tokensOut: 1 });

describe('a grant retired while one of its charges is on its way', () => {
  it('waits for that charge before giving back the rest: every settled call charged once, nothing left reserved', async () => {
    // The same PostgreSQL, with each bulk charge held back on its way, so the grant retires while one is.
    const slowCharges = new Proxy(gateway.platform.db, {
      get(target, name) {
        if (name !== 'query') return Reflect.get(target, name);
        return async (query: { name?: string }, ...rest: unknown[]) => {
          if (query?.name === 'billing-grant-charge') await new Promise((resolve) => setTimeout(resolve, 300));
          return (target.query as (...args: unknown[]) => unknown)(query, ...rest);
        };
      },
    }) as Db;
    const { developer, grants, payer, generation, hold } = await grantHeldFor(slowCharges);
    try {
      grants.settle(hold, settlement(700));
      for (let i = 0; i < 9; i++) grants.settle(grants.take(payer, generation, 1_000)!, settlement(700));
      const order: string[] = [];
      const charging = grants.flush().then(() => order.push('charged'));
      await grants.close().then(() => order.push('closed'));
      await charging;
      expect(order).toEqual(['charged', 'closed']);
    } finally {
      await grants.close();
    }
    expect(await books(developer.accountId)).toMatchObject({ reserved: 0, usage: 10, balance: 10_000_000 - 10 * 700, ledger: 10_000_000 - 10 * 700 });
  });
});

describe('a grant with a call still running when its process closes', () => {
  it('waits for the call to settle, charges it and releases the rest before the pool closes', async () => {
    const { developer, grants, hold } = await grantHeldFor(gateway.platform.db);
    try {
      const order: string[] = [];
      const closing = grants.close().then(() => order.push('closed'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      grants.settle(hold, settlement(400));
      order.push('settled');
      await closing;
      expect(order).toEqual(['settled', 'closed']);
    } finally {
      await grants.close();
    }
    expect(await books(developer.accountId)).toMatchObject({ reserved: 0, usage: 1, balance: 10_000_000 - 400 });
  });
});
