import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopUpCheckout } from '../shared/hive/payments.js';
import { readWallet } from '../shared/hive/wallet.js';
import { creditWallet, debitGroupStats, debitWallet, debitWalletGroup } from '../shared/hive/wallet-repository.js';
import { signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';
import { pollUntil } from './support/poll.js';
import { checkoutCompleted, signedDelivery, startStripeStandIn, type StripeStandIn } from './support/stripe-mock.js';

/**
 * The wallet (issue 30): remember, recall and embedding are metered against the organisation's
 * balance at the configured prices; an empty balance suspends writes (402, in the hive's error
 * body) while reads and export keep working; a top-up lifts the suspension.
 */
const PRICES = { HIVE_PRICE_REMEMBER_MICROS: '1000', HIVE_PRICE_RECALL_MICROS: '300', HIVE_PRICE_EMBED_MICROS_PER_1K_TOKENS: '2000' };
const SIGNUP_CREDIT = 10_000n; // 0.01 USD: ten remembers

let stripe: StripeStandIn;
let world: HiveWorld;
beforeAll(async () => {
  stripe = await startStripeStandIn();
  world = await startHiveWorld({ ...stripe.env, ...PRICES, HIVE_SIGNUP_CREDIT_USD: '0.01' });
});
afterAll(async () => {
  await world?.close();
  await stripe?.close();
});

const wallet = (owner: HiveOwner) => readWallet(world.hive.db, owner.orgId);

/** Every ledger row of the organisation, oldest first. */
async function ledger(owner: HiveOwner) {
  const { rows } = await world.hive.db.query<{ kind: string; amount_micros: string; balance_after_micros: string; reference: string | null }>(
    'SELECT kind, amount_micros, balance_after_micros, reference FROM hive.wallet_ledger WHERE org_id = $1 ORDER BY id',
    [owner.orgId],
  );
  return rows.map((row) => ({ kind: row.kind, amount: BigInt(row.amount_micros), after: BigInt(row.balance_after_micros), reference: row.reference }));
}

describe('metering', () => {
  let owner: HiveOwner;
  beforeAll(async () => {
    owner = await signUp(world, 'meterco');
  });

  it('debits a remember at its price, in a ledger row naming the memory', async () => {
    expect(await wallet(owner)).toMatchObject({ balanceMicros: SIGNUP_CREDIT, suspended: false });
    const written = await world.post('/v1/remember', owner.token, { node: 'meterco', title: 'Deploys', body: 'Deploys go out on Tuesdays.' });
    expect(written.status).toBe(201);
    expect(await wallet(owner)).toMatchObject({ balanceMicros: SIGNUP_CREDIT - 1_000n });
    expect((await ledger(owner)).at(-1)).toEqual({ kind: 'remember', amount: -1_000n, after: SIGNUP_CREDIT - 1_000n, reference: written.body.memory.id });
  });

  it('debits a recall at its price plus the embedding of its query', async () => {
    const before = (await wallet(owner)).balanceMicros;
    const found = await world.post('/v1/recall', owner.token, { query: 'when do deploys go out' });
    expect(found.status).toBe(200);
    expect(found.body.ranking.meaning).toBe(true);
    const entry = (await ledger(owner)).at(-1)!;
    expect(entry.kind).toBe('recall');
    // The query's tokens cost something on top of the recall's own price.
    expect(entry.amount).toBeLessThan(-300n);
    expect((await wallet(owner)).balanceMicros).toBe(before + entry.amount);
  });

  it("debits a memory's embedding by its tokens when the worker embeds it", async () => {
    const written = await world.post('/v1/remember', owner.token, { node: 'meterco', title: 'Release train', body: 'Releases are cut from main every other week.' });
    const embedding = await world.startEmbedding();
    try {
      const entry = await pollUntil(
        async () => (await ledger(owner)).find((row) => row.kind === 'embedding' && row.reference === written.body.memory.id),
        (row) => row !== undefined,
      );
      expect(entry!.amount).toBeLessThan(0n);
    } finally {
      await embedding.stop();
    }
    // The ledger accounts for every micro-dollar: its rows sum to the balance.
    const rows = await ledger(owner);
    expect(rows.reduce((sum, row) => sum + row.amount, 0n)).toBe((await wallet(owner)).balanceMicros);
  });
});

describe('an empty wallet', () => {
  let owner: HiveOwner;
  let memoryId: string;
  beforeAll(async () => {
    owner = await signUp(world, 'emptyco');
    const first = await world.post('/v1/remember', owner.token, { node: 'emptyco', title: 'Kept', body: 'Written while the wallet held money.' });
    memoryId = first.body.memory.id;
    await world.post('/v1/log', owner.token, { node: 'emptyco', text: 'logged while funded' });
    await world.post('/v1/task', owner.token, { action: 'add', node: 'emptyco', title: 'A task written while funded' });
  });

  it('refuses the remember that finds it empty with 402 and writes nothing', async () => {
    // Nine more remembers spend the rest of the 0.01 USD credit; the next one finds it empty.
    let refused: Awaited<ReturnType<HiveWorld['post']>> | undefined;
    for (let i = 0; i < 12 && !refused; i++) {
      const answer = await world.post('/v1/remember', owner.token, { node: 'emptyco', title: `Note ${i}`, body: `Body ${i}.` });
      if (answer.status === 402) refused = answer;
      else expect(answer.status).toBe(201);
    }
    expect(refused?.body).toEqual({ error: expect.stringMatching(/suspended: its wallet is empty/) });
    expect(await wallet(owner)).toMatchObject({ balanceMicros: 0n, suspended: true });
    // The first memory and the nine paid for; the refused one rolled back.
    const { rows } = await world.hive.db.query('SELECT count(*)::int AS n FROM hive.memories WHERE org_id = $1', [owner.orgId]);
    expect(rows).toEqual([{ n: 10 }]);
  });

  it('suspends every write with 402 in the hive error body', async () => {
    const writes: Array<[string, Record<string, unknown>]> = [
      ['/v1/remember', { node: 'emptyco', title: 'Refused', body: 'Not written.' }],
      ['/v1/memory/update', { id: memoryId, body: 'Changed while suspended.' }],
      ['/v1/memory/forget', { id: memoryId }],
      ['/v1/memory/verify', { id: memoryId }],
      ['/v1/log', { node: 'emptyco', text: 'logged while suspended' }],
      ['/v1/task', { action: 'add', node: 'emptyco', title: 'A task while suspended' }],
      ['/v1/traits', { action: 'add', trait: 'prefers small changes', evidence: { text: 'said so' } }],
    ];
    for (const [path, body] of writes) {
      const answer = await world.post(path, owner.token, body);
      expect(answer.status, path).toBe(402);
      expect(answer.body, path).toEqual({ error: `Organisation ${owner.orgId} is suspended: its wallet is empty. An admin can top it up from the dashboard; reads and export still work.` });
    }
    const kept = await world.post('/v1/memory/get', owner.token, { id: memoryId });
    expect(kept.body).toMatchObject({ version: 1, status: 'active', body: 'Written while the wallet held money.' });
  });

  it('still serves reads and export, charging nothing', async () => {
    const reads: Array<[string, Record<string, unknown>]> = [
      ['/v1/recall', { query: 'written while funded' }],
      ['/v1/memory/get', { id: memoryId }],
      ['/v1/events', {}],
      ['/v1/task', { action: 'list' }],
      ['/v1/traits', {}],
      ['/v1/nodes', {}],
      ['/v1/brief', { node: 'emptyco' }],
      ['/v1/stats', {}],
    ];
    for (const [path, body] of reads) expect((await world.post(path, owner.token, body)).status, path).toBe(200);

    const response = await fetch(`${world.baseUrl}/v1/export`, { method: 'POST', headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ node: 'emptyco' }) });
    expect(response.status).toBe(200);
    const lines = (await response.text()).trimEnd().split('\n').map((line) => JSON.parse(line) as { type: string; id?: string });
    expect(lines.at(-1)).toMatchObject({ type: 'end' });
    expect(lines.filter((line) => line.type === 'memory')).toHaveLength(10);
    expect(lines.some((line) => line.type === 'memory' && line.id === memoryId)).toBe(true);

    expect(await wallet(owner)).toMatchObject({ balanceMicros: 0n, suspended: true });
  });

  it('is lifted by a top-up: writes work again', async () => {
    const { rows } = await world.hive.db.query<{ id: string }>('SELECT id FROM hive.people WHERE email = $1', [owner.email]);
    const { sessionId } = await createTopUpCheckout(world.hive, { orgId: owner.orgId, personId: rows[0]!.id, amountUsd: 10, successUrl: 'http://127.0.0.1/ok', cancelUrl: 'http://127.0.0.1/no' });
    // Starting the checkout lifts nothing: only the paid webhook does.
    expect((await world.post('/v1/log', owner.token, { node: 'emptyco', text: 'still suspended' })).status).toBe(402);

    const delivery = signedDelivery(checkoutCompleted({ eventId: 'evt_lift', sessionId, orgId: owner.orgId, amountCents: 1_000 }));
    const credited = await fetch(`${world.baseUrl}/billing/stripe`, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': delivery.signature }, body: delivery.payload });
    expect(credited.status).toBe(200);
    expect(await wallet(owner)).toMatchObject({ balanceMicros: 10_000_000n, suspended: false });

    const written = await world.post('/v1/remember', owner.token, { node: 'emptyco', title: 'After the top-up', body: 'Written again.' });
    expect(written.status).toBe(201);
    expect((await world.post('/v1/log', owner.token, { node: 'emptyco', text: 'logged after the top-up' })).status).toBe(201);
    expect(await wallet(owner)).toMatchObject({ balanceMicros: 10_000_000n - 1_000n });
  });
});

/** Each ledger row's balance_after is the one before it plus its amount: the rows chain in the order they were written. */
function expectChained(rows: Awaited<ReturnType<typeof ledger>>) {
  let balance = 0n;
  for (const row of rows) {
    balance += row.amount;
    expect(row.after).toBe(balance);
    expect(row.after).toBeGreaterThanOrEqual(0n);
  }
}

describe('charges off the write path, grouped', () => {
  it('serves a burst of remembers at the edge and lands the balance on exactly zero', async () => {
    const owner = await signUp(world, 'burstco');
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => world.post('/v1/remember', owner.token, { node: 'burstco', title: `Burst ${i}`, body: `Written in a burst, ${i}.` })),
    );
    for (const answer of answers) expect([201, 402]).toContain(answer.status);
    const served = answers.filter((answer) => answer.status === 201);
    // The credit pays for ten; every remember that found money left was served.
    expect(served.length).toBeGreaterThanOrEqual(Number(SIGNUP_CREDIT / 1_000n));

    expect(await wallet(owner)).toMatchObject({ balanceMicros: 0n, suspended: true });
    const rows = await ledger(owner);
    expect(rows.reduce((sum, row) => sum + row.amount, 0n)).toBe(0n);
    expect(rows.filter((row) => row.kind === 'remember').reduce((sum, row) => sum - row.amount, 0n)).toBe(SIGNUP_CREDIT);
    expectChained(rows);

    // Every remember that answered 201 is stored, and nothing else is.
    const { rows: stored } = await world.hive.db.query<{ id: string }>('SELECT id FROM hive.memories WHERE org_id = $1', [owner.orgId]);
    expect(stored.map((row) => row.id).sort()).toEqual(served.map((answer) => answer.body.memory.id as string).sort());
  });

  it('charges each of 50 concurrent recalls once', async () => {
    const owner = await signUp(world, 'recallco');
    await creditWallet(world.hive.db, { orgId: owner.orgId, amountMicros: 10_000_000n, kind: 'topup', reference: `test-${owner.orgId}` });
    const before = (await wallet(owner)).balanceMicros;
    const answers = await Promise.all(Array.from({ length: 50 }, () => world.post('/v1/recall', owner.token, { query: 'what happens on fridays' })));
    for (const answer of answers) expect(answer.status).toBe(200);

    const rows = await ledger(owner);
    const recalls = rows.filter((row) => row.kind === 'recall');
    expect(recalls).toHaveLength(50);
    for (const row of recalls) expect(row.amount).toBeLessThanOrEqual(-300n);
    expect((await wallet(owner)).balanceMicros).toBe(before + recalls.reduce((sum, row) => sum + row.amount, 0n));
    expectChained(rows);
  });

  it('charges a group in order: each call takes what the ones before it left', async () => {
    const [a, b, empty] = [await signUp(world, 'groupa'), await signUp(world, 'groupb'), await signUp(world, 'groupempty')];
    await debitWallet(world.hive.db, { orgId: empty.orgId, amountMicros: Number(SIGNUP_CREDIT), kind: 'recall', reference: null });
    const call = (owner: HiveOwner, amountMicros: number, reference: string) => ({ orgId: owner.orgId, amountMicros, kind: 'embedding' as const, reference });

    const results = await debitWalletGroup(world.hive.db, [
      call(a, 4_000, 'a1'),
      call(b, 3_000, 'b1'),
      call(a, 4_000, 'a2'),
      call(empty, 1_000, 'e1'),
      call(a, 4_000, 'a3'),
      call(b, 9_000, 'b2'),
      call(a, 1_000, 'a4'),
    ]);
    expect(results).toEqual([
      { charged: 4_000n, balanceAfter: 6_000n },
      { charged: 3_000n, balanceAfter: 7_000n },
      { charged: 4_000n, balanceAfter: 2_000n },
      undefined,
      { charged: 2_000n, balanceAfter: 0n },
      { charged: 7_000n, balanceAfter: 0n },
      undefined,
    ]);
    expect((await ledger(a)).slice(1)).toEqual([
      { kind: 'embedding', amount: -4_000n, after: 6_000n, reference: 'a1' },
      { kind: 'embedding', amount: -4_000n, after: 2_000n, reference: 'a2' },
      { kind: 'embedding', amount: -2_000n, after: 0n, reference: 'a3' },
    ]);
    expect((await ledger(b)).slice(1)).toEqual([
      { kind: 'embedding', amount: -3_000n, after: 7_000n, reference: 'b1' },
      { kind: 'embedding', amount: -7_000n, after: 0n, reference: 'b2' },
    ]);
    for (const owner of [a, b, empty]) {
      expect(await wallet(owner)).toMatchObject({ balanceMicros: 0n });
      expectChained(await ledger(owner));
    }
  });

  it('sends concurrent debits of one pool together, in one statement', async () => {
    const owner = await signUp(world, 'poolco');
    const stats = () => ({ ...debitGroupStats(world.hive.db)! });
    const before = stats();
    // 120 debits of 100 against 10,000: the first hundred take it all, the rest nothing.
    const results = await Promise.all(
      Array.from({ length: 120 }, (_, i) => debitWallet(world.hive.db, { orgId: owner.orgId, amountMicros: 100, kind: 'recall', reference: `r${i}` })),
    );
    const after = stats();
    expect(after.groupedCalls - before.groupedCalls).toBeGreaterThan(0);
    expect(after.statements - before.statements).toBeLessThan(120);
    expect(results.filter((result) => result !== undefined)).toHaveLength(100);
    expect(await wallet(owner)).toMatchObject({ balanceMicros: 0n });
    const rows = await ledger(owner);
    expect(rows).toHaveLength(101);
    expectChained(rows);
  });
});
