import { Router } from 'express';
import type { HiveServices } from '../../../shared/composition/hive.js';
import { checkHiveHealth } from '../../../shared/hive/health.js';

/** Routes with no credential (spec 3). */
export function healthRoutes(hive: HiveServices): Router {
  const router = Router();

  // 200 while the hive can read its tables; 503 with the hive's error body when it cannot.
  router.get('/v1/health', async (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    res.json(await checkHiveHealth(hive));
  });

  return router;
}
