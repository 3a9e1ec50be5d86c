import { Router } from 'express';
import { adjustCustomerWallet, getCustomerWallet, topUpCustomerWallet } from '../../shared/billing/customer-wallets.js';
import { usageReport } from '../../shared/billing/reports.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf, requireDeveloperKey } from '../middleware/authenticate.js';

/** Customer prepaid wallets, and usage / margin reports for the developer or one customer. */
export function billingRoutes(platform: GatewayServices): Router {
  const { db, config } = platform;
  const router = Router();
  const developer = (req: Parameters<typeof principalOf>[0]) => principalOf(req).accountId;
  const customer = (req: { params: Record<string, unknown> }) => String(req.params.id);

  router.get('/v1/customers/:id/wallet', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(await getCustomerWallet(db, developer(req), customer(req)));
  });
  router.post('/v1/customers/:id/wallet/topup', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    res.json(await topUpCustomerWallet(db, config, developer(req), customer(req), req.body));
  });
  router.post('/v1/customers/:id/wallet/adjust', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    res.json(await adjustCustomerWallet(db, config, developer(req), customer(req), req.body));
  });

  // /v1/margin is the same report; its name says what the caller reads it for.
  for (const path of ['/v1/usage', '/v1/margin']) {
    router.get(path, requireDeveloperKey(platform, 'api:read'), async (req, res) => {
      res.json(await usageReport(db, developer(req), req.query));
    });
    router.get(`/v1/customers/:id${path.slice(3)}`, requireDeveloperKey(platform, 'api:read'), async (req, res) => {
      res.json(await usageReport(db, developer(req), req.query, customer(req)));
    });
  }
  return router;
}
