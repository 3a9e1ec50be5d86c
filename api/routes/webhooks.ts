import { Router, type Request, type RequestHandler } from 'express';
import { ServiceError, serviceError, type ErrorCode } from '../../shared/errors.js';
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
import { principalOf, requireDeveloperKey } from '../middleware/authenticate.js';

/** Webhook endpoints (spec 1, "Webhooks"), all under the api:webhooks scope. */
export function webhookRoutes(platform: GatewayServices): Router {
  const { db } = platform;
  const router = Router();
  const scope = requireDeveloperKey(platform, 'api:webhooks');
  const developer = (req: Request) => principalOf(req).accountId;
  const id = (req: Request) => String(req.params.id);

  router.post('/v1/webhooks', scope, async (req, res) => {
    res.json(formatEndpoint(await createEndpoint(platform, developer(req), req.body), { withSecret: true }));
  });

  router.get('/v1/webhooks', scope, async (req, res) => {
    res.json(await listEndpoints(db, developer(req), req.query));
  });

  router.get('/v1/webhooks/:id', scope, async (req, res) => {
    res.json(formatEndpoint(await getEndpoint(db, developer(req), id(req))));
  });

  router.patch('/v1/webhooks/:id', scope, async (req, res) => {
    res.json(formatEndpoint(await updateEndpoint(platform, developer(req), id(req), req.body)));
  });

  router.delete('/v1/webhooks/:id', scope, async (req, res) => {
    await deleteEndpoint(db, developer(req), id(req));
    res.status(204).end();
  });

  router.post('/v1/webhooks/:id/rotate_secret', scope, async (req, res) => {
    res.json(formatEndpoint(await rotateEndpointSecret(db, developer(req), id(req), req.body), { withSecret: true }));
  });

  router.post('/v1/webhooks/:id/test', scope, async (req, res) => {
    res.json(formatDelivery(await sendTestEvent(platform, developer(req), id(req))));
  });

  router.get('/v1/webhooks/:id/deliveries', scope, async (req, res) => {
    res.json(await listEndpointDeliveries(db, developer(req), id(req), req.query));
  });

  router.post('/v1/webhooks/:id/deliveries/:deliveryId/retry', scope, async (req, res) => {
    res.json(formatDelivery(await retryDelivery(platform, developer(req), id(req), String(req.params.deliveryId))));
  });

  // The second reference form of registration: its documented errors are 401 invalid_api_key and 400 invalid_url.
  router.post('/v1/webhook_endpoints', asInvalidApiKey(scope), async (req, res) => {
    res.json(formatEndpoint(await createEndpoint(platform, developer(req), req.body, 'webhook_endpoints'), { withSecret: true }));
  });

  return router;
}

const KEY_PROBLEMS = new Set<ErrorCode>(['missing_token', 'invalid_token_format', 'invalid_token']);

/** A missing, malformed or unknown key is the one documented 401 invalid_api_key. */
function asInvalidApiKey(authenticate: RequestHandler): RequestHandler {
  return async (req, res, next) => {
    try {
      await authenticate(req, res, next);
    } catch (error) {
      if (error instanceof ServiceError && KEY_PROBLEMS.has(error.code)) throw serviceError('invalid_api_key');
      throw error;
    }
  };
}
