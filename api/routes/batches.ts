import { Router, type Request } from 'express';
import { cancelBatch, createBatch, formatBatch, getBatch, listBatches, type BatchRuntime } from '../../shared/batches/batches.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf, requireDeveloperKey } from '../middleware/authenticate.js';

/** Batches: JSONL files of requests run by a durable workflow each; callers poll the batch object. */
export function batchRoutes(platform: GatewayServices): Router {
  const runtime: BatchRuntime = platform;
  const router = Router();
  const developer = (req: Request) => principalOf(req).accountId;

  router.post('/v1/batches', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    const principal = principalOf(req);
    // A linked account's batches are paid from its parent's wallet, as its synchronous calls are.
    const payerAccountId = principal.kind === 'developer_key' ? principal.billingAccountId : principal.accountId;
    res.json(formatBatch(await createBatch(runtime, { developerId: principal.accountId, payerAccountId }, req.body)));
  });

  router.get('/v1/batches', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(await listBatches(platform.db, developer(req), req.query));
  });

  router.get('/v1/batches/:id', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(formatBatch(await getBatch(platform.db, developer(req), String(req.params.id))));
  });

  router.post('/v1/batches/:id/cancel', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    res.json(formatBatch(await cancelBatch(runtime, developer(req), String(req.params.id))));
  });

  return router;
}
