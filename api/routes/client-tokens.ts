import { listClientTokens, mintClientToken, revokeAllClientTokens, revokeClientToken } from '../../shared/client-tokens/client-tokens.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { pageQuery } from '../../shared/pagination.js';
import { clientTokenMintBody } from '../../shared/client-tokens/schemas.js';
import { principalOf } from '../middleware/authenticate.js';
import { callerIp } from '../middleware/client-token.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/**
 * Client tokens of a customer, managed from the developer's server with a `ko_` key (a client
 * token here is 403 endpoint_not_allowed_for_client_token). A path id is `cus_…` or `ext:<id>`.
 */
export function clientTokenRoutes(platform: GatewayServices): RouteDefinition[] {
  const { db } = platform;
  const developer = (req: Parameters<typeof principalOf>[0]) => principalOf(req).accountId;
  const surface = 'client_tokens';
  return [
    route({
      method: 'post', path: '/v1/customers/:id/client_tokens', surface, summary: 'Mint a client token for a customer',
      access: developerKey('api:client_tokens'), input: { body: clientTokenMintBody, bodyOptional: true },
      handle: async (req, res, { params, body }) => {
        res.json(await mintClientToken(platform, developer(req), params.id, body, callerIp(req)));
      },
    }),
    route({
      method: 'get', path: '/v1/customers/:id/client_tokens', surface, summary: "List a customer's live client tokens",
      access: developerKey('api:read'), input: { query: pageQuery },
      handle: async (req, res, { params, query }) => {
        res.json(await listClientTokens(db, developer(req), params.id, query));
      },
    }),
    route({
      method: 'post', path: '/v1/customers/:id/client_tokens/revoke_all', surface, summary: "Revoke every client token of a customer",
      access: developerKey('api:client_tokens'),
      handle: async (req, res, { params }) => {
        res.json(await revokeAllClientTokens(db, developer(req), params.id));
      },
    }),
    route({
      method: 'delete', path: '/v1/customers/:id/client_tokens/:jti', surface, summary: 'Revoke one client token',
      access: developerKey('api:client_tokens'), response: { status: 204, contentType: '', description: 'Revoked' },
      handle: async (req, res, { params }) => {
        await revokeClientToken(db, developer(req), params.id, params.jti);
        res.status(204).end();
      },
    }),
  ];
}
