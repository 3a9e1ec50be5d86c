import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HiveError } from '../shared/hive/errors.js';
import { createTopUpCheckout } from '../shared/hive/payments.js';
import { readWallet } from '../shared/hive/wallet.js';
import { admitPerson, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';
import { chargeRefunded, checkoutCompleted, signedDelivery, startStripeStandIn, type StripeStandIn } from './support/stripe-mock.js';

/**
 * Card top-ups (issue 30): a checkout made against stripe-mock credits nothing; only Stripe's
 * signed webhook credits, exactly once per paid session however it is delivered, and a refund
 * takes back what it returned, once.
 */
let stripe: StripeStandIn;
let world: HiveWorld;
let owner: HiveOwner;
let ownerId: string;
const SIGNUP_CREDIT = 5_000_000n;

beforeAll(async () => {
  stripe = await startStripeStandIn();
  world = await startHiveWorld({ ...stripe.env, HIVE_SIGNUP_CREDIT_USD: '5' });
  owner = await signUp(world, 'payco');
  ownerId = await personId(owner.email);
});
afterAll(async () => {
  await world?.close();
  await stripe?.close();
});

async function personId(email: string): Promise<string> {
  const { rows } = await world.hive.db.query<{ id: string }>('SELECT id FROM hive.people WHERE email = $1', [email]);
  return rows[0]!.id;
}

const checkout = (amountUsd: number, who = ownerId, orgId = owner.orgId) =>
  createTopUpCheckout(world.hive, { orgId, personId: who, amountUsd, successUrl: 'http://127.0.0.1/dashboard?topup=ok', cancelUrl: 'http://127.0.0.1/dashboard' });

/** POSTs a delivery to the webhook exactly as Stripe would: the raw JSON body and its signature header. */
async function deliver(delivery: { payload: string; signature: string }) {
  const response = await fetch(`${world.baseUrl}/billing/stripe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': delivery.signature },
    body: delivery.payload,
  });
  return { status: response.status, body: (await response.json()) as any };
}

const balance = async (orgId = owner.orgId) => (await readWallet(world.hive.db, orgId)).balanceMicros;

async function ledger(kind: string, reference: string) {
  const { rows } = await world.hive.db.query<{ amount_micros: string }>('SELECT amount_micros FROM hive.wallet_ledger WHERE kind = $1 AND reference = $2', [kind, reference]);
  return rows.map((row) => BigInt(row.amount_micros));
}

describe('createTopUpCheckout', () => {
  it('makes a Stripe Checkout Session for the amount and credits nothing', async () => {
    const before = await readWallet(world.hive.db, owner.orgId);
    expect(before).toMatchObject({ balanceMicros: SIGNUP_CREDIT, suspended: false });
    expect(before.entries).toEqual([expect.objectContaining({ kind: 'signup_credit', amountMicros: SIGNUP_CREDIT })]);

    const session = await checkout(25);
    expect(session.url).toMatch(/^https:\/\//);
    expect(session.sessionId).toMatch(/^cs_/);

    const after = await readWallet(world.hive.db, owner.orgId);
    expect(after.balanceMicros).toBe(SIGNUP_CREDIT);
    expect(after.entries.map((entry) => entry.kind)).toEqual(['signup_credit']);
    const { rows } = await world.hive.db.query('SELECT org_id, amount_micros, credited_at FROM hive.wallet_topups WHERE session_id = $1', [session.sessionId]);
    expect(rows).toEqual([{ org_id: owner.orgId, amount_micros: '25000000', credited_at: null }]);
  });

  it('refuses amounts outside 10 to 500 US dollars, and fractions of a cent, with 400', async () => {
    for (const amountUsd of [9.99, 500.01, 0, -10, 1_000, Number.NaN, 10.001]) {
      const refusal = await checkout(amountUsd).catch((error: unknown) => error);
      expect(refusal, `amount ${amountUsd}`).toBeInstanceOf(HiveError);
      expect(refusal).toMatchObject({ status: 400 });
    }
    // The bounds themselves are top-ups.
    await expect(checkout(10)).resolves.toMatchObject({ sessionId: expect.stringMatching(/^cs_/) });
    await expect(checkout(500)).resolves.toMatchObject({ sessionId: expect.stringMatching(/^cs_/) });
    expect(await balance()).toBe(SIGNUP_CREDIT);
  });

  it('refuses a person who is not an admin of the organisation with 403', async () => {
    const email = `member-${Date.now()}@payco.test`;
    await admitPerson(world, owner.token, { email, node: 'payco', role: 'member' });
    await expect(checkout(20, await personId(email))).rejects.toMatchObject({ status: 403 });
  });
});

describe('POST /billing/stripe', () => {
  it('credits a paid checkout once when it is delivered five times at once, and a late redelivery credits nothing', async () => {
    const { sessionId } = await checkout(40);
    const before = await balance();
    const event = checkoutCompleted({ eventId: 'evt_paid_five', sessionId, orgId: owner.orgId, amountCents: 4_000 });

    // Each delivery is signed afresh, as Stripe signs each attempt.
    const answers = await Promise.all(Array.from({ length: 5 }, () => deliver(signedDelivery(event))));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers.map((answer) => answer.body.outcome).sort()).toEqual(['already_credited', 'already_credited', 'already_credited', 'already_credited', 'credited']);
    expect(await balance()).toBe(before + 40_000_000n);
    expect(await ledger('topup', sessionId)).toEqual([40_000_000n]);

    const late = await deliver(signedDelivery(event));
    expect(late).toEqual({ status: 200, body: { received: true, type: 'checkout.session.completed', outcome: 'already_credited' } });
    expect(await balance()).toBe(before + 40_000_000n);
    expect(await ledger('topup', sessionId)).toEqual([40_000_000n]);
  });

  it('refuses a delivery whose signature does not verify, and credits nothing', async () => {
    const { sessionId } = await checkout(30);
    const before = await balance();
    const genuine = signedDelivery(checkoutCompleted({ eventId: 'evt_tampered', sessionId, orgId: owner.orgId, amountCents: 3_000 }));

    const tampered = { payload: genuine.payload.replace('"amount_total":3000', '"amount_total":300000'), signature: genuine.signature };
    expect(tampered.payload).not.toBe(genuine.payload);
    const refusals = [
      await deliver(tampered),
      await deliver(signedDelivery(checkoutCompleted({ eventId: 'evt_other_secret', sessionId, orgId: owner.orgId, amountCents: 3_000 }), 'whsec_not_ours')),
      await deliver({ payload: genuine.payload, signature: 't=1,v1=deadbeef' }),
    ];
    for (const refusal of refusals) expect(refusal).toEqual({ status: 400, body: { error: 'The Stripe-Signature header does not verify.' } });
    const unsigned = await fetch(`${world.baseUrl}/billing/stripe`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: genuine.payload });
    expect(unsigned.status).toBe(400);
    expect(await unsigned.json()).toEqual({ error: expect.any(String) });

    expect(await balance()).toBe(before);
    expect(await ledger('topup', sessionId)).toEqual([]);
    const { rows } = await world.hive.db.query('SELECT credited_at FROM hive.wallet_topups WHERE session_id = $1', [sessionId]);
    expect(rows).toEqual([{ credited_at: null }]);
  });

  it('credits nothing for a completed checkout that is not paid yet', async () => {
    const { sessionId } = await checkout(15);
    const before = await balance();
    const answer = await deliver(signedDelivery(checkoutCompleted({ eventId: 'evt_unpaid', sessionId, orgId: owner.orgId, amountCents: 1_500, paid: false })));
    expect(answer).toEqual({ status: 200, body: { received: true, type: 'checkout.session.completed', outcome: 'ignored' } });
    expect(await balance()).toBe(before);
  });

  it('takes a refund back once however often it is delivered, by the increase of what the charge refunded', async () => {
    const { sessionId } = await checkout(50);
    const paymentIntent = `pi_refund_${Date.now()}`;
    const paid = await deliver(signedDelivery(checkoutCompleted({ eventId: 'evt_paid_refund', sessionId, orgId: owner.orgId, amountCents: 5_000, paymentIntent })));
    expect(paid.body.outcome).toBe('credited');
    const credited = await balance();

    // A partial refund of 10 USD, delivered twice at once: taken once.
    const partial = chargeRefunded({ eventId: 'evt_refund_1', paymentIntent, refundId: 're_first', amountCents: 5_000, amountRefundedCents: 1_000 });
    const twice = await Promise.all([deliver(signedDelivery(partial)), deliver(signedDelivery(partial))]);
    expect(twice.map((answer) => answer.body.outcome).sort()).toEqual(['already_refunded', 'refunded']);
    expect(await balance()).toBe(credited - 10_000_000n);
    expect(await ledger('refund', 're_first')).toEqual([-10_000_000n]);

    // The rest refunded: the charge now says 50 USD refunded in all, so 40 more are taken.
    const rest = chargeRefunded({ eventId: 'evt_refund_2', paymentIntent, refundId: 're_second', amountCents: 5_000, amountRefundedCents: 5_000 });
    expect((await deliver(signedDelivery(rest))).body.outcome).toBe('refunded');
    expect(await balance()).toBe(credited - 50_000_000n);

    // Both again, the older one last and late: nothing more.
    expect((await deliver(signedDelivery(rest))).body.outcome).toBe('already_refunded');
    expect((await deliver(signedDelivery(partial))).body.outcome).toBe('already_refunded');
    expect(await balance()).toBe(credited - 50_000_000n);
    expect(await ledger('refund', 're_second')).toEqual([-40_000_000n]);
  });

  it('answers an event it does not act on with 200, changing nothing', async () => {
    const before = await balance();
    const answer = await deliver(signedDelivery({ id: 'evt_other', type: 'customer.created', data: { object: { id: 'cus_1', object: 'customer' } } }));
    expect(answer).toEqual({ status: 200, body: { received: true, type: 'customer.created', outcome: 'ignored' } });
    expect(await balance()).toBe(before);
  });
});
