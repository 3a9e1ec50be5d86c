import type { Request } from 'express';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import {
  createEndpoint,
  deleteEndpoint,
  formatDelivery,
  formatEndpoint,
  getEndpoint,
  listEndpointDeliveries,
  listEndpoints,
  retryDelivery,
  rotateEndpointSecret,
  sendTestEvent,
  updateEndpoint,
} from '../../shared/webhooks/endpoints.js';
import { deliveryListQuery, endpointListQuery, WEBHOOK_BODIES } from '../../shared/webhooks/schemas.js';
import { principalOf } from '../middleware/authenticate.js';
import { route, type RouteAccess, type RouteDefinition } from '../route-table.js';

/** Webhook endpoints (spec 1, "Webhooks"), all under the api:webhooks scope. */
export function webhookRoutes(platform: GatewayServices): RouteDefinition[] {
  const { db } = platform;
  const access: RouteAccess = { kind: 'developer_key', scope: 'api:webhooks' };
  const developer = (req: Request) => principalOf(req).accountId;
  const surface = 'webhooks';
  return [
    route({
      method: 'post', path: '/v1/webhooks', surface, summary: 'Register a webhook endpoint (its signing secret is in this response only)', access, input: { body: WEBHOOK_BODIES.webhooks },
      handle: async (req, res, { body }) => {
        res.json(formatEndpoint(await createEndpoint(platform, developer(req), body), { withSecret: true }));
      },
    }),
    route({
      method: 'get', path: '/v1/webhooks', surface, summary: 'List webhook endpoints', access,
      input: { query: endpointListQuery },
      handle: async (req, res, { query }) => {
        res.json(await listEndpoints(db, developer(req), query));
      },
    }),
    route({
      method: 'get', path: '/v1/webhooks/:id', surface, summary: 'Retrieve a webhook endpoint', access,
      handle: async (req, res, { params }) => {
        res.json(formatEndpoint(await getEndpoint(db, developer(req), params.id)));
      },
    }),
    route({
      method: 'patch', path: '/v1/webhooks/:id', surface, summary: 'Update, pause or re-enable a webhook endpoint', access, input: { body: WEBHOOK_BODIES.patch },
      handle: async (req, res, { params, body }) => {
        res.json(formatEndpoint(await updateEndpoint(platform, developer(req), params.id, body)));
      },
    }),
    route({
      method: 'delete', path: '/v1/webhooks/:id', surface, summary: 'Delete a webhook endpoint', access, response: { status: 204, contentType: '', description: 'Deleted' },
      handle: async (req, res, { params }) => {
        await deleteEndpoint(db, developer(req), params.id);
        res.status(204).end();
      },
    }),
    route({
      method: 'post', path: '/v1/webhooks/:id/rotate_secret', surface, summary: 'Rotate the signing secret (the old one verifies during the grace period)', access, input: { body: WEBHOOK_BODIES.rotate, bodyOptional: true },
      handle: async (req, res, { params, body }) => {
        res.json(formatEndpoint(await rotateEndpointSecret(db, developer(req), params.id, body), { withSecret: true }));
      },
    }),
    route({
      method: 'post', path: '/v1/webhooks/:id/test', surface, summary: 'Send a test event to the endpoint', access,
      handle: async (req, res, { params }) => {
        res.json(formatDelivery(await sendTestEvent(platform, developer(req), params.id)));
      },
    }),
    route({
      method: 'get', path: '/v1/webhooks/:id/deliveries', surface, summary: "List an endpoint's deliveries", access, input: { query: deliveryListQuery },
      handle: async (req, res, { params, query }) => {
        res.json(await listEndpointDeliveries(db, developer(req), params.id, query));
      },
    }),
    route({
      method: 'post', path: '/v1/webhooks/:id/deliveries/:deliveryId/retry', surface, summary: 'Deliver a failed delivery again', access,
      handle: async (req, res, { params }) => {
        res.json(formatDelivery(await retryDelivery(platform, developer(req), params.id, params.deliveryId)));
      },
    }),
    // The second reference form of registration: its documented errors are 401 invalid_api_key and 400 invalid_url.
    route({
      method: 'post', path: '/v1/webhook_endpoints', surface, summary: 'Register a webhook endpoint (second reference form)',
      access: { ...access, keyErrorsAs: 'invalid_api_key' }, input: { body: WEBHOOK_BODIES.webhook_endpoints },
      handle: async (req, res, { body }) => {
        res.json(formatEndpoint(await createEndpoint(platform, developer(req), body, 'webhook_endpoints'), { withSecret: true }));
      },
    }),
  ];
}
