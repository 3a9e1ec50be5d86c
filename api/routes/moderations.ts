import { Router } from 'express';
import { moderate, planModeration } from '../../shared/inference/moderations.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf } from '../middleware/metered-call.js';

export function moderationRoutes(platform: GatewayServices): Router {
  const router = Router();
  router.post('/v1/moderations', meteredCall(platform, { developer: 'api:chat', clientToken: 'moderations' }), async (req, res) => {
    const plan = planModeration(req.body, platform.providers);
    res.json(await moderate(platform, meteredCallOf(req), plan, { signal: abortWhenClientLeaves(res) }));
  });
  return router;
}
