import { Router } from 'express';
import { planRerank, rerank } from '../../shared/inference/rerank.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

/** The common rerank wire shape; billed as one search unit. Any valid key; not for client tokens. */
export function rerankRoutes(platform: GatewayServices): Router {
  const router = Router();
  router.post('/v1/rerank', meteredCall(platform, { developer: 'any', clientToken: null }), async (req, res) => {
    const plan = planRerank(req.body, platform.providers);
    const ranked = await rerank(platform, meteredCallOf(req), plan, abortWhenClientLeaves(res));
    setWalletHeaders(res, ranked);
    res.json(ranked.body);
  });
  return router;
}
