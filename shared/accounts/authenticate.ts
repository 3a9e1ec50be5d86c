import type { Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { hashKey, isWellFormedKey, keyMatches } from './keys.js';
import * as repo from './repository.js';

/** Who is calling, once a credential has been verified. Domain functions take it as the tenant. */
export type Principal =
  | { kind: 'developer_key'; accountId: string; keyId: string; scopes: readonly string[]; billingAccountId: string }
  | { kind: 'provisioning_key'; accountId: string; keyId: string }
  | ClientTokenPrincipal;

/** A verified client token: short-lived, browser side, pinned to one customer of one developer. */
export interface ClientTokenPrincipal {
  kind: 'client_token';
  /** The developer that minted it (the tenant). */
  accountId: string;
  jti: string;
  customerId: string;
  scopes: readonly ClientTokenScope[];
  rpmLimit: number;
}

export const CLIENT_TOKEN_SCOPES = ['chat', 'conversations', 'embeddings', 'moderations', 'assistants_threads'] as const;
export type ClientTokenScope = (typeof CLIENT_TOKEN_SCOPES)[number];

export type DeveloperKeyPrincipal = Extract<Principal, { kind: 'developer_key' }>;

/**
 * Verifies a `ko_` key straight from PostgreSQL, so that a revoked key (a deleted row) or a closed
 * account stops working on the very next request.
 */
export async function authenticateDeveloperKey(db: Db, presented: string, now = new Date()): Promise<DeveloperKeyPrincipal> {
  return (await lookupDeveloperKey(db, presented, now)).principal;
}

/** The key's principal with what a cache needs to keep it: the account's auth generation and the key's expiry. */
export async function lookupDeveloperKey(db: Db, presented: string, now = new Date()): Promise<{ principal: DeveloperKeyPrincipal; generation: number; expiresAt: Date | null }> {
  if (!isWellFormedKey('ko_', presented)) throw serviceError('invalid_token_format');
  const row = await repo.findApiKeyByHash(db, hashKey(presented));
  if (!row || !keyMatches(row.key_hash, presented) || row.account_status !== 'active') throw serviceError('invalid_token');
  if (row.expires_at && row.expires_at.getTime() <= now.getTime()) throw serviceError('invalid_token');
  return {
    principal: { kind: 'developer_key', accountId: row.account_id, keyId: row.id, scopes: row.scopes, billingAccountId: row.billing_account_id },
    generation: Number(row.auth_generation),
    expiresAt: row.expires_at,
  };
}

export async function authenticateProvisioningKey(db: Db, presented: string | undefined): Promise<Extract<Principal, { kind: 'provisioning_key' }>> {
  if (presented === undefined || !isWellFormedKey('rsk_', presented)) throw serviceError('invalid_provisioning_key');
  const row = await repo.findProvisioningKeyByHash(db, hashKey(presented));
  if (!row || !keyMatches(row.key_hash, presented) || row.account_status !== 'active') throw serviceError('invalid_provisioning_key');
  return { kind: 'provisioning_key', accountId: row.account_id, keyId: row.id };
}
