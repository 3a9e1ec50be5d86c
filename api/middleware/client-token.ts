import type { Request } from 'express';
import type { ClientTokenPrincipal, ClientTokenScope } from '../../shared/accounts/authenticate.js';
import { authorizeClientTokenCall } from '../../shared/client-tokens/client-tokens.js';
import { serviceError } from '../../shared/errors.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';

/**
 * The Client scheme on an endpoint of the client-token allowlist: verifies the token, checks that
 * it carries `requiredScope`, then its origin allowlist and IP binding (spec 1's order), and sets
 * req.principal. Rate limits are not run here: the metered-call pipeline runs the token's rpm
 * layer (clientTokenLayer) together with the customer and developer layers in one round trip.
 * Routes that take either scheme call this only for `Client` credentials.
 */
export async function authenticateClientToken(platform: GatewayServices, req: Request, requiredScope: ClientTokenScope): Promise<ClientTokenPrincipal> {
  const credential = req.credential;
  if (!credential) throw serviceError('missing_token');
  if (credential.scheme !== 'client') throw new Error('authenticateClientToken called for a credential of another scheme');
  const principal = await authorizeClientTokenCall(platform, credential.value, { scope: requiredScope, origin: req.get('origin'), ip: callerIp(req) });
  req.principal = principal;
  return principal;
}

/** The caller's address as Express resolves it under TRUST_PROXY_HOPS, or undefined when unknown. */
export function callerIp(req: Request): string | undefined {
  return req.ip || req.socket.remoteAddress || undefined;
}
