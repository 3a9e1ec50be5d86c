import { Router } from 'express';
import { z } from 'zod';
import { meteredCall, meteredCallOf, setWalletHeaders } from '../../api/middleware/metered-call.js';
import { runMeteredCall } from '../../shared/billing/metered-call.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';

/**
 * A metered route with no upstream: the whole governance chain of a real metered call
 * (authentication, attribution, the four rate-limit layers, reserve and settle) around a call
 * whose cost and tokens the request body states. Benchmarks and tests mount it until the
 * inference routes exist; it is never mounted by `npm start`.
 */
const probeBody = z.object({
  max_cost_micros: z.number().int().min(0).default(1_000),
  cost_micros: z.number().int().min(0).default(500),
  tokens_in: z.number().int().min(0).default(10),
  tokens_out: z.number().int().min(0).default(5),
  user: z.string().optional(),
});

export function meteredProbeRoutes(platform: GatewayServices): Router {
  const router = Router();
  router.post('/v1/_probe/metered', meteredCall(platform, { developer: 'api:chat', clientToken: 'chat' }), async (req, res) => {
    const body = probeBody.parse(req.body ?? {});
    const call = meteredCallOf(req);
    const settled = await runMeteredCall(platform, call, body.max_cost_micros, async () => ({
      result: { ok: true },
      model: 'svc:probe/none',
      costMicros: body.cost_micros,
      tokensIn: body.tokens_in,
      tokensOut: body.tokens_out,
    }));
    setWalletHeaders(res, settled);
    res.json({ object: 'probe', customer_id: call.customer?.id ?? null, deducted_usd: settled.deductedMicros / 1e6 });
  });
  return router;
}
