import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { hiveError } from './errors.js';
import { debitWallet, walletBalance } from './wallet-repository.js';

/**
 * Metering of the hive's work against the organisation's wallet (wallet.ts). Prices are
 * configuration (HIVE_PRICE_*), in micro-dollars:
 *
 * - remember: refused with 402 before it writes anything when the wallet is empty
 *   (requireNotSuspended, one primary-key read, no lock); otherwise it writes and commits without
 *   touching the wallet, and its price is debited after the commit;
 * - recall: its price plus its query's embedding, debited beside the search; never refused (a
 *   recall is a read, and reads work while suspended), so an empty wallet is charged nothing;
 * - embedding of a memory (the worker): per 1,000 tokens the provider counted, never refused.
 *
 * Debits go through the pool's group commit (wallet-repository.ts debitWallet): concurrent ones
 * leave together as one statement that locks each wallet row once, for that statement only, so no
 * request holds the row beyond one statement. Every other write (update, forget, verify, log,
 * task and trait writes) costs nothing but is refused with 402 while the wallet is empty
 * (requireNotSuspended). A debit takes what is left when it is less than the price, so the balance
 * reaches exactly zero, which is what suspends; a burst of remembers that all found money left
 * may therefore be served while the last of them take what is left, or nothing.
 */
type Prices = Pick<Config, 'HIVE_PRICE_REMEMBER_MICROS' | 'HIVE_PRICE_RECALL_MICROS' | 'HIVE_PRICE_EMBED_MICROS_PER_1K_TOKENS'>;

/** The message of every 402: what is refused, why, and what still works. */
export function suspendedError(orgId: string) {
  return hiveError(402, `Organisation ${orgId} is suspended: its wallet is empty. An admin can top it up from the dashboard; reads and export still work.`);
}

/** 402 while the organisation's wallet is empty (or it has none). One primary-key read. */
export async function requireNotSuspended(db: Queryable, orgId: string): Promise<void> {
  const balance = await walletBalance(db, orgId);
  if (!balance) throw suspendedError(orgId);
}

/**
 * Charges one remember, after its write committed (so it never holds the wallet's row while
 * writing). Never refused: the wallet was checked before the write (requireNotSuspended), and a
 * wallet emptied since by concurrent work gives what is left, or nothing.
 */
export async function chargeRemember(db: Queryable, prices: Prices, orgId: string, memoryId: string): Promise<void> {
  await debitWallet(db, { orgId, amountMicros: prices.HIVE_PRICE_REMEMBER_MICROS, kind: 'remember', reference: memoryId });
}

/** Charges one recall and the embedding of its query (`tokens`, 0 when it could not be embedded). */
export async function chargeRecall(db: Queryable, prices: Prices, orgId: string, tokens: number): Promise<void> {
  await debitWallet(db, { orgId, amountMicros: prices.HIVE_PRICE_RECALL_MICROS + embeddingCost(prices, tokens), kind: 'recall', reference: null });
}

/** Charges the embedding of one memory version (`tokens` as the provider counted them). */
export async function chargeEmbedding(db: Queryable, prices: Prices, orgId: string, memoryId: string, tokens: number): Promise<void> {
  await debitWallet(db, { orgId, amountMicros: embeddingCost(prices, tokens), kind: 'embedding', reference: memoryId });
}

/** Tokens at the per-1,000 price, rounded up to the micro-dollar. */
export function embeddingCost(prices: Prices, tokens: number): number {
  return Math.ceil((Math.max(0, tokens) * prices.HIVE_PRICE_EMBED_MICROS_PER_1K_TOKENS) / 1_000);
}
