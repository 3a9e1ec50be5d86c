import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import { hiveError } from './errors.js';
import * as repo from './wallet-repository.js';

/**
 * The organisation's wallet (spec 3): integer micro-dollars with a ledger, funded by card top-ups
 * (payments.ts) and a starting credit at signup, drawn on by metered work (metering.ts). An
 * organisation whose balance is zero is suspended: its writes are refused with 402 until a top-up
 * lands, while its reads and export keep working.
 */

/** Ledger rows readWallet returns, newest first. */
const RECENT_ENTRIES = 20;

export interface WalletView {
  balanceMicros: bigint;
  suspended: boolean;
  entries: Array<{ kind: string; amountMicros: bigint; reference: string | null; createdAt: Date }>;
}

/** The balance, whether the organisation is suspended, and its 20 most recent ledger rows. */
export async function readWallet(db: Queryable, orgId: string): Promise<WalletView> {
  const [balance, entries] = await Promise.all([repo.walletBalance(db, orgId), repo.recentLedger(db, orgId, RECENT_ENTRIES)]);
  const balanceMicros = balance ?? 0n;
  return {
    balanceMicros,
    suspended: balanceMicros === 0n,
    entries: entries.map((entry) => ({ kind: entry.kind, amountMicros: BigInt(entry.amount_micros), reference: entry.reference, createdAt: entry.created_at })),
  };
}

/** A new organisation's wallet, opened with HIVE_SIGNUP_CREDIT_USD, in the signup's transaction. */
export async function openSignupWallet(db: Queryable, config: Pick<Config, 'HIVE_SIGNUP_CREDIT_USD'>, orgId: string): Promise<void> {
  await repo.openWallet(db, orgId, usdToMicros(config.HIVE_SIGNUP_CREDIT_USD));
}

/**
 * A credit the platform's operator makes by hand (`npm run admin -- credit-hive-wallet`): a payment
 * taken outside Stripe, a trial, a test. It is a `topup` in the ledger (migration 030's kinds),
 * lifting a suspension as any top-up does; its reference, `operator <id>` and the note, tells it
 * apart from a Checkout Session and is unique, as a top-up's reference must be.
 */
export async function creditByOperator(db: Queryable, orgId: string, amountMicros: number, note: string | undefined) {
  const reference = `operator ${newId('opc_')}${note ? `: ${note}` : ''}`;
  try {
    const balanceMicros = await repo.creditWallet(db, { orgId, amountMicros: BigInt(amountMicros), kind: 'topup', reference });
    return { balanceMicros, reference };
  } catch (error) {
    if ((error as { code?: string }).code === '23503') throw hiveError(404, `No organisation ${orgId}.`);
    throw error;
  }
}

/** USD at the edge, integer micro-dollars inside (rounded to the micro-dollar). */
export function usdToMicros(usd: number): number {
  return Math.round(usd * 1_000_000);
}
