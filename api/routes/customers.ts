import { Router } from 'express';
import { archiveCustomer, createCustomer, formatCustomer, getCustomer, listCustomers, updateCustomer } from '../../shared/customers/customers.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf, requireDeveloperKey } from '../middleware/authenticate.js';

/** Customers: billing subjects of a developer's end users. A path id is `cus_…` or `ext:<external_id>`. */
export function customerRoutes(platform: GatewayServices): Router {
  const { db } = platform;
  const router = Router();
  const developer = (req: Parameters<typeof principalOf>[0]) => principalOf(req).accountId;

  router.post('/v1/customers', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    res.json(formatCustomer(await createCustomer(db, developer(req), req.body)));
  });

  router.get('/v1/customers', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(await listCustomers(db, developer(req), req.query));
  });

  router.get('/v1/customers/:id', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(formatCustomer(await getCustomer(db, developer(req), String(req.params.id))));
  });

  router.patch('/v1/customers/:id', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    res.json(formatCustomer(await updateCustomer(db, developer(req), String(req.params.id), req.body)));
  });

  router.post('/v1/customers/:id/archive', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    res.json(formatCustomer(await archiveCustomer(db, developer(req), String(req.params.id))));
  });

  return router;
}
