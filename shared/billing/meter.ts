import type { Config } from '../config.js';
import type { CustomerRow } from '../customers/repository.js';
import type { Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import type { EventType } from '../events/types.js';
import { newId } from '../ids.js';
import { usdToMicros } from '../money.js';
import { guardLedger } from './ledger-guard.js';
import * as repo from './repository.js';

/**
 * The one billing API of a metered call: `authorize` reserves the call's maximum possible cost
 * before the upstream call, `settle` charges the actual cost afterwards (releasing the rest), and
 * `release` gives the whole reservation back when the call did not happen. A wallet is never
 * overdrawn and a monthly budget never overshot, however many calls run at once: each step is
 * one guarded statement (migration 008), so it is atomic and holds the wallet row for microseconds.
 */
export interface Hold {
  id: string;
  developerId: string;
  customerId: string | null;
  payer: repo.Payer;
  amountMicros: number;
  /** How this hold's statements commit (see CommitMode); its settlement or release follows its reservation. */
  commit: repo.CommitMode;
}

export interface AuthorizeRequest {
  developerId: string;
  /** Whose wallet pays when no prepaid customer does: the caller, or a linked account's parent. Default: developerId. */
  payerAccountId?: string;
  customer: Pick<CustomerRow, 'id' | 'monthly_budget_micros'> | null;
  /** The most the call can cost (e.g. prompt tokens plus max_tokens at the model's prices). */
  maxCostMicros: number;
  requestId?: string | null;
  /**
   * The auth generation the caller's key and customer were verified under when they came from a
   * cache (see CredentialCache); the reservation is refused with StaleCredentials when it is no
   * longer current. Omit it when they were read from PostgreSQL for this call.
   */
  credentialGeneration?: number | null;
  /** Default 'durable'; metered calls pass the configured METERING_COMMIT. */
  commit?: repo.CommitMode;
}

/** The cached verification of a call is out of date: verify again from PostgreSQL, then authorize. */
export class StaleCredentials extends Error {
  constructor() {
    super('the cached key or customer changed since it was verified');
  }
}

/** A reservation not settled within this time is released by the hold sweep. */
export const HOLD_TTL_SECONDS = 15 * 60;

const REFUSALS = {
  budget_exceeded: 'customer_budget_exceeded',
  wallet_empty: 'wallet_empty',
  customer_wallet_empty: 'customer_wallet_empty',
} as const;

export async function authorize(db: Db, request: AuthorizeRequest): Promise<Hold> {
  const { developerId, customer, maxCostMicros } = request;
  if (!Number.isSafeInteger(maxCostMicros) || maxCostMicros < 0) throw new RangeError(`maxCostMicros must be a non-negative integer: ${maxCostMicros}`);
  const result = await guardLedger(() =>
    repo.authorizeHold(db, {
      commit: request.commit ?? 'durable',
      generation: request.credentialGeneration ?? null,
      developerId,
      payerAccountId: request.payerAccountId ?? developerId,
      customerId: customer?.id ?? null,
      budgetMicros: customer?.monthly_budget_micros == null ? null : Number(customer.monthly_budget_micros),
      amountMicros: maxCostMicros,
      requestId: request.requestId ?? null,
      ttlSeconds: HOLD_TTL_SECONDS,
      eventId: newId('evt_'),
    }),
  );
  if (result.outcome === 'stale_credentials') throw new StaleCredentials();
  if (result.outcome !== 'ok') throw serviceError(REFUSALS[result.outcome]);
  return { id: result.hold_id!, developerId, customerId: customer?.id ?? null, payer: result.payer!, amountMicros: maxCostMicros, commit: request.commit ?? 'durable' };
}

export interface Settlement {
  /** Raw provider cost of the call; charged up to the reserved amount. */
  costMicros: number;
  /** What the developer bills its customer for the call (defaults: see billableAmount). */
  billableMicros: number;
  model: string;
  tokensIn: number;
  tokensOut: number;
  requestId?: string | null;
  /** Makes settlement idempotent across retries, e.g. `batch:<id>:<custom_id>`. */
  idempotencyKey?: string | null;
  /** Events of the call itself, recorded in the same statement as the charge and only when it charged. */
  events?: SettlementEvent[];
}

export interface SettlementEvent {
  type: EventType;
  data: Record<string, unknown>;
}

export interface SettleResult {
  /** False when this hold (or this idempotency key) was already settled: nothing was charged again. */
  charged: boolean;
  deductedMicros: number;
  balanceAfterMicros: number | null;
}

export async function settle(db: Db, config: Pick<Config, 'WALLET_LOW_THRESHOLD_USD'>, hold: Hold, settlement: Settlement): Promise<SettleResult> {
  const result = await guardLedger(() =>
    repo.finishHold(db, {
      commit: hold.commit,
      holdId: hold.id,
      developerId: hold.developerId,
      events: (settlement.events ?? []).map((event) => ({ id: newId('evt_'), ...event })),
      settle: true,
      costMicros: Math.round(settlement.costMicros),
      billableMicros: Math.round(settlement.billableMicros),
      model: settlement.model,
      tokensIn: settlement.tokensIn,
      tokensOut: settlement.tokensOut,
      requestId: settlement.requestId ?? null,
      idempotencyKey: settlement.idempotencyKey ?? null,
      lowThresholdMicros: usdToMicros(config.WALLET_LOW_THRESHOLD_USD),
      lowEventId: newId('evt_'),
      emptyEventId: newId('evt_'),
    }),
  );
  return {
    charged: result.charged,
    deductedMicros: Number(result.deducted_micros),
    balanceAfterMicros: result.balance_after_micros === null ? null : Number(result.balance_after_micros),
  };
}

/** Gives a reservation back whole (the upstream call failed or never ran). Safe to call twice. */
export async function release(db: Db, hold: Pick<Hold, 'id'> & Partial<Pick<Hold, 'commit'>>): Promise<void> {
  await guardLedger(() =>
    repo.finishHold(db, {
      commit: hold.commit ?? 'durable',
      holdId: hold.id,
      developerId: null,
      events: [],
      settle: false,
      costMicros: 0,
      billableMicros: 0,
      model: null,
      tokensIn: 0,
      tokensOut: 0,
      requestId: null,
      idempotencyKey: null,
      lowThresholdMicros: 0,
      lowEventId: newId('evt_'),
      emptyEventId: newId('evt_'),
    }),
  );
}

/**
 * What the developer bills for a call: the per-call X-Svc-Billable-Amount when sent, else the
 * customer's fixed default amount, else its markup over the raw cost, else the raw cost.
 */
export function billableAmount(
  costMicros: number,
  customer: Pick<CustomerRow, 'default_billable_markup_pct' | 'default_billable_amount_micros'> | null,
  overrideMicros?: number,
): number {
  if (overrideMicros !== undefined) return overrideMicros;
  if (customer?.default_billable_amount_micros != null) return Number(customer.default_billable_amount_micros);
  if (customer?.default_billable_markup_pct != null) return Math.round(costMicros * (1 + Number(customer.default_billable_markup_pct) / 100));
  return costMicros;
}

/**
 * Releases reservations whose call never settled (its API process died mid-call), so no wallet
 * stays locked. Runs every minute from the worker; a hold settled meanwhile is left alone.
 */
export async function releaseExpiredHolds(db: Db, batchSize = 500): Promise<number> {
  let released = 0;
  for (;;) {
    const ids = await repo.expiredHoldIds(db, batchSize);
    for (const id of ids) await release(db, { id });
    released += ids.length;
    if (ids.length < batchSize) return released;
  }
}
