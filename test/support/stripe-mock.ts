import os from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { startStripeMock, stopChild } from '../../scripts/lib/local-services.js';

/**
 * Stripe, which this machine cannot reach, stood in for by stripe-mock (Stripe's official mock of
 * its API; ensure-deps.sh installs it): one per test file on a port of the system's choosing, so
 * files running in parallel share nothing. Webhook deliveries are signed as Stripe signs them, with
 * the stripe package's own test helper.
 */
export const STRIPE_TEST_KEY = 'sk_test_hiveWallet';
export const STRIPE_WEBHOOK_SECRET = 'whsec_hive_wallet_test';

export interface StripeStandIn {
  /** The hive's configuration for it: HIVE_STRIPE_API_BASE, HIVE_STRIPE_SECRET_KEY, HIVE_STRIPE_WEBHOOK_SECRET. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function startStripeStandIn(): Promise<StripeStandIn> {
  const mock = await startStripeMock({ port: 0, logFile: path.join(os.tmpdir(), `stripe-mock-${process.pid}.log`) });
  return {
    env: { HIVE_STRIPE_API_BASE: mock.apiBase, HIVE_STRIPE_SECRET_KEY: STRIPE_TEST_KEY, HIVE_STRIPE_WEBHOOK_SECRET: STRIPE_WEBHOOK_SECRET },
    close: () => stopChild(mock.process, 5_000),
  };
}

/** A webhook delivery as Stripe makes it: the JSON body and its Stripe-Signature header. */
export function signedDelivery(event: { id: string; type: string; data: { object: Record<string, unknown> } }, secret = STRIPE_WEBHOOK_SECRET) {
  const payload = JSON.stringify({ object: 'event', api_version: Stripe.API_VERSION, created: Math.floor(Date.now() / 1000), livemode: false, ...event });
  return { payload, signature: Stripe.webhooks.generateTestHeaderString({ payload, secret }) };
}

/** checkout.session.completed for `sessionId`, paid (or not) with `amountCents` US cents. */
export function checkoutCompleted(input: { eventId: string; sessionId: string; orgId: string; amountCents: number; paid?: boolean; paymentIntent?: string }) {
  return {
    id: input.eventId,
    type: 'checkout.session.completed',
    data: {
      object: {
        id: input.sessionId,
        object: 'checkout.session',
        mode: 'payment',
        status: 'complete',
        payment_status: input.paid === false ? 'unpaid' : 'paid',
        currency: 'usd',
        amount_total: input.amountCents,
        client_reference_id: input.orgId,
        metadata: { org_id: input.orgId },
        payment_intent: input.paymentIntent ?? `pi_${input.sessionId}`,
      },
    },
  };
}

/** charge.refunded for the charge of `paymentIntent`, `amountRefundedCents` refunded so far in all. */
export function chargeRefunded(input: { eventId: string; paymentIntent: string; refundId: string; amountCents: number; amountRefundedCents: number }) {
  return {
    id: input.eventId,
    type: 'charge.refunded',
    data: {
      object: {
        id: `ch_${input.paymentIntent}`,
        object: 'charge',
        currency: 'usd',
        amount: input.amountCents,
        amount_refunded: input.amountRefundedCents,
        refunded: input.amountRefundedCents >= input.amountCents,
        payment_intent: input.paymentIntent,
        refunds: { object: 'list', data: [{ id: input.refundId, object: 'refund', amount: input.amountRefundedCents }] },
      },
    },
  };
}
