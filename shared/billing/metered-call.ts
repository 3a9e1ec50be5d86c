import type { CustomerRow } from '../customers/repository.js';
import type { Platform } from '../platform/platform.js';
import { authorize, billableAmount, release, settle, StaleCredentials, type Hold, type Settlement, type SettlementEvent, type SettleResult } from './meter.js';

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
  /** Present when the key and customer came from the process's CredentialCache rather than PostgreSQL. */
  credentials?: CachedCredentials;
}

export interface CachedCredentials {
  generation: number;
  /** Verifies the key and customer again from PostgreSQL (throwing their auth codes) and returns the customer as it is now. */
  reverify(): Promise<CustomerRow | null>;
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
  platform: Pick<Platform, 'db' | 'config' | 'limiter' | 'meteringTimings'>,
  call: MeteredCall,
  maxCostMicros: number,
  execute: () => Promise<UpstreamOutcome<T>>,
  options: {
    idempotencyKey?: string;
    /** The call's own events, committed with its charge (see Settlement.events). */
    events?: (outcome: UpstreamOutcome<T>) => SettlementEvent[];
  } = {},
): Promise<MeteredResult<T>> {
  const { hold, call: current } = await authorizeCall(platform, call, maxCostMicros);
  call = current;
  let outcome: UpstreamOutcome<T>;
  try {
    outcome = await execute();
  } catch (error) {
    await release(platform.db, hold);
    throw error;
  }
  const settled = await settleCall(platform, hold, {
    costMicros: outcome.costMicros,
    billableMicros: billableAmount(outcome.costMicros, call.customer, call.billableOverrideMicros),
    model: outcome.model,
    tokensIn: outcome.tokensIn,
    tokensOut: outcome.tokensOut,
    requestId: call.requestId,
    idempotencyKey: options.idempotencyKey ?? null,
    events: options.events?.(outcome) ?? [],
  });
  platform.limiter.recordUsage(call.tokenCounterKeys, outcome.tokensIn + outcome.tokensOut);
  return { result: outcome.result, deductedMicros: settled.deductedMicros, balanceAfterMicros: settled.balanceAfterMicros };
}

/**
 * Reserves a call's maximum cost. A call verified from cache whose generation went stale is
 * verified again from PostgreSQL (a revoked key ends here with its 401, before any upstream call)
 * and reserved under what it finds; the returned call carries the customer as it is now.
 */
export function authorizeCall(platform: Pick<Platform, 'db' | 'config' | 'meteringTimings'>, call: MeteredCall, maxCostMicros: number): Promise<{ hold: Hold; call: MeteredCall }> {
  return platform.meteringTimings.time('reserve', reserve(platform, call, maxCostMicros));
}

/** Charges a reserved call for what it cost (see settle), timed as the call's settle step. */
export function settleCall(platform: Pick<Platform, 'db' | 'config' | 'meteringTimings'>, hold: Hold, settlement: Settlement): Promise<SettleResult> {
  return platform.meteringTimings.time('settle', settle(platform.db, platform.config, hold, settlement));
}

async function reserve(platform: Pick<Platform, 'db' | 'config'>, call: MeteredCall, maxCostMicros: number): Promise<{ hold: Hold; call: MeteredCall }> {
  const request = { developerId: call.developerId, payerAccountId: call.payerAccountId, maxCostMicros, requestId: call.requestId, commit: platform.config.METERING_COMMIT };
  try {
    return { hold: await authorize(platform.db, { ...request, customer: call.customer, credentialGeneration: call.credentials?.generation ?? null }), call };
  } catch (error) {
    if (!(error instanceof StaleCredentials) || !call.credentials) throw error;
  }
  const customer = await call.credentials.reverify();
  const fresh: MeteredCall = { ...call, customer, credentials: undefined };
  return { hold: await authorize(platform.db, { ...request, customer }), call: fresh };
}
