import { withTransaction, type Db, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { isUuid } from '../ids.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import { mintKey } from './keys.js';
import { hashPassword } from './passwords.js';
import * as repo from './repository.js';
import type { DeveloperScope } from './scopes.js';

export type { AccountRow, AccountWithWalletRow, ApiKeyRow, VoucherRow } from './repository.js';

const UNIQUE_VIOLATION = '23505';
const CHECK_VIOLATION = '23514';

export interface NewDeveloperAccount {
  email: string;
  displayName?: string | undefined;
  password: string;
  initialCreditMicros: number;
}

/** A developer account, its wallet and the opening credit are created together or not at all. */
export async function createDeveloperAccount(db: Db, input: NewDeveloperAccount): Promise<repo.AccountWithWalletRow> {
  const passwordHash = await hashPassword(input.password);
  const accountId = await withTransaction(db, async (tx) => {
    const account = await repo
      .insertAccount(tx, {
        ownerType: 'developer',
        parentAccountId: null,
        email: input.email,
        username: null,
        displayName: input.displayName ?? null,
        passwordHash,
        funding: 'standalone',
      })
      .catch(rethrowUnique('account_exists', 'An account with this email already exists.'));
    await repo.insertWallet(tx, account.id);
    if (input.initialCreditMicros > 0) {
      await repo.postLedgerEntry(tx, { accountId: account.id, amountMicros: input.initialCreditMicros, kind: 'credit', note: 'initial credit' });
    }
    return account.id;
  });
  return (await repo.findAccountWithWallet(db, accountId))!;
}

export async function getAccount(db: Db, accountId: string): Promise<repo.AccountWithWalletRow> {
  const account = await repo.findAccountWithWallet(db, accountId);
  if (!account) throw serviceError('account_not_found');
  return account;
}

export interface NewApiKey {
  name: string;
  scopes: DeveloperScope[];
  expiresAt?: Date | null | undefined;
}

/**
 * Mints a ko_ key. The plaintext is returned here once and never stored. `db` may be a transaction,
 * so a key can be born with the account it belongs to.
 */
export async function createApiKey(db: Queryable, accountId: string, input: NewApiKey): Promise<{ key: repo.ApiKeyRow; plaintext: string }> {
  if (input.scopes.length === 0) throw serviceError('invalid_request', { message: 'A key needs at least one scope.', param: 'scopes' });
  if (input.name.length > 80) throw serviceError('invalid_request', { message: 'A key name is at most 80 characters.', param: 'name' });
  const account = await repo.findAccount(db, accountId);
  if (!account || account.status !== 'active') throw serviceError('account_not_found');
  const minted = mintKey('ko_');
  const key = await repo.insertApiKey(db, {
    accountId,
    hash: minted.hash,
    displayPrefix: minted.displayPrefix,
    name: input.name,
    scopes: [...new Set(input.scopes)],
    expiresAt: input.expiresAt ?? null,
  });
  return { key, plaintext: minted.plaintext };
}

export function listApiKeys(db: Db, accountId: string): Promise<repo.ApiKeyRow[]> {
  return repo.listApiKeys(db, accountId);
}

/** Revocation is a hard delete: the very next request with that key finds nothing. */
export async function revokeApiKey(db: Db, accountId: string, keyId: string): Promise<void> {
  if (!isUuid(keyId) || !(await repo.deleteApiKey(db, accountId, keyId))) {
    throw serviceError('not_found', { message: 'No such API key on this account.' });
  }
}

/** Mints the developer's rsk_ key, replacing any previous one (one active key per developer). */
export async function createProvisioningKey(db: Db, accountId: string): Promise<{ id: string; display_prefix: string; created_at: Date; plaintext: string }> {
  const account = await repo.findAccount(db, accountId);
  if (!account || account.status !== 'active' || account.owner_type !== 'developer') throw serviceError('account_not_found');
  const minted = mintKey('rsk_');
  const row = await repo.replaceProvisioningKey(db, { accountId, hash: minted.hash, displayPrefix: minted.displayPrefix });
  return { ...row, plaintext: minted.plaintext };
}

export async function revokeProvisioningKey(db: Db, accountId: string): Promise<void> {
  if (!(await repo.deleteProvisioningKey(db, accountId))) {
    throw serviceError('not_found', { message: 'This account has no provisioning key.' });
  }
}

export interface Balance {
  accountId: string;
  billing: 'wallet' | 'linked';
  balanceMicros: number;
}

/** A linked account bills its parent's wallet and must not see it. */
export async function getBalance(db: Db, accountId: string): Promise<Balance> {
  const account = await getAccount(db, accountId);
  if (account.funding === 'linked') return { accountId, billing: 'linked', balanceMicros: 0 };
  return { accountId, billing: 'wallet', balanceMicros: Number(account.balance_micros) };
}

/** Accounts provisioned by one developer. Any other id, including another developer's, is not found. */
export async function listProvisionedAccounts(
  db: Db,
  developerId: string,
  query: { limit?: unknown; after?: unknown },
): Promise<Page<repo.AccountWithWalletRow>> {
  const page = pageRequest(query);
  const rows = await repo.listChildAccounts(db, developerId, page);
  return toPage(rows, page, (row) => row);
}

export async function getProvisionedAccount(db: Db, developerId: string, accountId: string): Promise<repo.AccountWithWalletRow> {
  const account = isUuid(accountId) ? await repo.findChildAccount(db, developerId, accountId) : undefined;
  if (!account) throw serviceError('account_not_found');
  return account;
}

/**
 * Takes money out of a wallet with its ledger row. The wallet's CHECK (balance >= 0) refuses an
 * overdraw inside the same statement, so no balance read can go stale between check and debit;
 * the refusal becomes insufficient_funds and the caller's transaction rolls back.
 */
export async function withdrawFromWallet(
  tx: Queryable,
  entry: { accountId: string; amountMicros: number; kind: string; reference?: string | null; note?: string | null },
  refusal: string,
): Promise<{ balanceAfterMicros: number }> {
  try {
    return await repo.postLedgerEntry(tx, { ...entry, amountMicros: -entry.amountMicros });
  } catch (error) {
    if ((error as { code?: string }).code === CHECK_VIOLATION) throw serviceError('insufficient_funds', { message: refusal });
    throw error;
  }
}

function rethrowUnique(code: 'account_exists', message: string) {
  return (error: unknown): never => {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError(code, { message });
    throw error;
  };
}

/** An operator's credit to a developer wallet: the balance and its ledger row move together. */
export async function creditDeveloperWallet(db: Db, accountId: string, amountMicros: number, note: string | null): Promise<repo.AccountWithWalletRow> {
  const account = await repo.findAccount(db, accountId);
  if (!account || account.status !== 'active') throw serviceError('account_not_found');
  await withTransaction(db, (tx) => repo.postLedgerEntry(tx, { accountId, amountMicros, kind: 'credit', note }));
  return (await repo.findAccountWithWallet(db, accountId))!;
}

/** Whether unknown external ids become customers on first use (spec 1, "Attribution"). */
export async function setLazyCustomerCreation(db: Db, accountId: string, enabled: boolean): Promise<void> {
  if (!(await repo.setLazyCustomerCreation(db, accountId, enabled))) throw serviceError('account_not_found');
}
