import { z } from 'zod';
import type { Config } from '../config.js';
import { getCustomer } from '../customers/customers.js';
import { withTransaction, type Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { microsToUsd, usdToMicros } from '../money.js';
import { withErrorCode } from '../validation.js';
import { guardLedger } from './ledger-guard.js';
import * as repo from './repository.js';

/**
 * A customer's prepaid wallet is funded from its developer's wallet: a top-up or a positive
 * adjust moves money in, a negative adjust moves it back. Both sides get a ledger row in the
 * same transaction, so the platform never creates money and never loses it.
 */
/** A top-up or adjust: the amount in USD, nonzero (a top-up positive); the cap is configuration, checked below. */
export const walletAmountBody = z.strictObject({
  amount_usd: withErrorCode(z.number().finite().refine((amount) => amount !== 0, 'must not be zero'), 'invalid_amount'),
});

export type WalletAmount = z.output<typeof walletAmountBody>;

export async function topUpCustomerWallet(db: Db, config: Pick<Config, 'WALLET_ADJUST_CAP_USD'>, developerId: string, customerRef: string, input: WalletAmount) {
  const amount = withinCap(input.amount_usd, config.WALLET_ADJUST_CAP_USD);
  if (amount <= 0) throw serviceError('invalid_amount', { param: 'amount_usd', message: 'A top-up amount must be positive.' });
  return move(db, developerId, customerRef, usdToMicros(amount), 'topup');
}

export async function adjustCustomerWallet(db: Db, config: Pick<Config, 'WALLET_ADJUST_CAP_USD'>, developerId: string, customerRef: string, input: WalletAmount) {
  return move(db, developerId, customerRef, usdToMicros(withinCap(input.amount_usd, config.WALLET_ADJUST_CAP_USD)), 'adjustment');
}

export async function getCustomerWallet(db: Db, developerId: string, customerRef: string) {
  const customer = await getCustomer(db, developerId, customerRef);
  const wallet = await repo.findCustomerWallet(db, customer.id);
  return formatWallet(customer.id, wallet);
}

async function move(db: Db, developerId: string, customerRef: string, amountMicros: number, kind: string) {
  const customer = await getCustomer(db, developerId, customerRef);
  if (amountMicros === 0) throw serviceError('invalid_amount', { param: 'amount_usd', message: 'The amount rounds to zero micro-dollars.' });
  return guardLedger(() => withTransaction(db, async (tx) => {
    const wallet = await repo.transferToCustomer(tx, developerId, customer.id, amountMicros, kind);
    // Nothing moved: the giving side could not cover it (the statement changed no balance that stays).
    if (!wallet) throw serviceError(amountMicros > 0 ? 'wallet_empty' : 'customer_wallet_empty', { message: amountMicros > 0 ? 'The developer wallet cannot fund this amount.' : "The customer's available balance cannot cover this adjustment." });
    return formatWallet(customer.id, wallet);
  }));
}

/** A non-zero finite number of USD whose magnitude is within the per-call cap. */
function withinCap(amount: number, capUsd: number): number {
  if (Math.abs(amount) > capUsd) throw serviceError('amount_too_large', { param: 'amount_usd', message: `The amount's magnitude is over the per-call cap of ${capUsd} USD.` });
  return amount;
}

function formatWallet(customerId: string, wallet: repo.CustomerWalletRow | undefined) {
  const balance = Number(wallet?.balance_micros ?? 0);
  const reserved = Number(wallet?.reserved_micros ?? 0);
  return {
    object: 'customer_wallet' as const,
    customer_id: customerId,
    prepaid: wallet !== undefined,
    balance_usd: microsToUsd(balance),
    available_usd: microsToUsd(balance - reserved),
  };
}
