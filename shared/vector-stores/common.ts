import { getAccount } from '../accounts/accounts.js';
import type { GatewayServices } from '../composition/gateway.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { recordEvent } from '../events/outbox.js';
import { serviceError } from '../errors.js';
import * as repo from './repository.js';

/** What every vector-store module shares: the services they use, the caller, and the few rules all of them apply. */
export type VectorStoreServices = Pick<GatewayServices, 'db' | 'config' | 'queues' | 'vectorStoreKeys' | 'temporal' | 'logger'>;

/** Who pays: the developer, their payer account, and the customer named by Svc-Customer, if any. */
export interface Attribution {
  developerId: string;
  payerAccountId: string;
  /** The customer whose prepaid wallet pays for the embeddings (Svc-Customer), or null for the developer's. */
  customerId: string | null;
}

/** Who acts on a store: the developer, the wallet that pays its embeddings, and a byok passphrase sent with the request. */
export interface VectorStoreCaller extends Attribution {
  /** Svc-Vector-Store-Key, for a byok store without a lease. */
  passphrase: string | undefined;
}

/** Store and file lists: 50 by default, 200 at most (spec 1, "Pagination"). */
export const STORE_PAGE = { defaultLimit: 50, maxLimit: 200 };

/** How a store's vectors are searched, from its settings: PostgreSQL's HNSW, an exact scan, or IVF lists in the CPU pool. */
export type SearchIndex = 'hnsw' | 'flat' | 'ivf';
export function searchIndexOf(store: Pick<repo.VectorStoreRow, 'vector_sealing' | 'vector_index'>): SearchIndex {
  if (store.vector_sealing === 'full') return store.vector_index === 'ivf' ? 'ivf' : 'flat';
  return store.vector_index === 'flat' ? 'flat' : 'hnsw';
}

/**
 * A store the caller may read: 404 when it is not theirs or is deleting or deleted (even while its
 * content is still being removed), as OpenAI answers once DELETE returned. Writes go through
 * activeStore, which refuses such a store 409 vector_store_unavailable as spec 1 says.
 */
export async function readableStore(q: Queryable, developerId: string, id: string): Promise<repo.StoreWithCounts> {
  const store = await repo.findStore(q, developerId, id);
  if (!store || store.state !== 'active') throw serviceError('vector_store_not_found');
  return store;
}

/** A store the caller may write to: 404 when it is not theirs, 409 vector_store_unavailable while it is deleted. */
export async function activeStore(q: Queryable, developerId: string, id: string, lock?: 'share' | 'update'): Promise<repo.VectorStoreRow> {
  const store = lock ? await repo.lockStore(q, developerId, id, lock) : await repo.findStore(q, developerId, id);
  if (!store) throw serviceError('vector_store_not_found');
  if (store.state !== 'active') throw serviceError('vector_store_unavailable');
  return store;
}

/**
 * A store suspended for non-payment (its embeddings found the developer's wallet empty) refuses
 * work that embeds with 402 vector_store_suspended until the wallet can pay again; the first
 * request that finds it funded resumes the store.
 */
export async function assertNotSuspended(platform: Pick<GatewayServices, 'db'>, store: Pick<repo.VectorStoreRow, 'id' | 'developer_id' | 'suspended_at'>, payerAccountId: string): Promise<void> {
  if (!store.suspended_at) return;
  const payer = await getAccount(platform.db, payerAccountId);
  if (Number(payer.balance_micros) <= 0) throw serviceError('vector_store_suspended');
  await withTransaction(platform.db, async (client) => {
    if (await repo.setSuspended(client, store.id, false)) await recordEvent(client, store.developer_id, 'vector_store.resumed', { id: store.id });
  });
}

export const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

export { withIds } from '../pagination.js';
