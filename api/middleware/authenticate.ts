import type { Request, RequestHandler, Response } from 'express';
import { authenticateDeveloperKey, authenticateProvisioningKey, type Principal } from '../../shared/accounts/authenticate.js';
import type { DeveloperScope } from '../../shared/accounts/scopes.js';
import { grantsScope } from '../../shared/accounts/scopes.js';
import { serviceError } from '../../shared/errors.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import type { LimitLayer } from '../../shared/ratelimit/limiter.js';
import { developerLayers, edgeLayer, provisioningLayer } from '../../shared/ratelimit/layers.js';

/**
 * Runs before routing. The first word of Authorization selects the scheme, checked as the literal
 * prefixes `Bearer ` and `Client `; a header in neither scheme is refused before any route runs.
 */
export const readCredential: RequestHandler = (req, _res, next) => {
  const header = req.get('authorization');
  if (!header) req.credential = undefined;
  else if (header.startsWith('Bearer ')) req.credential = { scheme: 'bearer', value: header.slice('Bearer '.length).trim() };
  else if (header.startsWith('Client ')) req.credential = { scheme: 'client', value: header.slice('Client '.length).trim() };
  else throw serviceError('invalid_auth_scheme');
  next();
};

/**
 * A route for developer `ko_` keys. Client tokens fail closed: a route that does not list them is
 * refused without looking at the token. `scope` is satisfied by an exact match or by `admin`.
 * Once the key is known, the edge and developer rate-limit layers run in one Redis round trip.
 */
export function requireDeveloperKey(platform: GatewayServices, scope: DeveloperScope): RequestHandler {
  return async (req, res, next) => {
    const credential = req.credential;
    if (!credential) throw serviceError('missing_token');
    if (credential.scheme === 'client') throw serviceError('endpoint_not_allowed_for_client_token');
    const principal = await verifyDeveloperKey(platform, req, credential.value, scope);
    await enforceLimits(platform, res, [edgeLayer(platform.config, clientIp(req), credential.value), ...developerLayers(platform.config, principal.accountId)]);
    next();
  };
}

/** Verifies a `ko_` key and the route's scope (an exact match or `admin`; none for a route open to any key), and records the caller. */
export async function verifyDeveloperKey(platform: GatewayServices, req: Request, presented: string, scope: DeveloperScope | undefined) {
  const principal = await authenticateDeveloperKey(platform.db, presented);
  requireScope(principal, scope);
  req.principal = principal;
  return principal;
}

/** 403 insufficient_scope unless the key has the route's scope or admin (no scope: any key will do). */
export function requireScope(principal: { scopes: readonly string[] }, scope: DeveloperScope | undefined): void {
  if (scope !== undefined && !grantsScope(principal.scopes, scope)) {
    throw serviceError('insufficient_scope', { message: `This route needs the ${scope} scope (or admin); the key has ${principal.scopes.join(', ')}.` });
  }
}

/** A route of /v1/accounts: only the developer's `rsk_` provisioning key opens it. */
export function requireProvisioningKey(platform: GatewayServices): RequestHandler {
  return async (req, res, next) => {
    if (req.credential?.scheme === 'client') throw serviceError('endpoint_not_allowed_for_client_token');
    const principal = await authenticateProvisioningKey(platform.db, req.credential?.value);
    req.principal = principal;
    await enforceLimits(platform, res, [
      edgeLayer(platform.config, clientIp(req), req.credential!.value),
      provisioningLayer(platform.config.PROVISIONING_RPM_LIMIT, principal.keyId),
    ]);
    next();
  };
}

/** Runs the layers; a success carries X-RateLimit-Remaining, a refusal is the layer's 429. */
export async function enforceLimits(platform: GatewayServices, res: Response, layers: LimitLayer[]): Promise<void> {
  const remaining = await platform.limiter.enforce(layers);
  if (remaining !== undefined) res.setHeader('X-RateLimit-Remaining', String(remaining));
}

/** The caller's address as Express resolves it under TRUST_PROXY_HOPS. */
export function clientIp(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/** The verified caller; routes mounted behind an authentication middleware always have one. */
export function principalOf(req: Request): Principal {
  if (!req.principal) throw new Error('route reached without authentication middleware');
  return req.principal;
}
