import { Router } from 'express';
import { createEmbeddings, planEmbeddings } from '../../shared/inference/embeddings.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

export function embeddingRoutes(platform: GatewayServices): Router {
  const router = Router();
  router.post('/v1/embeddings', meteredCall(platform, { developer: 'api:chat', clientToken: 'embeddings' }), async (req, res) => {
    const plan = planEmbeddings(req.body, platform.providers);
    const created = await createEmbeddings(platform, meteredCallOf(req), plan, { signal: abortWhenClientLeaves(res) });
    setWalletHeaders(res, created);
    res.json(created.body);
  });
  return router;
}
