import { withTransaction, type Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { isUuid } from '../ids.js';
import { microsToUsd } from '../money.js';
import { createApiKey, withdrawFromWallet } from './accounts.js';
import { hashPassword } from './passwords.js';
import * as repo from './repository.js';
import type { DeveloperScope } from './scopes.js';
import { redeemVoucher } from './vouchers.js';

/**
 * End-user accounts a developer provisions with its rsk_ key (POST/DELETE /v1/accounts).
 *
 * - self: standalone, its own empty wallet.
 * - grant: standalone; amount moves from the developer's wallet to the new wallet.
 * - voucher: standalone; a voucher the developer minted (already paid for) is redeemed into it.
 * - linked: no wallet of its own; its usage bills the developer's wallet.
 */
export type FundingMode = 'self' | 'grant' | 'voucher' | 'linked';

export type ProvisionFunding =
  | { mode: 'self' }
  | { mode: 'grant'; amountMicros: number }
  | { mode: 'voucher'; voucherCode: string }
  | { mode: 'linked' };

export interface NewProvisionedAccount {
  email: string;
  username: string;
  password: string;
  /** Defaults to the password; kept only as a scrypt hash, for the later vault feature. */
  vaultPassword?: string | undefined;
  funding: ProvisionFunding;
}

export interface ProvisionedAccount {
  account: repo.AccountRow;
  apiKey: { plaintext: string; displayPrefix: string };
  credit: { balanceMicros: number; funding: FundingMode; applied: boolean; reason: string };
}

/**
 * The key a provisioned account is born with: enough to call models and read its own balance,
 * nothing that manages customers, webhooks or client tokens.
 */
export const PROVISIONED_KEY_SCOPES: DeveloperScope[] = ['api:chat', 'api:read'];

/**
 * Creates the account, its wallet, its funding and its first ko_ key in one transaction: a
 * refusal at any step (cap, duplicate, funds, voucher) leaves nothing behind. The developer's row
 * is locked first, so concurrent creates of one developer count active accounts one at a time.
 */
export async function provisionAccount(
  db: Db,
  developerId: string,
  input: NewProvisionedAccount,
  limits: { accountCap: number },
): Promise<ProvisionedAccount> {
  const capReached = () => serviceError('cap_reached', { message: `This developer already has ${limits.accountCap} active accounts, the limit; close one first.` });
  // A cheap early refusal spares the scrypt work; the authoritative count runs under the lock below.
  if ((await repo.countActiveChildAccounts(db, developerId)) >= limits.accountCap) throw capReached();
  const passwordHash = await hashPassword(input.password);
  // Without its own vault password the vault uses the login password, so its hash is the same one.
  const vaultPasswordHash = input.vaultPassword === undefined ? passwordHash : await hashPassword(input.vaultPassword);
  const { funding } = input;

  return withTransaction(db, async (tx) => {
    if (!(await repo.lockActiveDeveloper(tx, developerId))) throw serviceError('account_not_found');
    if ((await repo.countActiveChildAccounts(tx, developerId)) >= limits.accountCap) throw capReached();

    const account = await repo
      .insertAccount(tx, {
        ownerType: 'api_end_user',
        parentAccountId: developerId,
        email: input.email,
        username: input.username,
        displayName: null,
        passwordHash,
        vaultPasswordHash,
        funding: funding.mode === 'linked' ? 'linked' : 'standalone',
      })
      .catch(rethrowTaken);

    let credit: ProvisionedAccount['credit'];
    switch (funding.mode) {
      case 'self':
        await repo.insertWallet(tx, account.id);
        credit = { balanceMicros: 0, funding: 'self', applied: false, reason: 'own_empty_wallet' };
        break;
      case 'grant': {
        await repo.insertWallet(tx, account.id);
        await withdrawFromWallet(
          tx,
          { accountId: developerId, amountMicros: funding.amountMicros, kind: 'grant_out', reference: account.id, note: 'grant to provisioned account' },
          `The developer wallet cannot fund a ${microsToUsd(funding.amountMicros)} USD grant.`,
        );
        const { balanceAfterMicros } = await repo.postLedgerEntry(tx, {
          accountId: account.id,
          amountMicros: funding.amountMicros,
          kind: 'grant_in',
          reference: developerId,
          note: 'grant from developer wallet',
        });
        credit = { balanceMicros: balanceAfterMicros, funding: 'grant', applied: true, reason: 'granted_from_developer_wallet' };
        break;
      }
      case 'voucher': {
        await repo.insertWallet(tx, account.id);
        const { amountMicros } = await redeemVoucher(tx, developerId, funding.voucherCode, account.id);
        credit = { balanceMicros: amountMicros, funding: 'voucher', applied: true, reason: 'voucher_redeemed' };
        break;
      }
      case 'linked':
        // No wallet at all: nothing can ever be credited to it, and its balance reads 0.
        credit = { balanceMicros: 0, funding: 'linked', applied: false, reason: 'bills_developer_wallet' };
        break;
    }

    const { key, plaintext } = await createApiKey(tx, account.id, { name: 'provisioned', scopes: PROVISIONED_KEY_SCOPES });
    return { account, apiKey: { plaintext, displayPrefix: key.display_prefix }, credit };
  });
}

/**
 * Closes an open account of this developer: it leaves the cap count, its ko_ keys are deleted in
 * the same transaction (the next request with one is 401 invalid_token), and a closed account
 * cannot sign in. A standalone account's remaining balance stays in its own wallet, untouched
 * and visible on GET /v1/accounts/{id}; nothing flows back to the developer.
 */
export async function closeProvisionedAccount(db: Db, developerId: string, accountId: string): Promise<repo.AccountRow> {
  if (!isUuid(accountId)) throw serviceError('account_not_found');
  return withTransaction(db, async (tx) => {
    const closed = await repo.closeChildAccount(tx, developerId, accountId);
    if (!closed) throw serviceError('account_not_found', { message: 'No open account with this id under this developer.' });
    await repo.deleteApiKeysOfAccount(tx, accountId);
    return closed;
  });
}

const UNIQUE_VIOLATION = '23505';

function rethrowTaken(error: unknown): never {
  const failure = error as { code?: string; constraint?: string };
  if (failure.code === UNIQUE_VIOLATION) {
    const field = failure.constraint === 'accounts_username_key' ? 'username' : 'email';
    throw serviceError('account_exists', { message: `An account with this ${field} already exists.` });
  }
  throw error;
}

