import type { Request, RequestHandler } from 'express';
import { authenticateDeveloperKey, authenticateProvisioningKey, type Principal } from '../../shared/accounts/authenticate.js';
import type { DeveloperScope } from '../../shared/accounts/scopes.js';
import { grantsScope } from '../../shared/accounts/scopes.js';
import type { Db } from '../../shared/db/pool.js';
import { serviceError } from '../../shared/errors.js';

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
 */
export function requireDeveloperKey(db: Db, scope: DeveloperScope): RequestHandler {
  return async (req, _res, next) => {
    const credential = req.credential;
    if (!credential) throw serviceError('missing_token');
    if (credential.scheme === 'client') throw serviceError('endpoint_not_allowed_for_client_token');
    const principal = await authenticateDeveloperKey(db, credential.value);
    if (principal.kind === 'developer_key' && !grantsScope(principal.scopes, scope)) {
      throw serviceError('insufficient_scope', { message: `This route needs the ${scope} scope (or admin); the key has ${principal.scopes.join(', ')}.` });
    }
    req.principal = principal;
    next();
  };
}

/** A route of /v1/accounts: only the developer's `rsk_` provisioning key opens it. */
export function requireProvisioningKey(db: Db): RequestHandler {
  return async (req, _res, next) => {
    if (req.credential?.scheme === 'client') throw serviceError('endpoint_not_allowed_for_client_token');
    req.principal = await authenticateProvisioningKey(db, req.credential?.value);
    next();
  };
}

/** The verified caller; routes mounted behind an authentication middleware always have one. */
export function principalOf(req: Request): Principal {
  if (!req.principal) throw new Error('route reached without authentication middleware');
  return req.principal;
}
