import type { CustomerRow } from '../customers/repository.js';
import type { Platform } from '../platform/platform.js';
import { authorize, billableAmount, release, settle } from './meter.js';

/**
 * One metered call from reservation to settlement: reserve `maxCostMicros`, run the upstream call,
 * then charge what it really cost, record its usage and count its tokens against the
 * token-per-minute layers. A failed call gives its whole reservation back.
 */
export interface MeteredCall {
  developerId: string;
  payerAccountId: string;
  customer: CustomerRow | null;
  billableOverrideMicros: number | undefined;
  tokenCounterKeys: string[];
  requestId: string;
}

export interface UpstreamOutcome<T> {
  result: T;
  /** The concrete model that served the call (the metered id). */
  model: string;
  costMicros: number;
  tokensIn: number;
  tokensOut: number;
}

export interface MeteredResult<T> {
  result: T;
  deductedMicros: number;
  balanceAfterMicros: number | null;
}

export async function runMeteredCall<T>(
  platform: Pick<Platform, 'db' | 'config' | 'limiter'>,
  call: MeteredCall,
  maxCostMicros: number,
  execute: () => Promise<UpstreamOutcome<T>>,
  options: { idempotencyKey?: string } = {},
): Promise<MeteredResult<T>> {
  const hold = await authorize(platform.db, {
    developerId: call.developerId,
    payerAccountId: call.payerAccountId,
    customer: call.customer,
    maxCostMicros,
    requestId: call.requestId,
  });
  let outcome: UpstreamOutcome<T>;
  try {
    outcome = await execute();
  } catch (error) {
    await release(platform.db, hold);
    throw error;
  }
  const settled = await settle(platform.db, platform.config, hold, {
    costMicros: outcome.costMicros,
    billableMicros: billableAmount(outcome.costMicros, call.customer, call.billableOverrideMicros),
    model: outcome.model,
    tokensIn: outcome.tokensIn,
    tokensOut: outcome.tokensOut,
    requestId: call.requestId,
    idempotencyKey: options.idempotencyKey ?? null,
  });
  await platform.limiter.recordUsage(call.tokenCounterKeys, outcome.tokensIn + outcome.tokensOut);
  return { result: outcome.result, deductedMicros: settled.deductedMicros, balanceAfterMicros: settled.balanceAfterMicros };
}
