import type { HiveServices } from '../../../shared/composition/hive.js';
import { receiveStripeEvent } from '../../../shared/hive/payments.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/** The path of Stripe's webhook; app.ts reads its body raw (the signature is over the exact bytes), before any JSON parser. */
export const STRIPE_WEBHOOK_PATH = '/billing/stripe';

/** Stripe's webhook: the only route that credits the wallet. */
export function billingRoutes(hive: HiveServices): HiveRouteDefinition[] {
  return [
    hiveRoute({
      method: 'post', path: STRIPE_WEBHOOK_PATH, access: 'public',
      summary: "Stripe's webhook, authenticated by its Stripe-Signature header (400 when it does not verify): a paid checkout credits the wallet once, a refund takes back what it returned",
      handle: async ({ req, res }) => {
        res.json(await receiveStripeEvent(hive, { payload: req.body, signature: req.get('stripe-signature') }));
      },
    }),
  ];
}
