import { Router } from 'express';
import { createEmbeddings, planEmbeddings } from '../../shared/inference/embeddings.js';
import type { Platform } from '../../shared/platform/platform.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

export function embeddingRoutes(platform: Platform): Router {
  const router = Router();
  router.post('/v1/embeddings', meteredCall(platform, { developer: 'api:chat', clientToken: 'embeddings' }), async (req, res) => {
    const plan = planEmbeddings(req.body, platform.providers);
    const created = await createEmbeddings(platform, meteredCallOf(req), plan, { signal: abortWhenClientLeaves(res) });
    setWalletHeaders(res, created);
    res.json(created.body);
  });
  return router;
}
