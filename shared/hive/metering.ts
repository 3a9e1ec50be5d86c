import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { hiveError } from './errors.js';
import { debitWallet, walletBalance } from './wallet-repository.js';

/**
 * Metering of the hive's work against the organisation's wallet (wallet.ts), one statement per
 * request on the hot path. Prices are configuration (HIVE_PRICE_*), in micro-dollars:
 *
 * - remember: its price, debited in the remember's own transaction as its last statement; an empty
 *   wallet refuses it with 402 and the write rolls back;
 * - recall: its price plus its query's embedding, debited after the search; never refused (a
 *   recall is a read, and reads work while suspended), so an empty wallet is charged nothing;
 * - embedding of a memory (the worker): per 1,000 tokens the provider counted, never refused.
 *
 * Every other write (update, forget, verify, log, task and trait writes) costs nothing but is
 * refused with 402 while the wallet is empty (requireNotSuspended). A debit takes what is left
 * when it is less than the price, so the balance reaches exactly zero, which is what suspends.
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

/** Charges one remember; 402 when the wallet is empty. Run it last in the remember's transaction. */
export async function chargeRemember(db: Queryable, prices: Prices, orgId: string, memoryId: string): Promise<void> {
  const debited = await debitWallet(db, { orgId, amountMicros: prices.HIVE_PRICE_REMEMBER_MICROS, kind: 'remember', reference: memoryId });
  if (!debited) throw suspendedError(orgId);
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
