import { Router } from 'express';
import { runMeteredCall } from '../../shared/billing/metered-call.js';
import { newId } from '../../shared/ids.js';
import { translateUpstream, withRetries } from '../../shared/inference/chat.js';
import { planModeration } from '../../shared/inference/moderations.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf } from '../middleware/metered-call.js';

const CALL_DEADLINE_MS = 30_000;

export function moderationRoutes(platform: GatewayServices): Router {
  const router = Router();
  router.post('/v1/moderations', meteredCall(platform, { developer: 'api:chat', clientToken: 'moderations' }), async (req, res) => {
    const plan = planModeration(req.body, platform.providers);
    const signal = abortWhenClientLeaves(res);
    // Metered at zero: nothing is reserved or charged, but the call is recorded like any other.
    const settled = await runMeteredCall(platform, meteredCallOf(req), 0, async () => {
      const result = await withRetries(() => plan.adapter.moderate!({ model: plan.model, upstreamModel: plan.model.model, input: plan.input, signal: signal }), Date.now() + CALL_DEADLINE_MS, signal);
      return { result, model: plan.model.id, costMicros: 0, tokensIn: 0, tokensOut: 0 };
    }).catch((error: unknown) => {
      throw translateUpstream(error);
    });
    res.json({ id: newId('modr-'), model: plan.model.model, results: settled.result.results });
  });
  return router;
}
