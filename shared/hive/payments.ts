import Stripe from 'stripe';
import type { HiveServices } from '../composition/hive.js';
import { withTransaction } from '../db/pool.js';
import { hiveError } from './errors.js';
import * as repo from './wallet-repository.js';

/**
 * Card top-ups through Stripe Checkout (spec 3: "a wallet funded by card top-ups"). Starting one
 * (POST /dashboard/topup) makes a Checkout Session and credits nothing; the only thing that credits
 * is Stripe's signed webhook (POST /billing/stripe): a paid checkout.session.completed credits its
 * amount exactly once however often, concurrently or late, it is delivered, and a charge.refunded
 * takes back the increase of what the charge has refunded, once.
 */

export const TOP_UP_MIN_USD = 10;
export const TOP_UP_MAX_USD = 500;
const MICROS_PER_CENT = 10_000n;

export interface TopUpInput {
  orgId: string;
  personId: string;
  amountUsd: number;
  successUrl: string;
  cancelUrl: string;
}

/**
 * A Stripe Checkout Session for `amountUsd` (10 to 500 US dollars, whole cents) into the
 * organisation's wallet, started by an admin of the organisation: the browser is sent to its URL.
 * The session carries the organisation in client_reference_id and metadata; nothing is credited here.
 */
export async function createTopUpCheckout(hive: HiveServices, input: TopUpInput): Promise<{ url: string; sessionId: string }> {
  const cents = Math.round(input.amountUsd * 100);
  if (!Number.isFinite(input.amountUsd) || Math.abs(input.amountUsd * 100 - cents) > 1e-6) throw hiveError(400, 'A top-up is an amount of US dollars in whole cents.');
  if (input.amountUsd < TOP_UP_MIN_USD || input.amountUsd > TOP_UP_MAX_USD) {
    throw hiveError(400, `A top-up is from ${TOP_UP_MIN_USD} to ${TOP_UP_MAX_USD} US dollars; ${input.amountUsd} is outside that.`);
  }
  if (!(await repo.isOrganisationAdmin(hive.db, input.orgId, input.personId))) throw hiveError(403, "Topping up the wallet needs the admin role on the organisation's root node.");
  if (!hive.stripe) throw hiveError(503, 'Card top-ups are not configured on this server (HIVE_STRIPE_SECRET_KEY).');

  let session: Stripe.Checkout.Session;
  try {
    session = await hive.stripe.checkout.sessions.create({
      mode: 'payment',
      line_items: [{ quantity: 1, price_data: { currency: 'usd', unit_amount: cents, product_data: { name: 'Memory hive wallet top-up' } } }],
      client_reference_id: input.orgId,
      metadata: { org_id: input.orgId, person_id: input.personId },
      payment_intent_data: { metadata: { org_id: input.orgId } },
      success_url: input.successUrl,
      cancel_url: input.cancelUrl,
    });
  } catch (error) {
    hive.logger.warn({ err: error }, 'Stripe refused a checkout session');
    throw hiveError(502, `Stripe could not start the checkout: ${(error as Error).message}`);
  }
  if (!session.url) throw hiveError(502, 'Stripe made a checkout session without a URL.');
  await repo.insertTopUp(hive.db, { sessionId: session.id, orgId: input.orgId, personId: input.personId, amountMicros: cents * Number(MICROS_PER_CENT) });
  return { url: session.url, sessionId: session.id };
}

export type StripeEventOutcome = 'credited' | 'already_credited' | 'refunded' | 'already_refunded' | 'ignored';

/**
 * One delivery of Stripe's webhook: the raw body and its Stripe-Signature header. Anything that
 * does not verify against HIVE_STRIPE_WEBHOOK_SECRET is refused (400) before it is read.
 */
export async function receiveStripeEvent(
  hive: Pick<HiveServices, 'db' | 'config' | 'logger'>,
  delivery: { payload: unknown; signature: string | undefined },
): Promise<{ received: true; type: string; outcome: StripeEventOutcome }> {
  const secret = hive.config.HIVE_STRIPE_WEBHOOK_SECRET;
  if (!secret) throw hiveError(503, 'Stripe webhooks are not configured on this server (HIVE_STRIPE_WEBHOOK_SECRET).');
  if (!Buffer.isBuffer(delivery.payload) || delivery.payload.length === 0) throw hiveError(400, 'A Stripe webhook delivery has a body.');
  if (!delivery.signature) throw hiveError(400, 'A Stripe webhook delivery carries a Stripe-Signature header.');
  let event: Stripe.Event;
  try {
    event = Stripe.webhooks.constructEvent(delivery.payload, delivery.signature, secret);
  } catch (error) {
    hive.logger.warn({ err: error }, 'refused a Stripe webhook delivery whose signature does not verify');
    throw hiveError(400, 'The Stripe-Signature header does not verify.');
  }
  const outcome = await applyEvent(hive, event);
  hive.logger.info({ stripeEvent: event.id, type: event.type, outcome }, 'Stripe webhook');
  return { received: true, type: event.type, outcome };
}

async function applyEvent(hive: Pick<HiveServices, 'db' | 'logger'>, event: Stripe.Event): Promise<StripeEventOutcome> {
  switch (event.type) {
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded':
      return creditPaidSession(hive, event.data.object);
    case 'charge.refunded':
      return takeBackRefund(hive, event.data.object);
    default:
      return 'ignored';
  }
}

/** A paid session credits its amount_total once: the top-up row and the ledger row both refuse a second credit. */
async function creditPaidSession(hive: Pick<HiveServices, 'db' | 'logger'>, session: Stripe.Checkout.Session): Promise<StripeEventOutcome> {
  const orgId = session.metadata?.org_id ?? session.client_reference_id;
  if (session.payment_status !== 'paid' || !orgId) return 'ignored';
  if (session.currency !== 'usd' || session.amount_total === null || session.amount_total <= 0) {
    hive.logger.warn({ session: session.id, currency: session.currency, amount: session.amount_total }, 'a paid checkout session without a USD amount credits nothing');
    return 'ignored';
  }
  const amountMicros = BigInt(session.amount_total) * MICROS_PER_CENT;
  const paymentIntent = typeof session.payment_intent === 'string' ? session.payment_intent : (session.payment_intent?.id ?? null);
  try {
    return await withTransaction(hive.db, async (client) => {
      const topUp = await repo.markTopUpCredited(client, { sessionId: session.id, orgId, amountMicros, paymentIntent });
      if (!topUp) return 'already_credited';
      await repo.creditWallet(client, { orgId: topUp.org_id, amountMicros, kind: 'topup', reference: session.id });
      return 'credited';
    });
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === '23505') return 'already_credited';
    if (code === '23503') return 'ignored'; // no such organisation (any more)
    throw error;
  }
}

/**
 * A refund takes back the increase of the charge's amount_refunded over what earlier refunds of
 * this top-up took (so a redelivery, or an older refund's event arriving late, takes nothing),
 * at most what the top-up credited and what the wallet still holds.
 */
async function takeBackRefund(hive: Pick<HiveServices, 'db'>, charge: Stripe.Charge): Promise<StripeEventOutcome> {
  const paymentIntent = typeof charge.payment_intent === 'string' ? charge.payment_intent : charge.payment_intent?.id;
  if (!paymentIntent || charge.currency !== 'usd') return 'ignored';
  const refundId = charge.refunds?.data[0]?.id ?? `${charge.id}:${charge.amount_refunded}`;
  try {
    return await withTransaction(hive.db, async (client) => {
      const topUp = await repo.creditedTopUpForUpdate(client, paymentIntent);
      if (!topUp) return 'ignored';
      const credited = BigInt(topUp.credited_micros ?? topUp.amount_micros);
      const refundedTotal = BigInt(charge.amount_refunded) * MICROS_PER_CENT;
      const total = refundedTotal < credited ? refundedTotal : credited;
      const increase = total - BigInt(topUp.refunded_micros);
      if (increase <= 0n) return 'already_refunded';
      await repo.takeBack(client, { orgId: topUp.org_id, amountMicros: increase, kind: 'refund', reference: refundId });
      await repo.setRefunded(client, topUp.session_id, total);
      return 'refunded';
    });
  } catch (error) {
    if ((error as { code?: string }).code === '23505') return 'already_refunded';
    throw error;
  }
}
