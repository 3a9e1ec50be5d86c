import { randomBytes } from 'node:crypto';
import { withTransaction, type Db, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { microsToUsd } from '../money.js';
import { withdrawFromWallet } from './accounts.js';
import { hashKey } from './keys.js';
import * as repo from './repository.js';

/**
 * Wallet-backed vouchers. Minting reserves the value: it leaves the developer's wallet at once
 * (ledger kind voucher_reserve), so a voucher can never be redeemed against money that is gone.
 * Redemption is single use and credits a new provisioned account (ledger kind voucher_redeem).
 * A code is `vch_` and 32 lowercase hex characters (16 random bytes); only its SHA-256 is kept.
 */
const CODE_SHAPE = /^vch_[0-9a-f]{32}$/;

export async function createVoucher(
  db: Db,
  developerId: string,
  amountMicros: number,
): Promise<{ voucher: repo.VoucherRow; code: string }> {
  if (!Number.isSafeInteger(amountMicros) || amountMicros <= 0) {
    throw serviceError('invalid_request', { message: 'A voucher is worth at least 0.000001 USD.', param: 'amount_usd' });
  }
  const code = `vch_${randomBytes(16).toString('hex')}`;
  const voucher = await withTransaction(db, async (tx) => {
    const developer = await repo.findAccount(tx, developerId);
    if (!developer || developer.owner_type !== 'developer' || developer.status !== 'active') throw serviceError('account_not_found');
    const row = await repo.insertVoucher(tx, { accountId: developerId, hash: hashKey(code), displayPrefix: code.slice(0, 12), amountMicros });
    await withdrawFromWallet(
      tx,
      { accountId: developerId, amountMicros, kind: 'voucher_reserve', reference: row.id, note: 'voucher minted' },
      `The developer wallet cannot back a ${microsToUsd(amountMicros)} USD voucher.`,
    );
    return row;
  });
  return { voucher, code };
}

export function listVouchers(db: Db, developerId: string): Promise<repo.VoucherRow[]> {
  return repo.listVouchers(db, developerId);
}

/**
 * Redeems a developer's voucher into a new account's wallet, inside the caller's transaction.
 * Unknown, already used and another developer's codes are refused alike, so codes cannot be probed.
 */
export async function redeemVoucher(tx: Queryable, developerId: string, code: string, accountId: string): Promise<{ amountMicros: number }> {
  const voucher = CODE_SHAPE.test(code) ? await repo.lockRedeemableVoucher(tx, developerId, hashKey(code)) : undefined;
  if (!voucher) {
    throw serviceError('invalid_request', { message: 'voucher_code is not an unused voucher of this developer.', param: 'voucher_code' });
  }
  await repo.markVoucherRedeemed(tx, voucher.id, accountId);
  const amountMicros = Number(voucher.amount_micros);
  await repo.postLedgerEntry(tx, { accountId, amountMicros, kind: 'voucher_redeem', reference: voucher.id, note: 'voucher redeemed' });
  return { amountMicros };
}
