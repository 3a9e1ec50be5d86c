import { Router } from 'express';
import { COMPATIBLE_SURFACES } from '../../shared/compatibility/surfaces.js';
import { checkHealth } from '../../shared/health/health.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';

/** Public routes: no credential needed. */
export function systemRoutes(platform: GatewayServices): Router {
  const router = Router();

  // Always 200 while this process answers; `status` and each check say what is degraded.
  router.get('/v1/health', async (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    res.json(await checkHealth(platform));
  });

  router.get('/v1/compatibility', (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.json({ object: 'compatibility', api_version: 'v1', surfaces: COMPATIBLE_SURFACES });
  });

  return router;
}
