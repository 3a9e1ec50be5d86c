import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer } from '../shared/customers/customers.js';
import { topUpCustomerWallet } from '../shared/billing/customer-wallets.js';
import { authorize, billableAmount, release, settle, type Hold } from '../shared/billing/meter.js';
import { authorizeGroup, finishGroup, meteringGroupStats, type AuthorizeCall, type FinishCall } from '../shared/billing/repository.js';
import { newId } from '../shared/ids.js';
import { ServiceError } from '../shared/errors.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

let gateway: TestPlatform;
beforeAll(async () => {
  gateway = await startTestPlatform({ DATABASE_POOL_MAX: '20', WALLET_ADJUST_CAP_USD: '100', WALLET_LOW_THRESHOLD_USD: '1' });
});
afterAll(() => gateway?.close());

const db = () => gateway.platform.db;
const COST = 10_000; // one call: one cent

async function walletState(accountId: string) {
  const { rows } = await db().query(
    `SELECT w.balance_micros::bigint AS balance, w.reserved_micros::bigint AS reserved,
            (SELECT COALESCE(sum(amount_micros), 0) FROM wallet_ledger l WHERE l.account_id = w.account_id)::bigint AS ledger_sum,
            (SELECT min(balance_after_micros) FROM wallet_ledger l WHERE l.account_id = w.account_id)::bigint AS lowest
     FROM wallets w WHERE account_id = $1`,
    [accountId],
  );
  return { balance: Number(rows[0].balance), reserved: Number(rows[0].reserved), ledgerSum: Number(rows[0].ledger_sum), lowest: Number(rows[0].lowest) };
}

/** One metered call: reserve `max`, then settle `cost`; the refusal's code if it was refused. */
async function meteredCall(developer: Pick<TestDeveloper, 'accountId'>, customer: Awaited<ReturnType<typeof createCustomer>> | null, max: number, cost: number): Promise<string> {
  try {
    const hold = await authorize(db(), { developerId: developer.accountId, customer, maxCostMicros: max });
    await settle(db(), gateway.config, hold, { costMicros: cost, billableMicros: billableAmount(cost, customer), model: 'svc:test/model', tokensIn: 10, tokensOut: 5 });
    return 'ok';
  } catch (error) {
    if (error instanceof ServiceError) return error.code;
    throw error;
  }
}

/** A reservation of COST for a group statement, paid by the customer's wallet (when it has one) or the developer's. */
function groupReservation(developerId: string, customer: { id: string } | null, budgetMicros: number | null = null): AuthorizeCall {
  return { commit: 'fast', generation: null, developerId, payerAccountId: developerId, customerId: customer?.id ?? null, budgetMicros, amountMicros: COST, requestId: null, ttlSeconds: 600, eventId: newId('evt_') };
}

/** A settlement of COST for a group statement. */
function groupSettlement(developerId: string, holdId: string, changes: Partial<FinishCall> = {}): FinishCall {
  return {
    commit: 'fast', holdId, developerId, events: [], settle: true, costMicros: COST, billableMicros: COST, model: 'svc:m/a', tokensIn: 1, tokensOut: 1,
    requestId: null, idempotencyKey: null, lowThresholdMicros: 0, lowEventId: newId('evt_'), emptyEventId: newId('evt_'), ...changes,
  };
}

describe('authorize and settle under heavy concurrency', () => {
  it('500 parallel calls against a wallet that pays for 100: exactly 100 pass, never below zero, ledger sums to the balance', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 100 * COST });
    const outcomes = await Promise.all(Array.from({ length: 500 }, () => meteredCall(developer, null, COST, COST)));
    expect(outcomes.filter((outcome) => outcome === 'ok')).toHaveLength(100);
    expect(outcomes.filter((outcome) => outcome === 'wallet_empty')).toHaveLength(400);
    const state = await walletState(developer.accountId);
    expect(state).toEqual({ balance: 0, reserved: 0, ledgerSum: 0 + state.balance, lowest: 0 });
    expect(state.ledgerSum).toBe(state.balance);
    const { rows } = await db().query('SELECT count(*)::int AS n, sum(cost_micros)::bigint AS cost FROM usage_records WHERE developer_id = $1', [developer.accountId]);
    expect(rows[0]).toEqual({ n: 100, cost: String(100 * COST) });
  });

  it('500 parallel calls against a monthly budget of 100 calls: the budget is never overshot', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000 * COST });
    const customer = await createCustomer(db(), developer.accountId, { monthly_budget_usd: (100 * COST) / 1e6 });
    // Each call reserves twice what it ends up costing, so reservations, not spend, decide at first.
    const outcomes = await Promise.all(Array.from({ length: 500 }, () => meteredCall(developer, customer, 2 * COST, COST)));
    const passed = outcomes.filter((outcome) => outcome === 'ok').length;
    expect(passed).toBeGreaterThanOrEqual(50);
    expect(passed).toBeLessThanOrEqual(100);
    expect(outcomes.filter((outcome) => outcome !== 'ok').every((outcome) => outcome === 'customer_budget_exceeded')).toBe(true);
    const { rows } = await db().query('SELECT spent_micros::bigint AS spent, reserved_micros::bigint AS reserved FROM customer_budget_months WHERE customer_id = $1', [customer.id]);
    expect(Number(rows[0].spent)).toBe(passed * COST);
    expect(Number(rows[0].spent)).toBeLessThanOrEqual(100 * COST);
    expect(Number(rows[0].reserved)).toBe(0);
    const state = await walletState(developer.accountId);
    expect(state.balance).toBe(1_000 * COST - passed * COST);
    expect(state.ledgerSum).toBe(state.balance);
  });
});

describe('group commit of the metering statements', () => {
  it('under load, calls share statements, and none is refused', async () => {
    const before = meteringGroupStats(db())!;
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000 * COST });
    const outcomes = await Promise.all(Array.from({ length: 300 }, () => meteredCall(developer, null, COST, COST)));
    expect(outcomes.every((outcome) => outcome === 'ok')).toBe(true);
    const after = meteringGroupStats(db())!;
    for (const kind of ['authorize', 'finish'] as const) {
      const statements = after[kind].statements - before[kind].statements;
      expect(after[kind].groupedCalls - before[kind].groupedCalls).toBeGreaterThan(0);
      expect(statements).toBeLessThan(300);
      expect(after[kind].refusedGroups).toBe(before[kind].refusedGroups);
    }
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 700 * COST, reserved: 0, ledgerSum: 700 * COST });
  });

  it('a call PostgreSQL refuses fails alone: the others of its group go through', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000 * COST });
    // The first few calls go alone; the rest wait together, the broken one (not a uuid) among them.
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, (_, i) => meteredCall(i === 20 ? { ...developer, accountId: 'not-a-uuid' } : developer, null, COST, COST)),
    );
    expect(outcomes[20]).toBe('wallet_error');
    expect(outcomes.filter((outcome) => outcome === 'ok')).toHaveLength(39);
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 961 * COST, reserved: 0 });
  });

  it('groups and customer top-ups over the same wallets never deadlock', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 100_000 * COST });
    const customers = await Promise.all(Array.from({ length: 3 }, (_, i) => createCustomer(db(), developer.accountId, { external_id: `topup-${i}-${developer.accountId}` })));
    for (const customer of customers) await topUpCustomerWallet(db(), gateway.config, developer.accountId, customer.id, { amount_usd: 10 });
    // Each group draws on the developer's wallet and on the customers' prepaid ones while top-ups move money between them.
    const group = (g: number) => Array.from({ length: 12 }, (_, i) => groupReservation(developer.accountId, (i + g) % 4 === 3 ? null : customers[(i + g) % 4]!));
    const work = Array.from({ length: 40 }, (_, i) =>
      i % 2 === 0
        ? authorizeGroup(db(), 'fast', group(i)).then((rows) => rows.every((row) => row.outcome === 'ok'))
        : topUpCustomerWallet(db(), gateway.config, developer.accountId, customers[i % 3]!.id, { amount_usd: 1 }).then(() => true),
    );
    expect(await Promise.all(work)).toEqual(Array.from({ length: 40 }, () => true));
  });

  it('a group keeps each ledger row’s running balance, and records wallet.low and wallet.empty once each', async () => {
    // 1 USD threshold: the wallet starts 5 calls above it and ends at exactly zero.
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 + 5 * COST });
    const before = meteringGroupStats(db())!.finish.groupedCalls;
    const outcomes = await Promise.all(Array.from({ length: 105 }, () => meteredCall(developer, null, COST, COST)));
    expect(outcomes.every((outcome) => outcome === 'ok')).toBe(true);
    expect(meteringGroupStats(db())!.finish.groupedCalls).toBeGreaterThan(before);
    const { rows: ledger } = await db().query("SELECT amount_micros::bigint AS amount, balance_after_micros::bigint AS after FROM wallet_ledger WHERE account_id = $1 AND kind = 'usage' ORDER BY id", [developer.accountId]);
    expect(ledger.map((row) => Number(row.after))).toEqual(Array.from({ length: 105 }, (_, i) => 1_000_000 + 5 * COST - (i + 1) * COST));
    const { rows: events } = await db().query("SELECT type, data FROM outbox_events WHERE developer_id = $1 AND type LIKE 'wallet.%' ORDER BY (data -> 'wallet' ->> 'balance_usd')::numeric DESC", [developer.accountId]);
    expect(events.map((event) => [event.type, event.data.wallet.balance_usd])).toEqual([
      ['wallet.low', (1_000_000 - COST) / 1e6],
      ['wallet.empty', 0],
    ]);
  });

  it('charges an idempotency key once even when both of its settlements are in one group', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const holds = await Promise.all([0, 1].map(() => authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: COST })));
    const finish = (hold: Hold, ordinal: number) =>
      groupSettlement(developer.accountId, hold.id, { idempotencyKey: 'batch_9:line-1', events: [{ id: newId('evt_'), type: 'chat.completion.finished', data: { ordinal } }] });
    const rows = await finishGroup(db(), 'fast', holds.map(finish));
    expect(rows.map((row) => row.charged)).toEqual([true, false]);
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 1_000_000 - COST, reserved: 0 });
    const { rows: events } = await db().query("SELECT data FROM outbox_events WHERE developer_id = $1 AND type = 'chat.completion.finished'", [developer.accountId]);
    expect(events).toEqual([{ data: { ordinal: 0 } }]);
  });

  it('groups over the same wallets and budgets in opposite orders never deadlock', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 20_000 * COST });
    const customers = await Promise.all(
      Array.from({ length: 4 }, (_, i) => createCustomer(db(), developer.accountId, { external_id: `group-${i}-${developer.accountId}`, monthly_budget_usd: 1_000 })),
    );
    // Two of them pay from prepaid wallets, two from the developer's.
    for (const customer of customers.slice(0, 2)) await topUpCustomerWallet(db(), gateway.config, developer.accountId, customer.id, { amount_usd: 50 });
    const payers = [null, ...customers];
    const call = (payer: (typeof payers)[number]) => groupReservation(developer.accountId, payer, payer ? 1_000_000_000 : null);
    // Each group touches every row, in an order of its own: one by one, these would lock in opposite orders.
    const groups = Array.from({ length: 16 }, (_, g) => Array.from({ length: 25 }, (_, i) => call(payers[(i * (g % 2 ? 1 : 4) + g) % payers.length]!)));
    const authorized = await Promise.all(groups.map((calls) => authorizeGroup(db(), 'fast', calls)));
    const holds = authorized.flatMap((rows) => rows.map((row) => (expect(row.outcome).toBe('ok'), row.hold_id!)));
    expect(holds).toHaveLength(400);
    const shuffled = [...holds].sort(() => Math.random() - 0.5);
    const finishes = Array.from({ length: 16 }, (_, g) => shuffled.slice(g * 25, (g + 1) * 25).map((hold) => groupSettlement(developer.accountId, hold)));
    await Promise.all(finishes.map((calls) => finishGroup(db(), 'fast', calls)));
    const { rows } = await db().query(
      `SELECT (SELECT sum(spent_micros)::bigint FROM customer_budget_months WHERE customer_id = ANY($2)) AS spent,
              (SELECT sum(reserved_micros)::bigint FROM customer_budget_months WHERE customer_id = ANY($2)) AS budget_reserved,
              (SELECT count(*)::int FROM usage_records WHERE developer_id = $1) AS usage_rows`,
      [developer.accountId, customers.map((customer) => customer.id)],
    );
    const byCustomer = holds.length - groups.flat().filter((entry) => entry.customerId === null).length;
    expect(rows[0]).toEqual({ spent: String(byCustomer * COST), budget_reserved: '0', usage_rows: 400 });
    const state = await walletState(developer.accountId);
    expect(state.reserved).toBe(0);
    expect(state.ledgerSum).toBe(state.balance);
  });
});

describe('reservations', () => {
  it('charges the actual cost, releases the rest, and settles a hold only once', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const hold = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 300_000 });
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 1_000_000, reserved: 300_000 });
    const first = await settle(db(), gateway.config, hold, { costMicros: 120_000, billableMicros: 150_000, model: 'svc:m/a', tokensIn: 1, tokensOut: 1 });
    expect(first).toEqual({ charged: true, deductedMicros: 120_000, balanceAfterMicros: 880_000 });
    expect(await settle(db(), gateway.config, hold, { costMicros: 120_000, billableMicros: 0, model: 'svc:m/a', tokensIn: 1, tokensOut: 1 })).toMatchObject({ charged: false });
    await release(db(), hold);
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 880_000, reserved: 0, ledgerSum: 880_000 });
  });

  it('never charges more than was reserved, and release gives a reservation back whole', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const capped = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 100 });
    expect((await settle(db(), gateway.config, capped, { costMicros: 5_000, billableMicros: 0, model: 'svc:m/a', tokensIn: 0, tokensOut: 0 })).deductedMicros).toBe(100);
    const unused: Hold = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 400_000 });
    await release(db(), unused);
    await release(db(), unused);
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 999_900, reserved: 0 });
  });

  it('settles one idempotency key once across different holds (a retried batch line)', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    for (let attempt = 0; attempt < 3; attempt++) {
      const hold = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 50_000 });
      await settle(db(), gateway.config, hold, { costMicros: 50_000, billableMicros: 50_000, model: 'svc:m/a', tokensIn: 1, tokensOut: 1, idempotencyKey: 'batch_1:line-7' });
    }
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 950_000, reserved: 0 });
  });

  it('commits a call’s own events with its charge, once per idempotency key, and none on a release', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const events = [{ type: 'chat.completion.finished' as const, data: { completion_id: 'chatcmpl-once' } }];
    for (let attempt = 0; attempt < 2; attempt++) {
      const hold = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 10_000 });
      await settle(db(), gateway.config, hold, { costMicros: 10_000, billableMicros: 10_000, model: 'svc:m/a', tokensIn: 1, tokensOut: 1, idempotencyKey: 'batch_2:line-1', events });
    }
    await release(db(), await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 10_000 }));
    const { rows } = await db().query("SELECT type, data FROM outbox_events WHERE developer_id = $1 AND type = 'chat.completion.finished'", [developer.accountId]);
    expect(rows).toEqual([{ type: 'chat.completion.finished', data: { completion_id: 'chatcmpl-once' } }]);
  });

  it('500 wallet_error when the ledger cannot be written, and nothing is charged', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const hold = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 10_000 });
    const client = await db().connect();
    try {
      // A trigger that fails every ledger insert of this developer stands in for a failing disk.
      await client.query(`CREATE FUNCTION fail_ledger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.account_id = '${developer.accountId}' THEN RAISE EXCEPTION 'ledger unavailable'; END IF; RETURN NEW; END $$`);
      await client.query('CREATE TRIGGER fail_ledger BEFORE INSERT ON wallet_ledger FOR EACH ROW EXECUTE FUNCTION fail_ledger()');
      await expect(settle(db(), gateway.config, hold, { costMicros: 10_000, billableMicros: 0, model: 'svc:m/a', tokensIn: 0, tokensOut: 0 })).rejects.toMatchObject({
        status: 500,
        type: 'api_error',
        code: 'wallet_error',
      });
    } finally {
      await client.query('DROP TRIGGER fail_ledger ON wallet_ledger; DROP FUNCTION fail_ledger()');
      client.release();
    }
    expect(await walletState(developer.accountId)).toMatchObject({ balance: 1_000_000, reserved: 10_000 });
    const { rows } = await db().query('SELECT status FROM billing_holds WHERE id = $1', [hold.id]);
    expect(rows[0].status).toBe('held');
  });
});

describe('customer wallets over HTTP', () => {
  let developer: TestDeveloper;
  let customerId: string;
  const post = (path: string, json: unknown) => call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(developer.key) });

  beforeAll(async () => {
    developer = await createDeveloper(gateway.platform, { creditMicros: 50_000_000 });
    customerId = (await post('/v1/customers', { external_id: 'payer' })).body.id;
  });

  it('tops up from the developer wallet with both ledger rows, by cus_ id or ext:', async () => {
    const topped = await post(`/v1/customers/ext:payer/wallet/topup`, { amount_usd: 20 });
    expect(topped.status).toBe(200);
    expect(topped.body).toEqual({ object: 'customer_wallet', customer_id: customerId, prepaid: true, balance_usd: 20, available_usd: 20 });
    expect((await walletState(developer.accountId)).balance).toBe(30_000_000);
    const adjusted = await post(`/v1/customers/${customerId}/wallet/adjust`, { amount_usd: -5.5 });
    expect(adjusted.body.balance_usd).toBe(14.5);
    expect((await walletState(developer.accountId)).balance).toBe(35_500_000);
    const { rows } = await db().query('SELECT amount_micros::bigint AS amount, balance_after_micros::bigint AS after FROM customer_wallet_ledger WHERE customer_id = $1 ORDER BY id', [customerId]);
    expect(rows.map((row) => [Number(row.amount), Number(row.after)])).toEqual([
      [20_000_000, 20_000_000],
      [-5_500_000, 14_500_000],
    ]);
  });

  it.each([
    [{ amount_usd: 0 }, 400, 'invalid_amount'],
    [{ amount_usd: 'ten' }, 400, 'invalid_amount'],
    [{ amount_usd: null }, 400, 'invalid_amount'],
    [{}, 400, 'invalid_amount'],
    [{ amount_usd: 100.01 }, 400, 'amount_too_large'],
    [{ amount_usd: -100.01 }, 400, 'amount_too_large'],
    [{ amount_usd: 1, note: 'x' }, 400, 'invalid_request'],
  ])('adjust %j → %i %s', async (json, status, code) => {
    const response = await post(`/v1/customers/${customerId}/wallet/adjust`, json);
    expect({ status: response.status, code: response.body.error?.code }).toEqual({ status, code });
  });

  it('402 when the giving side cannot cover the move, and nothing moves', async () => {
    const before = await walletState(developer.accountId);
    const tooMuch = await post(`/v1/customers/${customerId}/wallet/adjust`, { amount_usd: -99 });
    expect({ status: tooMuch.status, code: tooMuch.body.error.code }).toEqual({ status: 402, code: 'customer_wallet_empty' });
    const poor = await createDeveloper(gateway.platform, { creditMicros: 1_000_000, scopes: ['admin'] });
    const theirs = await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json: {}, headers: bearer(poor.key) });
    const broke = await call(gateway.baseUrl, `/v1/customers/${theirs.body.id}/wallet/topup`, { method: 'POST', json: { amount_usd: 2 }, headers: bearer(poor.key) });
    expect({ status: broke.status, code: broke.body.error.code }).toEqual({ status: 402, code: 'wallet_empty' });
    expect(await walletState(developer.accountId)).toEqual(before);
  });

  it("a prepaid customer pays for its own calls; 402 customer_wallet_empty once it can't", async () => {
    const customer = (await gateway.platform.db.query('SELECT * FROM customers WHERE id = $1', [customerId])).rows[0];
    const developerBefore = (await walletState(developer.accountId)).balance;
    expect(await meteredCall(developer, customer, 14_000_000, 14_000_000)).toBe('ok');
    expect(await meteredCall(developer, customer, 1_000_000, 1_000_000)).toBe('customer_wallet_empty');
    expect((await walletState(developer.accountId)).balance).toBe(developerBefore);
    expect((await call(gateway.baseUrl, `/v1/customers/${customerId}/wallet`, { headers: bearer(developer.key) })).body.balance_usd).toBe(0.5);
  });
});

describe('events and reports', () => {
  it('records wallet.low and wallet.empty once per crossing, and customer.budget_exceeded once per month', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_500_000 });
    await meteredCall(developer, null, 600_000, 600_000); // 1.5 → 0.9: below the 1 USD threshold
    await meteredCall(developer, null, 100_000, 100_000); // 0.9 → 0.8: already low
    await meteredCall(developer, null, 800_000, 800_000); // 0.8 → 0: empty
    const customer = await createCustomer(db(), developer.accountId, { monthly_budget_usd: 0 });
    expect(await meteredCall(developer, customer, 0, 0)).toBe('customer_budget_exceeded');
    expect(await meteredCall(developer, customer, 0, 0)).toBe('customer_budget_exceeded');
    const { rows } = await db().query('SELECT type FROM outbox_events WHERE developer_id = $1 ORDER BY created_at, id', [developer.accountId]);
    expect(rows.map((row) => row.type).filter((type) => type !== 'customer.created')).toEqual(['wallet.low', 'wallet.empty', 'customer.budget_exceeded']);
  });

  it('reports usage and margin by model and by day, for the developer and for one customer', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 10_000_000, scopes: ['admin'] });
    const marked = await createCustomer(db(), developer.accountId, { external_id: 'marked', default_billable_markup_pct: 50 });
    const fixed = await createCustomer(db(), developer.accountId, { external_id: 'fixed', default_billable_amount_usd: 0.05 });
    await meteredCall(developer, marked, 20_000, 20_000); // billed 30,000
    await meteredCall(developer, fixed, 20_000, 10_000); // billed 50,000
    await meteredCall(developer, null, 20_000, 10_000); // billed at cost
    expect(billableAmount(10_000, marked, 77)).toBe(77);

    const byModel = await call(gateway.baseUrl, '/v1/usage?group_by=model', { headers: bearer(developer.key) });
    expect(byModel.body.data).toEqual([{ model: 'svc:test/model', requests: 3, tokens_in: 30, tokens_out: 15, cost_usd: 0.04, billable_usd: 0.09, margin_usd: 0.05 }]);
    const margin = await call(gateway.baseUrl, '/v1/customers/ext:marked/margin', { headers: bearer(developer.key) });
    expect(margin.body.totals).toEqual({ requests: 1, cost_usd: 0.02, billable_usd: 0.03, margin_usd: 0.01 });
    const byDay = await call(gateway.baseUrl, '/v1/margin?group_by=day', { headers: bearer(developer.key) });
    expect(byDay.body.data).toHaveLength(1);
    expect(byDay.body.data[0].day).toBe(new Date().toISOString().slice(0, 10));
    const empty = await call(gateway.baseUrl, '/v1/usage?start=2020-01-01&end=2020-01-31', { headers: bearer(developer.key) });
    expect(empty.body).toMatchObject({ data: [], totals: { requests: 0 } });
    const bad = await call(gateway.baseUrl, '/v1/usage?group_by=week', { headers: bearer(developer.key) });
    expect({ status: bad.status, code: bad.body.error.code, param: bad.body.error.param }).toEqual({ status: 400, code: 'invalid_request', param: 'group_by' });
  });
});

describe('the expired-hold sweep', () => {
  it('releases a reservation whose call never settled, through the worker’s scheduled BullMQ job', async () => {
    const { startConsumers } = await import('../shared/platform/queues.js');
    const { createRedis } = await import('../shared/platform/redis.js');
    const { consumerDefinitions, scheduleRecurringJobs, HOLD_SWEEP_QUEUE } = await import('../workers/consumers.js');
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    const abandoned = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 700_000 });
    const live = await authorize(db(), { developerId: developer.accountId, customer: null, maxCostMicros: 100_000 });
    await db().query(`UPDATE billing_holds SET expires_at = now() - interval '1 second' WHERE id = $1`, [abandoned.id]);

    const blocking = createRedis(gateway.config.REDIS_URL, 'blocking', gateway.platform.logger);
    const consumers = startConsumers(consumerDefinitions(gateway.platform), blocking, gateway.platform.queues.prefix, gateway.platform.logger);
    try {
      await scheduleRecurringJobs(gateway.platform.queues, 200);
      let state = await walletState(developer.accountId);
      for (let attempt = 0; attempt < 100 && state.reserved !== 100_000; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        state = await walletState(developer.accountId);
      }
      expect(state).toMatchObject({ balance: 1_000_000, reserved: 100_000 });
      const { rows } = await db().query('SELECT id, status FROM billing_holds WHERE id = ANY($1) ORDER BY amount_micros', [[abandoned.id, live.id]]);
      expect(rows.map((row) => row.status)).toEqual(['held', 'released']);
      await gateway.platform.queues.queue(HOLD_SWEEP_QUEUE).removeJobScheduler('release-expired-holds');
    } finally {
      await Promise.all(consumers.map((consumer) => consumer.close()));
      await blocking.quit();
    }
  });
});
