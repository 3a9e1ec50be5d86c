import type { CustomerRow } from '../customers/repository.js';
import { ServiceError } from '../errors.js';
import { microsToUsd } from '../money.js';
import type { GatewayServices } from '../composition/gateway.js';
import type { GrantHold } from './grants.js';
import { authorize, billableAmount, release, settle, StaleCredentials, type Hold, type Settlement, type SettlementEvent, type SettleResult } from './meter.js';

/**
 * One metered call from reservation to settlement: reserve `maxCostMicros`, run the upstream call,
 * then charge what it really cost, record its usage and count its tokens against the
 * token-per-minute layers. A failed call gives its whole reservation back.
 */
export interface MeteredCall {
  developerId: string;
  /** Whose wallet pays (unless a prepaid customer does): the caller, or a linked account's parent. */
  payerAccountId: string;
  customer: CustomerRow | null;
  /** X-Svc-Billable-Amount, in micro-dollars, when the caller set it for this call. */
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

/** A call's reservation: a hold in PostgreSQL, or a share of its payer's quota grant in this process. */
export type MeteredHold = Hold | GrantHold;

type MeteringPlatform = Pick<GatewayServices, 'db' | 'config' | 'meteringTimings' | 'grants'>;

/** What a settled call was charged. */
export interface SettledCharge {
  deductedMicros: number;
  balanceAfterMicros: number | null;
}

export interface MeteredResult<T> extends SettledCharge {
  result: T;
}

/**
 * A metered call whose upstream answer is in hand while its charge is still being recorded, so the
 * caller can go on with the answer meanwhile. `settled` must be awaited (or caught): it rejects when
 * the charge could not be recorded, and the caller's own answer waits for it as it would have.
 */
export interface StartedCall<T> {
  result: T;
  settled: Promise<SettledCharge>;
}

/** X-Svc-Wallet-Deducted and X-Svc-Wallet-Balance (USD) after a settled call. */
export function walletHeaders(settled: { deductedMicros: number; balanceAfterMicros: number | null }): Record<string, string> {
  const headers: Record<string, string> = { 'x-svc-wallet-deducted': String(microsToUsd(settled.deductedMicros)) };
  if (settled.balanceAfterMicros !== null) headers['x-svc-wallet-balance'] = String(microsToUsd(settled.balanceAfterMicros));
  return headers;
}

export interface MeteredCallOptions<T> {
  idempotencyKey?: string;
  /** The call's own events, committed with its charge (see Settlement.events). */
  events?: (outcome: UpstreamOutcome<T>) => SettlementEvent[];
}

export async function runMeteredCall<T>(
  platform: MeteringPlatform & Pick<GatewayServices, 'limiter'>,
  call: MeteredCall,
  maxCostMicros: number,
  execute: () => Promise<UpstreamOutcome<T>>,
  options: MeteredCallOptions<T> = {},
): Promise<MeteredResult<T>> {
  const started = await startMeteredCall(platform, call, maxCostMicros, execute, options);
  return { result: started.result, ...(await started.settled) };
}

/** runMeteredCall, returning as soon as the upstream call answered: its settlement runs on (see StartedCall). */
export async function startMeteredCall<T>(
  platform: MeteringPlatform & Pick<GatewayServices, 'limiter'>,
  call: MeteredCall,
  maxCostMicros: number,
  execute: () => Promise<UpstreamOutcome<T>>,
  options: MeteredCallOptions<T> = {},
): Promise<StartedCall<T>> {
  // A settlement under an idempotency key (a batch line) must meet its earlier attempts in PostgreSQL.
  const { hold, call: current } = await authorizeCall(platform, call, maxCostMicros, { grant: !options.idempotencyKey });
  call = current;
  let outcome: UpstreamOutcome<T>;
  try {
    outcome = await platform.meteringTimings.time('upstream', execute());
  } catch (error) {
    await releaseCall(platform, hold);
    throw error;
  }
  const settled = settleCall(platform, hold, {
    costMicros: outcome.costMicros,
    billableMicros: billableAmount(outcome.costMicros, call.customer, call.billableOverrideMicros),
    model: outcome.model,
    tokensIn: outcome.tokensIn,
    tokensOut: outcome.tokensOut,
    requestId: call.requestId,
    idempotencyKey: options.idempotencyKey ?? null,
    events: options.events?.(outcome) ?? [],
  }).then((charged) => {
    platform.limiter.recordUsage(call.tokenCounterKeys, outcome.tokensIn + outcome.tokensOut);
    return { deductedMicros: charged.deductedMicros, balanceAfterMicros: charged.balanceAfterMicros };
  });
  return { result: outcome.result, settled };
}

/**
 * Reserves a call's maximum cost: against its payer's quota grant when this process holds one that
 * covers it (see QuotaGrants), else in PostgreSQL. A call verified from cache whose generation went
 * stale is verified again from PostgreSQL (a revoked key ends here with its 401, before any
 * upstream call) and reserved under what it finds; the returned call carries the customer as it is now.
 */
export function authorizeCall(platform: MeteringPlatform, call: MeteredCall, maxCostMicros: number, options: { grant: boolean } = { grant: true }): Promise<{ hold: MeteredHold; call: MeteredCall }> {
  const granted = options.grant && call.credentials ? platform.grants.take(call, call.credentials.generation, maxCostMicros) : undefined;
  const reserved: Promise<{ hold: MeteredHold; call: MeteredCall }> = granted ? Promise.resolve({ hold: granted, call }) : reserve(platform, call, maxCostMicros);
  return platform.meteringTimings.time('reserve', reserved);
}

/** Charges a reserved call for what it cost (see settle), timed as the call's settle step. */
export function settleCall(platform: MeteringPlatform, hold: MeteredHold, settlement: Settlement): Promise<SettleResult> {
  const settled = 'grant' in hold ? Promise.resolve(platform.grants.settle(hold, settlement)) : settle(platform.db, platform.config, hold, settlement);
  return platform.meteringTimings.time('settle', settled);
}

/** Gives a call's whole reservation back (its upstream call failed or never ran). */
export async function releaseCall(platform: MeteringPlatform, hold: MeteredHold): Promise<void> {
  if ('grant' in hold) platform.grants.release(hold);
  else await release(platform.db, hold);
}

async function reserve(platform: Pick<GatewayServices, 'db' | 'config'>, call: MeteredCall, maxCostMicros: number): Promise<{ hold: Hold; call: MeteredCall }> {
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

/**
 * Whether the call's payer could pay for anything now: a reservation of one micro-dollar, given
 * back at once. Null when it can; else the refusal (wallet_empty, customer_wallet_empty,
 * customer_budget_exceeded) a metered call would meet. Work that must decide before it spends
 * (a learn pass under on_unfunded) asks this.
 */
export async function payerRefusal(platform: MeteringPlatform, call: MeteredCall): Promise<ServiceError | null> {
  try {
    const { hold } = await authorizeCall(platform, call, 1, { grant: false });
    await releaseCall(platform, hold);
    return null;
  } catch (error) {
    if (error instanceof ServiceError && error.status === 402) return error;
    throw error;
  }
}
