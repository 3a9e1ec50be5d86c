import type { Queryable } from '../db/pool.js';
import { isUuid } from '../ids.js';
import type { CursorPosition } from '../pagination.js';

/** All SQL of the accounts domain: accounts, wallets and their ledger, ko_ and rsk_ keys, vouchers. */

export type OwnerType = 'developer' | 'api_end_user';
export type Funding = 'standalone' | 'linked';

export interface AccountRow {
  id: string;
  owner_type: OwnerType;
  parent_account_id: string | null;
  email: string;
  username: string | null;
  display_name: string | null;
  funding: Funding;
  status: 'active' | 'closed';
  created_at: Date;
  closed_at: Date | null;
}

export interface AccountWithWalletRow extends AccountRow {
  balance_micros: string;
  spend_micros: string;
}

export interface ApiKeyRow {
  id: string;
  account_id: string;
  display_prefix: string;
  name: string;
  scopes: string[];
  expires_at: Date | null;
  created_at: Date;
}

export interface KeyLookupRow {
  id: string;
  account_id: string;
  key_hash: Buffer;
  scopes: string[];
  expires_at: Date | null;
  account_status: 'active' | 'closed';
  /** The account whose wallet pays for this key's calls: its parent when the account is linked. */
  billing_account_id: string;
  /** Bumped by every change to the account's keys, status or customers (migration 013). */
  auth_generation: string;
}

const ACCOUNT_COLUMNS = 'a.id, a.owner_type, a.parent_account_id, a.email, a.username, a.display_name, a.funding, a.status, a.created_at, a.closed_at';

// Spend is what usage debited from the account's own ledger; a linked account bills its parent and reads 0.
const WALLET_COLUMNS = `
  COALESCE(w.balance_micros, 0)::text AS balance_micros,
  COALESCE((SELECT -SUM(l.amount_micros) FROM wallet_ledger l
            WHERE l.account_id = a.id AND l.kind = 'usage'), 0)::text AS spend_micros`;

export async function insertAccount(
  q: Queryable,
  account: {
    ownerType: OwnerType;
    parentAccountId: string | null;
    email: string;
    username: string | null;
    displayName: string | null;
    passwordHash: string;
    /** Provisioned end users only: the hashed vault password. */
    vaultPasswordHash?: string | null;
    funding: Funding;
  },
): Promise<AccountRow> {
  const { rows } = await q.query<AccountRow>(
    `INSERT INTO accounts AS a (owner_type, parent_account_id, email, username, display_name, password_hash, vault_password_hash, funding)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING ${ACCOUNT_COLUMNS}`,
    [
      account.ownerType,
      account.parentAccountId,
      account.email,
      account.username,
      account.displayName,
      account.passwordHash,
      account.vaultPasswordHash ?? null,
      account.funding,
    ],
  );
  return rows[0]!;
}

/**
 * Locks an active developer's account row until the transaction ends. Every provisioning create of
 * that developer takes this lock first, so the active-account count it reads cannot go stale.
 */
export async function lockActiveDeveloper(q: Queryable, developerId: string): Promise<boolean> {
  const { rowCount } = await q.query(
    `SELECT 1 FROM accounts WHERE id = $1 AND owner_type = 'developer' AND status = 'active' FOR UPDATE`,
    [developerId],
  );
  return rowCount === 1;
}

export async function countActiveChildAccounts(q: Queryable, parentAccountId: string): Promise<number> {
  const { rows } = await q.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM accounts WHERE parent_account_id = $1 AND status = 'active'`,
    [parentAccountId],
  );
  return rows[0]!.count;
}

/** Closes one open account of this parent; undefined when there is none (unknown, foreign or closed). */
export async function closeChildAccount(q: Queryable, parentAccountId: string, accountId: string): Promise<AccountRow | undefined> {
  const { rows } = await q.query<AccountRow>(
    `UPDATE accounts AS a SET status = 'closed', closed_at = now()
     WHERE a.id = $1 AND a.parent_account_id = $2 AND a.status = 'active'
     RETURNING ${ACCOUNT_COLUMNS}`,
    [accountId, parentAccountId],
  );
  return rows[0];
}

export async function deleteApiKeysOfAccount(q: Queryable, accountId: string): Promise<number> {
  const { rowCount } = await q.query('DELETE FROM api_keys WHERE account_id = $1', [accountId]);
  return rowCount ?? 0;
}

export async function findAccount(q: Queryable, accountId: string): Promise<AccountRow | undefined> {
  const { rows } = await q.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a WHERE a.id = $1`, [accountId]);
  return rows[0];
}

export async function insertWallet(q: Queryable, accountId: string): Promise<void> {
  await q.query('INSERT INTO wallets (account_id) VALUES ($1)', [accountId]);
}

/** Moves a balance and writes its ledger row in one statement, so neither can exist without the other. */
export async function postLedgerEntry(
  q: Queryable,
  entry: { accountId: string; amountMicros: number; kind: string; reference?: string | null; note?: string | null },
): Promise<{ balanceAfterMicros: number }> {
  const { rows } = await q.query<{ balance_after_micros: string }>(
    `WITH moved AS (
       UPDATE wallets SET balance_micros = balance_micros + $2, updated_at = now()
       WHERE account_id = $1
       RETURNING account_id, balance_micros)
     INSERT INTO wallet_ledger (account_id, amount_micros, balance_after_micros, kind, reference, note)
     SELECT account_id, $2, balance_micros, $3, $4, $5 FROM moved
     RETURNING balance_after_micros`,
    [entry.accountId, entry.amountMicros, entry.kind, entry.reference ?? null, entry.note ?? null],
  );
  if (!rows[0]) throw new Error(`no wallet for account ${entry.accountId}`);
  return { balanceAfterMicros: Number(rows[0].balance_after_micros) };
}

export async function findAccountWithWallet(q: Queryable, accountId: string): Promise<AccountWithWalletRow | undefined> {
  const { rows } = await q.query<AccountWithWalletRow>(
    `SELECT ${ACCOUNT_COLUMNS}, ${WALLET_COLUMNS}
     FROM accounts a LEFT JOIN wallets w ON w.account_id = a.id
     WHERE a.id = $1`,
    [accountId],
  );
  return rows[0];
}

export async function findChildAccount(q: Queryable, parentAccountId: string, accountId: string): Promise<AccountWithWalletRow | undefined> {
  const { rows } = await q.query<AccountWithWalletRow>(
    `SELECT ${ACCOUNT_COLUMNS}, ${WALLET_COLUMNS}
     FROM accounts a LEFT JOIN wallets w ON w.account_id = a.id
     WHERE a.id = $1 AND a.parent_account_id = $2`,
    [accountId, parentAccountId],
  );
  return rows[0];
}

export async function listChildAccounts(
  q: Queryable,
  parentAccountId: string,
  page: { limit: number; after: CursorPosition | undefined },
): Promise<AccountWithWalletRow[]> {
  const { rows } = await q.query<AccountWithWalletRow>(
    `SELECT ${ACCOUNT_COLUMNS}, ${WALLET_COLUMNS}
     FROM accounts a LEFT JOIN wallets w ON w.account_id = a.id
     WHERE a.parent_account_id = $1
       AND ($2::uuid IS NULL OR (a.created_at, a.id) > (SELECT c.created_at, c.id FROM accounts c WHERE c.id = $2::uuid))
     ORDER BY a.created_at, a.id
     LIMIT $3`,
    [parentAccountId, page.after && isUuid(page.after.id) ? page.after.id : null, page.limit + 1],
  );
  return rows;
}

export async function insertApiKey(
  q: Queryable,
  key: { accountId: string; hash: Buffer; displayPrefix: string; name: string; scopes: string[]; expiresAt: Date | null },
): Promise<ApiKeyRow> {
  const { rows } = await q.query<ApiKeyRow>(
    `INSERT INTO api_keys (account_id, key_hash, display_prefix, name, scopes, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING id, account_id, display_prefix, name, scopes, expires_at, created_at`,
    [key.accountId, key.hash, key.displayPrefix, key.name, key.scopes, key.expiresAt],
  );
  return rows[0]!;
}

export async function listApiKeys(q: Queryable, accountId: string): Promise<ApiKeyRow[]> {
  const { rows } = await q.query<ApiKeyRow>(
    `SELECT id, account_id, display_prefix, name, scopes, expires_at, created_at
     FROM api_keys WHERE account_id = $1 ORDER BY created_at, id`,
    [accountId],
  );
  return rows;
}

export async function deleteApiKey(q: Queryable, accountId: string, keyId: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM api_keys WHERE id = $1 AND account_id = $2', [keyId, accountId]);
  return rowCount === 1;
}

export async function findApiKeyByHash(q: Queryable, hash: Buffer): Promise<KeyLookupRow | undefined> {
  const { rows } = await q.query<KeyLookupRow>(
    `SELECT k.id, k.account_id, k.key_hash, k.scopes, k.expires_at, a.status AS account_status, a.auth_generation,
            CASE WHEN a.funding = 'linked' THEN a.parent_account_id ELSE a.id END AS billing_account_id
     FROM api_keys k JOIN accounts a ON a.id = k.account_id
     WHERE k.key_hash = $1`,
    [hash],
  );
  return rows[0];
}

/** One active provisioning key per developer: a new key replaces the previous one. */
export async function replaceProvisioningKey(
  q: Queryable,
  key: { accountId: string; hash: Buffer; displayPrefix: string },
): Promise<{ id: string; display_prefix: string; created_at: Date }> {
  const { rows } = await q.query<{ id: string; display_prefix: string; created_at: Date }>(
    `INSERT INTO provisioning_keys (account_id, key_hash, display_prefix) VALUES ($1, $2, $3)
     ON CONFLICT (account_id) DO UPDATE
       SET id = gen_random_uuid(), key_hash = EXCLUDED.key_hash, display_prefix = EXCLUDED.display_prefix, created_at = now()
     RETURNING id, display_prefix, created_at`,
    [key.accountId, key.hash, key.displayPrefix],
  );
  return rows[0]!;
}

export async function deleteProvisioningKey(q: Queryable, accountId: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM provisioning_keys WHERE account_id = $1', [accountId]);
  return rowCount === 1;
}

export async function findProvisioningKeyByHash(q: Queryable, hash: Buffer): Promise<Omit<KeyLookupRow, 'scopes' | 'expires_at' | 'billing_account_id'> | undefined> {
  const { rows } = await q.query<Omit<KeyLookupRow, 'scopes' | 'expires_at' | 'billing_account_id'>>(
    `SELECT k.id, k.account_id, k.key_hash, a.status AS account_status
     FROM provisioning_keys k JOIN accounts a ON a.id = k.account_id
     WHERE k.key_hash = $1`,
    [hash],
  );
  return rows[0];
}

export interface VoucherRow {
  id: string;
  account_id: string;
  display_prefix: string;
  amount_micros: string;
  created_at: Date;
  redeemed_at: Date | null;
  redeemed_account_id: string | null;
}

const VOUCHER_COLUMNS = 'id, account_id, display_prefix, amount_micros::text AS amount_micros, created_at, redeemed_at, redeemed_account_id';

export async function insertVoucher(
  q: Queryable,
  voucher: { accountId: string; hash: Buffer; displayPrefix: string; amountMicros: number },
): Promise<VoucherRow> {
  const { rows } = await q.query<VoucherRow>(
    `INSERT INTO vouchers (account_id, code_hash, display_prefix, amount_micros) VALUES ($1, $2, $3, $4)
     RETURNING ${VOUCHER_COLUMNS}`,
    [voucher.accountId, voucher.hash, voucher.displayPrefix, voucher.amountMicros],
  );
  return rows[0]!;
}

/**
 * Finds an unredeemed voucher of this developer and locks it until the transaction ends; a second
 * redemption racing this one waits, then no longer matches.
 */
export async function lockRedeemableVoucher(q: Queryable, developerId: string, hash: Buffer): Promise<VoucherRow | undefined> {
  const { rows } = await q.query<VoucherRow>(
    `SELECT ${VOUCHER_COLUMNS} FROM vouchers
     WHERE code_hash = $1 AND account_id = $2 AND redeemed_at IS NULL
     FOR UPDATE`,
    [hash, developerId],
  );
  return rows[0];
}

export async function markVoucherRedeemed(q: Queryable, voucherId: string, redeemedAccountId: string): Promise<void> {
  const { rowCount } = await q.query(
    'UPDATE vouchers SET redeemed_at = now(), redeemed_account_id = $2 WHERE id = $1 AND redeemed_at IS NULL',
    [voucherId, redeemedAccountId],
  );
  if (rowCount !== 1) throw new Error(`voucher ${voucherId} was not redeemable`);
}

export async function listVouchers(q: Queryable, developerId: string): Promise<VoucherRow[]> {
  const { rows } = await q.query<VoucherRow>(
    `SELECT ${VOUCHER_COLUMNS} FROM vouchers WHERE account_id = $1 ORDER BY created_at, id`,
    [developerId],
  );
  return rows;
}

export async function setLazyCustomerCreation(q: Queryable, accountId: string, enabled: boolean): Promise<boolean> {
  const { rowCount } = await q.query(`UPDATE accounts SET lazy_create_customers = $2 WHERE id = $1 AND owner_type = 'developer'`, [accountId, enabled]);
  return rowCount === 1;
}
