import type { Config } from '../config.js';
import type { CustomerRow } from '../customers/repository.js';
import { withTransaction, type Db } from '../db/pool.js';
import { ServiceError, serviceError } from '../errors.js';
import { guardLedger } from './ledger-guard.js';
import { recordEvent } from '../events/outbox.js';
import { microsToUsd, usdToMicros } from '../money.js';
import * as repo from './repository.js';

/**
 * The one billing API of a metered call: `authorize` reserves the call's maximum possible cost
 * before the upstream call, `settle` charges the actual cost afterwards (releasing the rest), and
 * `release` gives the whole reservation back when the call did not happen. A wallet is never
 * overdrawn and a monthly budget never overshot, however many calls run at once.
 */
export interface Hold {
  id: string;
  developerId: string;
  customerId: string | null;
  payer: repo.Payer;
  amountMicros: number;
  budgetMonth: string | null;
}

export interface AuthorizeRequest {
  developerId: string;
  customer: Pick<CustomerRow, 'id' | 'monthly_budget_micros'> | null;
  /** The most the call can cost (e.g. prompt tokens plus max_tokens at the model's prices). */
  maxCostMicros: number;
  requestId?: string | null;
}

/** A reservation not settled within this time is released by the hold sweep. */
const HOLD_TTL_SECONDS = 15 * 60;

export async function authorize(db: Db, request: AuthorizeRequest): Promise<Hold> {
  const { developerId, customer, maxCostMicros } = request;
  if (!Number.isSafeInteger(maxCostMicros) || maxCostMicros < 0) throw new RangeError(`maxCostMicros must be a non-negative integer: ${maxCostMicros}`);
  const outcome = await guardLedger(() =>
    withTransaction(db, async (tx): Promise<Hold | { budgetExceededIn: string }> => {
      let budgetMonth: string | null = null;
      if (customer && customer.monthly_budget_micros !== null) {
        const budget = await repo.reserveOnBudget(tx, customer.id, Number(customer.monthly_budget_micros), maxCostMicros);
        if (!budget.reserved) return { budgetExceededIn: budget.month };
        budgetMonth = budget.month;
      }
      const payer: repo.Payer = customer && (await repo.customerWalletExists(tx, customer.id)) ? 'customer' : 'developer';
      if (!(await repo.reserveOnWallet(tx, payer, payer === 'customer' ? customer!.id : developerId, maxCostMicros))) {
        // Throwing rolls back the budget reservation made above.
        throw serviceError(payer === 'customer' ? 'customer_wallet_empty' : 'wallet_empty');
      }
      const hold = await repo.insertHold(tx, {
        developerId,
        customerId: customer?.id ?? null,
        payer,
        amountMicros: maxCostMicros,
        budgetMonth,
        requestId: request.requestId ?? null,
        ttlSeconds: HOLD_TTL_SECONDS,
      });
      return toHold(hold);
    }),
  );
  // The event is written after the refused transaction has released its locks (never inside it).
  if ('budgetExceededIn' in outcome) throw await budgetExceeded(db, developerId, customer!, outcome.budgetExceededIn);
  return outcome;
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
}

export interface SettleResult {
  /** False when this hold (or this idempotency key) was already settled: nothing was charged again. */
  charged: boolean;
  deductedMicros: number;
  balanceAfterMicros: number | null;
}

export async function settle(db: Db, config: Pick<Config, 'WALLET_LOW_THRESHOLD_USD'>, hold: Hold, settlement: Settlement): Promise<SettleResult> {
  // A wallet is never charged more than was reserved for the call.
  const cost = Math.min(Math.max(0, Math.round(settlement.costMicros)), hold.amountMicros);
  return guardLedger(() =>
    withTransaction(db, async (tx) => {
      const open = await repo.finishHold(tx, hold.id, 'settled');
      if (!open) return { charged: false, deductedMicros: 0, balanceAfterMicros: null };
      const recorded = await repo.insertUsageRecord(tx, {
        developerId: hold.developerId,
        customerId: hold.customerId,
        holdId: hold.id,
        requestId: settlement.requestId ?? null,
        idempotencyKey: settlement.idempotencyKey ?? null,
        model: settlement.model,
        tokensIn: settlement.tokensIn,
        tokensOut: settlement.tokensOut,
        costMicros: cost,
        billableMicros: Math.max(0, Math.round(settlement.billableMicros)),
      });
      // The same idempotency key was settled by an earlier hold: give this reservation back whole.
      const charge = recorded ? cost : 0;
      const ownerId = hold.payer === 'customer' ? hold.customerId! : hold.developerId;
      const balance = await repo.chargeWallet(tx, hold.payer, ownerId, hold.amountMicros, charge, settlement.requestId ?? null);
      if (hold.budgetMonth) await repo.settleBudget(tx, hold.customerId!, hold.budgetMonth, hold.amountMicros, charge);
      await recordThresholdEvents(tx, config, hold, balance);
      return { charged: recorded, deductedMicros: charge, balanceAfterMicros: balance.after };
    }),
  );
}

/** Gives a reservation back whole (the upstream call failed or never ran). Safe to call twice. */
export async function release(db: Db, hold: Hold): Promise<void> {
  await guardLedger(() =>
    withTransaction(db, async (tx) => {
      if (!(await repo.finishHold(tx, hold.id, 'released'))) return;
      const ownerId = hold.payer === 'customer' ? hold.customerId! : hold.developerId;
      await repo.chargeWallet(tx, hold.payer, ownerId, hold.amountMicros, 0, null);
      if (hold.budgetMonth) await repo.settleBudget(tx, hold.customerId!, hold.budgetMonth, hold.amountMicros, 0);
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

async function budgetExceeded(db: Db, developerId: string, customer: Pick<CustomerRow, 'id' | 'monthly_budget_micros'>, month: string): Promise<ServiceError> {
  // Once per customer and month, however many calls are refused.
  await guardLedger(() => withTransaction(db, async (tx) => {
    if (await repo.markBudgetExceededNotified(tx, customer.id, month)) {
      await recordEvent(tx, developerId, 'customer.budget_exceeded', {
        customer_id: customer.id,
        month,
        monthly_budget_usd: microsToUsd(customer.monthly_budget_micros!),
      });
    }
  }));
  return serviceError('customer_budget_exceeded');
}

/** wallet.low when a balance falls below the threshold, wallet.empty when it reaches zero: once per crossing. */
async function recordThresholdEvents(
  tx: Parameters<typeof recordEvent>[0],
  config: Pick<Config, 'WALLET_LOW_THRESHOLD_USD'>,
  hold: Hold,
  balance: { before: number; after: number },
): Promise<void> {
  const wallet = { owner: hold.payer, ...(hold.payer === 'customer' ? { customer_id: hold.customerId } : {}), balance_usd: microsToUsd(balance.after) };
  const low = usdToMicros(config.WALLET_LOW_THRESHOLD_USD);
  if (balance.before >= low && balance.after < low && balance.after > 0) await recordEvent(tx, hold.developerId, 'wallet.low', { wallet, threshold_usd: config.WALLET_LOW_THRESHOLD_USD });
  if (balance.before > 0 && balance.after === 0) await recordEvent(tx, hold.developerId, 'wallet.empty', { wallet });
}

function toHold(row: repo.HoldRow): Hold {
  return {
    id: row.id,
    developerId: row.developer_id,
    customerId: row.customer_id,
    payer: row.payer,
    amountMicros: Number(row.amount_micros),
    budgetMonth: row.budget_month,
  };
}
