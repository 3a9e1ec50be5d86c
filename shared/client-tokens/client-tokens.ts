import { createHash, timingSafeEqual } from 'node:crypto';
import { jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { z } from 'zod';
import { CLIENT_TOKEN_SCOPES, type ClientTokenPrincipal, type ClientTokenScope } from '../accounts/authenticate.js';
import { getCustomer } from '../customers/customers.js';
import type { Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import type { GatewayServices } from '../composition/gateway.js';
import type { LimitLayer } from '../ratelimit/limiter.js';
import type { ClientTokenMintInput } from './schemas.js';
import type { ClientTokenKeys } from './keys.js';
import * as repo from './repository.js';

/**
 * Client tokens (spec 1): short-lived EdDSA JWTs for a developer's browser code, pinned to one
 * customer. The JWT carries who it is for; the registry row (shared/client-tokens/repository.ts)
 * carries what it may do and whether it still may, so revocation needs no token lists anywhere.
 *
 * Claims: iss, sub (the customer id), jti (`ctok_…`, the registry key), iat, exp, plus the private
 * claims svc_developer_id (the tenant) and svc_scope (the token scopes, informative: the registry
 * row is the authority). Protected header: {alg: 'EdDSA', kid, typ: 'JWT'}.
 */

export const CLIENT_TOKEN_ISSUER = 'svc-gateway';
const DEFAULT_TTL_SECONDS = 900;
const DEFAULT_RPM_LIMIT = 60;
const MINTS_PER_MINUTE = 100;
/** Spec 1 fixes the mint refusal's Retry-After at 60 (the window), rather than the sliding window's estimate. */
const MINT_RETRY_AFTER_SECONDS = 60;



export interface MintedClientToken {
  object: 'client_token';
  token: string;
  jti: string;
  expires_at: string;
  scope: ClientTokenScope[];
}

/**
 * Mints a token for one of the developer's customers, from a body the route builder parsed with
 * clientTokenMintBody. `callerIp` is the mint request's address, which bind_ip pins the token to.
 * Only valid requests count towards the 100 mints per minute.
 */
export async function mintClientToken(
  platform: Pick<GatewayServices, 'db' | 'limiter' | 'clientTokenKeys'>,
  developerId: string,
  customerReference: string,
  input: ClientTokenMintInput,
  callerIp: string | undefined,
): Promise<MintedClientToken> {
  const customer = await getCustomer(platform.db, developerId, customerReference);
  // An archived customer makes no calls, so a token for it could never be used.
  if (customer.status !== 'active') throw serviceError('customer_not_found', { message: 'That customer is archived; client tokens can only be minted for active customers.' });

  const cap = customer.rpm_limit;
  if (input.rpm_limit !== undefined && cap !== null && input.rpm_limit > cap) {
    throw serviceError('rpm_exceeds_customer_cap', { param: 'rpm_limit', message: `rpm_limit is above the customer's rpm_limit of ${cap}.` });
  }
  const rpmLimit = input.rpm_limit ?? Math.min(DEFAULT_RPM_LIMIT, cap ?? DEFAULT_RPM_LIMIT);
  if (input.bind_ip && callerIp === undefined) {
    throw serviceError('invalid_request', { param: 'bind_ip', message: 'bind_ip needs the caller IP address, which could not be determined.' });
  }

  const decision = await platform.limiter.consume([mintLayer(customer.id)]);
  if (!decision.allowed) throw serviceError('mint_rate_limit', { retryAfterSeconds: MINT_RETRY_AFTER_SECONDS });

  const scope = [...new Set(input.scope ?? ['chat' as const])];
  const issuedAt = Math.floor(Date.now() / 1000);
  const expiresAt = issuedAt + (input.ttl_seconds ?? DEFAULT_TTL_SECONDS);
  const jti = newId('ctok_');
  const token = await signClientToken(platform.clientTokenKeys, { jti, developerId, customerId: customer.id, scope, issuedAt, expiresAt });
  await repo.insertClientToken(platform.db, {
    jti,
    developer_id: developerId,
    customer_id: customer.id,
    scope,
    rpm_limit: rpmLimit,
    origin_allowlist: [...new Set(input.origin_allowlist ?? [])],
    ip_hash: input.bind_ip ? ipBindingHash(customer.id, callerIp!) : null,
    expires_at: new Date(expiresAt * 1000),
  });
  return { object: 'client_token', token, jti, expires_at: new Date(expiresAt * 1000).toISOString(), scope };
}

/** The customer's active tokens (not revoked, not expired); never the token itself. */
export async function listClientTokens(
  db: Db,
  developerId: string,
  customerReference: string,
  query: { limit?: unknown; after?: unknown },
): Promise<Page<ReturnType<typeof formatClientToken>>> {
  const customer = await getCustomer(db, developerId, customerReference);
  const page = pageRequest(query);
  const rows = await repo.listActiveClientTokens(db, developerId, customer.id, page);
  return toPage(
    rows.map((row) => ({ ...row, id: row.jti })),
    page,
    formatClientToken,
  );
}

/** Revoking an already revoked token succeeds again; a jti not of this customer is not found. */
export async function revokeClientToken(db: Db, developerId: string, customerReference: string, jti: string): Promise<void> {
  const customer = await getCustomer(db, developerId, customerReference);
  if (!(await repo.revokeClientToken(db, developerId, customer.id, jti))) throw serviceError('not_found', { message: 'No such client token.' });
}

export async function revokeAllClientTokens(db: Db, developerId: string, customerReference: string): Promise<{ revoked_count: number }> {
  const customer = await getCustomer(db, developerId, customerReference);
  return { revoked_count: await repo.revokeAllClientTokens(db, developerId, customer.id) };
}

/**
 * Verifies a presented JWT: the signature under the key its kid names (EdDSA only), then the
 * registry row, which must exist for the same jti, developer and customer, be unrevoked and
 * unexpired, and belong to an open developer account. Every failure is the same 401.
 */
export async function verifyClientToken(platform: Pick<GatewayServices, 'db' | 'clientTokenKeys'>, jwt: string, now = new Date()): Promise<ClientTokenPrincipal> {
  return toPrincipal(await verifiedRegistryRow(platform, jwt, now));
}

/** What a client-token request presents besides the token, for the checks of spec 1 in order. */
export interface ClientTokenCall {
  /** The scope the endpoint needs; the token's scope list is the sole authority. */
  scope: ClientTokenScope;
  /** The Origin header, when sent. */
  origin: string | undefined;
  /** The caller's address, when it can be determined. */
  ip: string | undefined;
}

/**
 * A client-token request, authenticated and admitted: verify (401 invalid_client_token), reach
 * (403 endpoint_not_allowed_for_client_token), origin allowlist (403 origin_not_allowed), IP
 * binding (403 ip_binding_violation). The per-token rate layer runs later, with the call's others.
 */
export async function authorizeClientTokenCall(
  platform: Pick<GatewayServices, 'db' | 'clientTokenKeys'>,
  jwt: string,
  call: ClientTokenCall,
  now = new Date(),
): Promise<ClientTokenPrincipal> {
  const row = await verifiedRegistryRow(platform, jwt, now);
  if (!row.scope.includes(call.scope)) {
    throw serviceError('endpoint_not_allowed_for_client_token', { message: `This client token's scope does not include ${call.scope}.` });
  }
  if (row.origin_allowlist.length > 0 && (call.origin === undefined || !row.origin_allowlist.includes(call.origin))) {
    throw serviceError('origin_not_allowed');
  }
  if (row.ip_hash !== null && (call.ip === undefined || !timingSafeEqual(row.ip_hash, ipBindingHash(row.customer_id, call.ip)))) {
    throw serviceError('ip_binding_violation');
  }
  return toPrincipal(row);
}

/** sha256(customer_id | client_ip); an IPv4 address seen as IPv4-mapped IPv6 hashes as itself. */
export function ipBindingHash(customerId: string, ip: string): Buffer {
  const address = ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice('::ffff:'.length) : ip;
  return createHash('sha256').update(`${customerId}|${address}`).digest();
}

export function formatClientToken(row: repo.ClientTokenRow) {
  return {
    jti: row.jti,
    object: 'client_token' as const,
    scope: row.scope,
    created_at: row.created_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    rpm_limit: row.rpm_limit,
    origin_allowlist: row.origin_allowlist,
    ip_bound: row.ip_hash !== null,
  };
}

function mintLayer(customerId: string): LimitLayer {
  return { key: `client_token_mint:${customerId}`, limit: MINTS_PER_MINUTE, cost: 1, code: 'mint_rate_limit', countsRequests: false };
}

interface TokenClaims {
  jti: string;
  developerId: string;
  customerId: string;
  scope: ClientTokenScope[];
  issuedAt: number;
  expiresAt: number;
}

function signClientToken(keys: ClientTokenKeys, claims: TokenClaims): Promise<string> {
  return new SignJWT({ svc_developer_id: claims.developerId, svc_scope: claims.scope })
    .setProtectedHeader({ alg: 'EdDSA', kid: keys.signing.kid, typ: 'JWT' })
    .setIssuer(CLIENT_TOKEN_ISSUER)
    .setSubject(claims.customerId)
    .setJti(claims.jti)
    .setIssuedAt(claims.issuedAt)
    .setExpirationTime(claims.expiresAt)
    .sign(keys.signing.privateKey);
}

const CLAIMS = z.object({
  sub: z.string().startsWith('cus_'),
  jti: z.string().startsWith('ctok_'),
  svc_developer_id: z.string().min(1),
});

async function verifiedRegistryRow(platform: Pick<GatewayServices, 'db' | 'clientTokenKeys'>, jwt: string, now: Date): Promise<repo.ClientTokenRow> {
  const keys = platform.clientTokenKeys;
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(
      jwt,
      ({ kid }) => {
        const key = kid === undefined ? undefined : keys.verifying.get(kid);
        if (!key) throw new Error('unknown kid');
        return key;
      },
      { algorithms: ['EdDSA'], issuer: CLIENT_TOKEN_ISSUER, typ: 'JWT', requiredClaims: ['sub', 'jti', 'iat', 'exp'], currentDate: now },
    ));
  } catch {
    // Which check failed (signature, alg, kid, exp, shape) is never told to the caller.
    throw invalidClientToken();
  }
  const claims = CLAIMS.safeParse(payload);
  if (!claims.success) throw invalidClientToken();
  const row = await repo.findClientTokenForVerification(platform.db, claims.data.jti);
  if (
    !row ||
    !row.account_active ||
    row.developer_id !== claims.data.svc_developer_id ||
    row.customer_id !== claims.data.sub ||
    row.revoked_at !== null ||
    row.expires_at.getTime() <= now.getTime()
  ) {
    throw invalidClientToken();
  }
  return row;
}

function toPrincipal(row: repo.ClientTokenRow): ClientTokenPrincipal {
  return {
    kind: 'client_token',
    accountId: row.developer_id,
    jti: row.jti,
    customerId: row.customer_id,
    scopes: row.scope as ClientTokenScope[],
    rpmLimit: row.rpm_limit,
  };
}

const invalidClientToken = () => serviceError('invalid_client_token');

/**
 * Keeps the jti registry small. Rows stay a day past expiry, so revoking a token that just
 * expired still answers 204 rather than 404.
 */
export function purgeExpiredClientTokens(db: Db, now = new Date()): Promise<number> {
  return repo.deleteExpiredClientTokens(db, new Date(now.getTime() - 24 * 3600 * 1000));
}
