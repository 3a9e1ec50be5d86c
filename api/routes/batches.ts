import type { Request } from 'express';
import { batchCreateBody, cancelBatch, createBatch, formatBatch, getBatch, listBatches, type BatchRuntime } from '../../shared/batches/batches.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { pageQuery } from '../../shared/pagination.js';
import { principalOf } from '../middleware/authenticate.js';
import { paced, POLLED_RESPONSE } from '../poll-pace.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/** Batches: JSONL files of requests run by a durable workflow each; callers poll the batch object. */
export function batchRoutes(platform: GatewayServices): RouteDefinition[] {
  const runtime: BatchRuntime = platform;
  const developer = (req: Request) => principalOf(req).accountId;
  const surface = 'batches';
  return [
    route({
      method: 'post', path: '/v1/batches', surface, summary: 'Create a batch from an uploaded JSONL file',
      access: developerKey('api:write'), input: { body: batchCreateBody, bodyOptional: true }, response: POLLED_RESPONSE,
      handle: async (req, res, { body }) => {
        const principal = principalOf(req);
        // A linked account's batches are paid from its parent's wallet, as its synchronous calls are.
        const payerAccountId = principal.kind === 'developer_key' ? principal.billingAccountId : principal.accountId;
        res.json(paced(res, 'batch', formatBatch(await createBatch(runtime, { developerId: principal.accountId, payerAccountId }, body))));
      },
    }),
    route({
      method: 'get', path: '/v1/batches', surface, summary: 'List batches',
      access: developerKey('api:read'), input: { query: pageQuery },
      handle: async (req, res, { query }) => {
        res.json(await listBatches(platform.db, developer(req), query));
      },
    }),
    route({
      method: 'get', path: '/v1/batches/:id', surface, summary: 'Retrieve a batch',
      access: developerKey('api:read'), response: POLLED_RESPONSE,
      handle: async (req, res, { params }) => {
        res.json(paced(res, 'batch', formatBatch(await getBatch(platform.db, developer(req), params.id))));
      },
    }),
    route({
      method: 'post', path: '/v1/batches/:id/cancel', surface, summary: 'Cancel a batch',
      access: developerKey('api:write'),
      handle: async (req, res, { params }) => {
        res.json(formatBatch(await cancelBatch(runtime, developer(req), params.id)));
      },
    }),
  ];
}
