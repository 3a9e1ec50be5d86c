import type { Request } from 'express';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { attributeCustomer } from '../../shared/customers/customers.js';
import { serviceError } from '../../shared/errors.js';
import { cancelFileBatch, createFileBatch, getFileBatch, listFileBatchFiles } from '../../shared/vector-stores/file-batches.js';
import {
  attachFileBody,
  createVectorStoreBody,
  fileBatchBody,
  fileListQuery,
  migrateBody,
  searchBody,
  unlockBody,
  updateFileBody,
  updateVectorStoreBody,
  vectorStoreListQuery,
} from '../../shared/vector-stores/schemas.js';
import { getMigration, startMigration } from '../../shared/vector-stores/migrations.js';
import { searchVectorStore } from '../../shared/vector-stores/search.js';
import {
  attachFile,
  cancelStoreFile,
  detachStoreFile,
  getStoreFile,
  listStoreFiles,
  retryStoreFile,
  storeFileContent,
  updateStoreFile,
} from '../../shared/vector-stores/store-files.js';
import {
  createVectorStore,
  deleteVectorStore,
  getVectorStore,
  listVectorStores,
  lockVectorStore,
  unlockVectorStore,
  updateVectorStore,
} from '../../shared/vector-stores/vector-stores.js';
import type { VectorStoreCaller } from '../../shared/vector-stores/common.js';
import { principalOf } from '../middleware/authenticate.js';
import { meteredCallOf } from '../middleware/metered-call.js';
import { paced, POLLED_RESPONSE } from '../poll-pace.js';
import { developerKey, metered, route, type RouteDefinition } from '../route-table.js';

/**
 * Vector stores (spec 1; OpenAI's /v1/vector_stores, so the openai SDK's vectorStores resource
 * works unchanged). A byok store's passphrase may come with any request as Svc-Vector-Store-Key;
 * Svc-Customer on an attach bills its embeddings to that customer's wallet.
 */
export function vectorStoreRoutes(platform: GatewayServices): RouteDefinition[] {
  const surface = 'vector_stores';
  const write = developerKey('api:write');
  const read = developerKey('api:read');
  const developer = (req: Request) => principalOf(req).accountId;
  const passphrase = (req: Request) => req.get('svc-vector-store-key') || undefined;

  /** The caller of a write that may embed: its payer, and the customer Svc-Customer names. */
  const caller = async (req: Request): Promise<VectorStoreCaller> => {
    const principal = principalOf(req);
    if (principal.kind !== 'developer_key') throw serviceError('endpoint_not_allowed_for_client_token');
    const reference = req.get('svc-customer')?.trim();
    const strict = /^true$/i.test(req.get('svc-customer-strict') ?? '');
    const customer = reference
      ? await attributeCustomer(platform.db, platform.limiter, principal.accountId, { reference, strict }, platform.config.LAZY_CREATE_PER_MINUTE)
      : null;
    return { developerId: principal.accountId, payerAccountId: principal.billingAccountId, customerId: customer?.id ?? null, passphrase: passphrase(req) };
  };

  return [
    route({
      method: 'post', path: '/v1/vector_stores', surface, summary: 'Create a vector store', access: write,
      input: { body: createVectorStoreBody },
      handle: async (req, res, { body }) => res.json(await createVectorStore(platform, await caller(req), body)),
    }),
    route({
      method: 'get', path: '/v1/vector_stores', surface, summary: 'List vector stores (50 a page by default, 200 at most)', access: read,
      input: { query: vectorStoreListQuery },
      handle: async (req, res, { query }) => res.json(await listVectorStores(platform, developer(req), query)),
    }),
    route({
      method: 'get', path: '/v1/vector_stores/:id', surface, summary: 'Retrieve a vector store', access: read,
      handle: async (req, res, { params }) => res.json(await getVectorStore(platform, developer(req), params.id)),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id', surface, summary: 'Modify a vector store', access: write,
      input: { body: updateVectorStoreBody },
      handle: async (req, res, { params, body }) => res.json(await updateVectorStore(platform, developer(req), params.id, body)),
    }),
    route({
      method: 'delete', path: '/v1/vector_stores/:id', surface, summary: 'Delete a vector store (its content is removed by a workflow)', access: write,
      handle: async (req, res, { params }) => res.json(await deleteVectorStore(platform, developer(req), params.id)),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/unlock', surface, summary: "Lease a byok store's key for ttl_seconds", access: write,
      input: { body: unlockBody },
      handle: async (req, res, { params, body }) => res.json(await unlockVectorStore(platform, developer(req), params.id, body)),
    }),
    route({
      method: 'delete', path: '/v1/vector_stores/:id/unlock', surface, summary: "End a byok store's lease now", access: write,
      handle: async (req, res, { params }) => res.json(await lockVectorStore(platform, developer(req), params.id)),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/search', surface, summary: 'Search a vector store (vector and full-text, fused)',
      access: metered('api:read', null), input: { body: searchBody },
      handle: async (req, res, { params, body }) => {
        const call = meteredCallOf(req);
        const searcher: VectorStoreCaller = { developerId: call.developerId, payerAccountId: call.payerAccountId, customerId: call.customer?.id ?? null, passphrase: passphrase(req) };
        res.json(await searchVectorStore(platform, searcher, call, params.id, body));
      },
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/files', surface, summary: 'Attach a file (its ingest is queued)', access: write,
      input: { body: attachFileBody }, response: POLLED_RESPONSE,
      handle: async (req, res, { params, body }) => res.json(paced(res, 'vector_store_file', await attachFile(platform, await caller(req), params.id, body))),
    }),
    route({
      method: 'get', path: '/v1/vector_stores/:id/files', surface, summary: "List a vector store's files", access: read,
      input: { query: fileListQuery },
      handle: async (req, res, { params, query }) => res.json(await listStoreFiles(platform, developer(req), params.id, query)),
    }),
    route({
      method: 'get', path: '/v1/vector_stores/:id/files/:fileId', surface, summary: 'Retrieve a vector store file', access: read, response: POLLED_RESPONSE,
      handle: async (req, res, { params }) => res.json(paced(res, 'vector_store_file', await getStoreFile(platform, developer(req), params.id, params.fileId))),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/files/:fileId', surface, summary: "Update a vector store file's attributes", access: write,
      input: { body: updateFileBody },
      handle: async (req, res, { params, body }) => res.json(await updateStoreFile(platform, developer(req), params.id, params.fileId, body.attributes)),
    }),
    route({
      method: 'delete', path: '/v1/vector_stores/:id/files/:fileId', surface, summary: 'Detach a file (the uploaded file stays)', access: write,
      handle: async (req, res, { params }) => res.json(await detachStoreFile(platform, developer(req), params.id, params.fileId)),
    }),
    route({
      method: 'get', path: '/v1/vector_stores/:id/files/:fileId/content', surface, summary: "A vector store file's parsed text, chunk by chunk", access: read,
      handle: async (req, res, { params }) => res.json(await storeFileContent(platform, { ...(await caller(req)), customerId: null }, params.id, params.fileId)),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/files/:fileId/cancel', surface, summary: "Cancel a file's ingest", access: write,
      handle: async (req, res, { params }) => res.json(await cancelStoreFile(platform, developer(req), params.id, params.fileId)),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/files/:fileId/retry', surface, summary: 'Ingest a failed or cancelled file again', access: write,
      handle: async (req, res, { params }) => res.json(await retryStoreFile(platform, await caller(req), params.id, params.fileId)),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/file_batches', surface, summary: 'Attach up to 500 files at once', access: write,
      input: { body: fileBatchBody }, response: POLLED_RESPONSE,
      handle: async (req, res, { params, body }) => res.json(paced(res, 'vector_store_file_batch', await createFileBatch(platform, await caller(req), params.id, body))),
    }),
    route({
      method: 'get', path: '/v1/vector_stores/:id/file_batches/:batchId', surface, summary: 'Retrieve a file batch', access: read, response: POLLED_RESPONSE,
      handle: async (req, res, { params }) => res.json(paced(res, 'vector_store_file_batch', await getFileBatch(platform, developer(req), params.id, params.batchId))),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/file_batches/:batchId/cancel', surface, summary: "Cancel a file batch's unfinished files", access: write,
      handle: async (req, res, { params }) => res.json(await cancelFileBatch(platform, developer(req), params.id, params.batchId)),
    }),
    route({
      method: 'get', path: '/v1/vector_stores/:id/file_batches/:batchId/files', surface, summary: "List a file batch's files", access: read,
      input: { query: fileListQuery },
      handle: async (req, res, { params, query }) => res.json(await listFileBatchFiles(platform, developer(req), params.id, params.batchId, query)),
    }),
    route({
      method: 'post', path: '/v1/vector_stores/:id/migrate', surface, summary: 'Re-embed the store with another model, blue-green (a Temporal workflow)', access: write,
      input: { body: migrateBody },
      handle: async (req, res, { params, body }) => res.json(await startMigration(platform, await caller(req), params.id, body)),
    }),
    route({
      method: 'get', path: '/v1/vector_stores/:id/migrations/:migrationId', surface, summary: 'Retrieve a migration and its progress', access: read,
      handle: async (req, res, { params }) => res.json(await getMigration(platform, developer(req), params.id, params.migrationId)),
    }),
  ];
}
