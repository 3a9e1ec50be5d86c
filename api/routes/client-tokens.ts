import { Router } from 'express';
import { listClientTokens, mintClientToken, revokeAllClientTokens, revokeClientToken } from '../../shared/client-tokens/client-tokens.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf, requireDeveloperKey } from '../middleware/authenticate.js';
import { callerIp } from '../middleware/client-token.js';

/**
 * Client tokens of a customer, managed from the developer's server with a `ko_` key (a client
 * token here is 403 endpoint_not_allowed_for_client_token). A path id is `cus_…` or `ext:<id>`.
 */
export function clientTokenRoutes(platform: GatewayServices): Router {
  const { db } = platform;
  const router = Router();
  const developer = (req: Parameters<typeof principalOf>[0]) => principalOf(req).accountId;

  router.post('/v1/customers/:id/client_tokens', requireDeveloperKey(platform, 'api:client_tokens'), async (req, res) => {
    res.json(await mintClientToken(platform, developer(req), String(req.params.id), req.body, callerIp(req)));
  });

  router.get('/v1/customers/:id/client_tokens', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(await listClientTokens(db, developer(req), String(req.params.id), req.query));
  });

  router.post('/v1/customers/:id/client_tokens/revoke_all', requireDeveloperKey(platform, 'api:client_tokens'), async (req, res) => {
    res.json(await revokeAllClientTokens(db, developer(req), String(req.params.id)));
  });

  router.delete('/v1/customers/:id/client_tokens/:jti', requireDeveloperKey(platform, 'api:client_tokens'), async (req, res) => {
    await revokeClientToken(db, developer(req), String(req.params.id), String(req.params.jti));
    res.status(204).end();
  });

  return router;
}
