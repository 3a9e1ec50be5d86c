import { archiveCustomer, createCustomer, formatCustomer, getCustomer, listCustomers, updateCustomer } from '../../shared/customers/customers.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { customerBody, customerListQuery } from '../../shared/customers/schemas.js';
import { principalOf } from '../middleware/authenticate.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/** Customers: billing subjects of a developer's end users. A path id is `cus_…` or `ext:<external_id>`. */
export function customerRoutes(platform: GatewayServices): RouteDefinition[] {
  const { db } = platform;
  const developer = (req: Parameters<typeof principalOf>[0]) => principalOf(req).accountId;
  const surface = 'customers';
  return [
    route({
      method: 'post', path: '/v1/customers', surface, summary: 'Create a customer',
      access: developerKey('api:write'), input: { body: customerBody, bodyOptional: true },
      handle: async (req, res, { body }) => {
        res.json(formatCustomer(await createCustomer(db, developer(req), body)));
      },
    }),
    route({
      method: 'get', path: '/v1/customers', surface, summary: 'List customers',
      access: developerKey('api:read'), input: { query: customerListQuery },
      handle: async (req, res, { query }) => {
        res.json(await listCustomers(db, developer(req), query));
      },
    }),
    route({
      method: 'get', path: '/v1/customers/:id', surface, summary: 'Retrieve a customer',
      access: developerKey('api:read'),
      handle: async (req, res, { params }) => {
        res.json(formatCustomer(await getCustomer(db, developer(req), params.id)));
      },
    }),
    route({
      method: 'patch', path: '/v1/customers/:id', surface, summary: 'Update a customer',
      access: developerKey('api:write'), input: { body: customerBody },
      handle: async (req, res, { params, body }) => {
        res.json(formatCustomer(await updateCustomer(db, developer(req), params.id, body)));
      },
    }),
    route({
      method: 'post', path: '/v1/customers/:id/archive', surface, summary: 'Archive a customer',
      access: developerKey('api:write'),
      handle: async (req, res, { params }) => {
        res.json(formatCustomer(await archiveCustomer(db, developer(req), params.id)));
      },
    }),
  ];
}
