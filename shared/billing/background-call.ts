import { getCustomer } from '../customers/customers.js';
import type { Db } from '../db/pool.js';
import type { MeteredCall } from './metered-call.js';

/**
 * The metered call of work a worker does for a caller who is gone (a vector-store ingest or
 * migration, an assistant run): billed to the payer the request named, or to its customer's
 * prepaid wallet. Such work paces itself (bounded concurrency), so its tokens do not spend the
 * per-minute windows that synchronous calls share.
 */
export async function backgroundCall(db: Db, payer: { developerId: string; payerAccountId: string; customerId: string | null; requestId: string }): Promise<MeteredCall> {
  return {
    developerId: payer.developerId,
    payerAccountId: payer.payerAccountId,
    customer: payer.customerId ? await getCustomer(db, payer.developerId, payer.customerId) : null,
    billableOverrideMicros: undefined,
    tokenCounterKeys: [],
    requestId: payer.requestId,
  };
}
