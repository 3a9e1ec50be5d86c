import { z } from 'zod';
import { pageQuery } from '../pagination.js';

/** What /v1/webhooks reads, parsed by the route builder (spec 1, "Webhooks"). */

export const ENDPOINT_STATUSES = ['active', 'paused', 'disabled_after_failures'] as const;
export const DELIVERY_STATUSES = ['pending', 'retrying', 'succeeded', 'dead', 'replayed'] as const;

/** GET /v1/webhooks: a page, optionally of one status. */
export const endpointListQuery = pageQuery.extend({
  status: z.enum(ENDPOINT_STATUSES, { error: `must be one of ${ENDPOINT_STATUSES.join(', ')}` }).optional(),
});

/** GET /v1/webhooks/:id/deliveries: a page, newest first, optionally of one status. */
export const deliveryListQuery = pageQuery.extend({
  status: z.enum(DELIVERY_STATUSES, { error: `must be one of ${DELIVERY_STATUSES.join(', ')}` }).optional(),
});

export type EndpointListQuery = z.output<typeof endpointListQuery>;
export type DeliveryListQuery = z.output<typeof deliveryListQuery>;
