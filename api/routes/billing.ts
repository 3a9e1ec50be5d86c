import { adjustCustomerWallet, getCustomerWallet, topUpCustomerWallet, walletAmountBody } from '../../shared/billing/customer-wallets.js';
import { usageQuery, usageReport } from '../../shared/billing/reports.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf } from '../middleware/authenticate.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/** Customer prepaid wallets, and usage / margin reports for the developer or one customer. */
export function billingRoutes(platform: GatewayServices): RouteDefinition[] {
  const { db, config } = platform;
  const developer = (req: Parameters<typeof principalOf>[0]) => principalOf(req).accountId;
  const wallets = 'customer_wallets';
  const reports = 'usage_reports';
  return [
    route({
      method: 'get', path: '/v1/customers/:id/wallet', surface: wallets, summary: "Retrieve a customer's prepaid wallet",
      access: developerKey('api:read'),
      handle: async (req, res, { params }) => {
        res.json(await getCustomerWallet(db, developer(req), params.id));
      },
    }),
    route({
      method: 'post', path: '/v1/customers/:id/wallet/topup', surface: wallets, summary: "Move money from the developer's wallet into a customer's",
      access: developerKey('api:write'), input: { body: walletAmountBody, bodyOptional: true },
      handle: async (req, res, { params, body }) => {
        res.json(await topUpCustomerWallet(db, config, developer(req), params.id, body));
      },
    }),
    route({
      method: 'post', path: '/v1/customers/:id/wallet/adjust', surface: wallets, summary: "Adjust a customer's wallet up or down",
      access: developerKey('api:write'), input: { body: walletAmountBody, bodyOptional: true },
      handle: async (req, res, { params, body }) => {
        res.json(await adjustCustomerWallet(db, config, developer(req), params.id, body));
      },
    }),
    // /v1/margin is the same report; its name says what the caller reads it for.
    ...['/v1/usage', '/v1/margin'].flatMap((path) => [
      route({
        method: 'get', path, surface: reports, summary: `${path === '/v1/usage' ? 'Usage' : 'Margin'} report of the developer`,
        access: developerKey('api:read'), input: { query: usageQuery },
        handle: async (req, res, { query }) => {
          res.json(await usageReport(db, developer(req), query));
        },
      }),
      route({
        method: 'get', path: `/v1/customers/:id${path.slice(3)}`, surface: reports, summary: `${path === '/v1/usage' ? 'Usage' : 'Margin'} report of one customer`,
        access: developerKey('api:read'), input: { query: usageQuery },
        handle: async (req, res, { params, query }) => {
          res.json(await usageReport(db, developer(req), query, params.id));
        },
      }),
    ]),
  ];
}
