import { withTransaction } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { acceptIdCursor } from '../files/files.js';
import { newId } from '../ids.js';
import { parseMetadata } from '../metadata.js';
import { EMBEDDING_MODEL_HINT, embeddingModel } from '../models/catalog.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import { LEASE_DEFAULT_SECONDS } from './keyring.js';
import * as repo from './repository.js';
import type { CreateVectorStoreBody, UpdateVectorStoreBody } from './schemas.js';
import { attachFiles } from './store-files.js';
import { activeStore, readableStore, searchIndexOf, seconds, STORE_PAGE, withIds, type VectorStoreCaller, type VectorStoreServices } from './common.js';
import { startStoreDeletion } from './lifecycle.js';



const MAX_NAME_BYTES = 256;


/** Every rule of create, checked before anything is written. */
export function planStore(body: CreateVectorStoreBody): { store: Omit<repo.NewVectorStore, 'id' | 'wrapped_data_key' | 'kdf_salt'>; passphrase: string | undefined } {
  if (body.name !== undefined && Buffer.byteLength(body.name) > MAX_NAME_BYTES) throw serviceError('name_too_long', { param: 'name' });
  if (body.embedding_model === undefined) throw serviceError('missing_embedding_model', { param: 'embedding_model' });
  const model = embeddingModel(body.embedding_model);
  if (!model) throw serviceError('invalid_embedding_model', { param: 'embedding_model', message: EMBEDDING_MODEL_HINT });
  const dimensions = dimensionsOf(model, body.dimensions);

  const encryption = body.encryption ?? 'none';
  const sealing = body.vector_sealing ?? (encryption === 'none' ? 'none' : 'full');
  if (encryption === 'none' && sealing !== 'none') {
    throw serviceError('invalid_vector_sealing', { param: 'vector_sealing', message: 'vector_sealing source or full needs encryption managed or byok.' });
  }
  const index = body.vector_index ?? 'auto';
  if (index === 'ivf' && sealing !== 'full') throw serviceError('ivf_requires_encryption', { param: 'vector_index' });

  let passphrase: string | undefined;
  if (encryption === 'byok') {
    if (!body.key) throw serviceError('byok_key_required', { param: 'key' });
    if (body.key.type !== 'passphrase') throw serviceError('byok_kms_unavailable', { param: 'key.type' });
    if (body.key.passphrase === undefined || body.key.passphrase === '') throw serviceError('missing_passphrase', { param: 'key.passphrase' });
    if ([...body.key.passphrase].length < 12) throw serviceError('byok_passphrase_too_short', { param: 'key.passphrase' });
    passphrase = body.key.passphrase;
  } else if (body.key) {
    throw serviceError('not_a_byok_store', { param: 'key', message: 'key is taken only with encryption byok.' });
  }

  return {
    store: {
      name: body.name ?? null,
      description: body.description ?? null,
      embedding_model: model.model,
      dimensions,
      encryption,
      vector_sealing: sealing,
      vector_index: index,
      graphrag_enabled: body.graphrag_enabled ?? false,
      metadata: body.metadata == null ? null : parseMetadata(body.metadata),
      expires_after_days: body.expires_after?.days ?? null,
    },
    passphrase,
  };
}

/** `dimensions` of a model: its own unless shortened, which only text-embedding-3-* allow. */
export function dimensionsOf(model: NonNullable<ReturnType<typeof embeddingModel>>, requested: number | undefined): number {
  if (requested === undefined || requested === model.dimensions) return model.dimensions!;
  if (!model.shortenable || requested > model.dimensions!) {
    throw serviceError('invalid_dimensions', {
      param: 'dimensions',
      message: model.shortenable ? `dimensions must be from 1 to ${model.dimensions} for ${model.model}.` : `${model.model} has ${model.dimensions} dimensions and cannot be shortened.`,
    });
  }
  return requested;
}

export async function createVectorStore(platform: VectorStoreServices, caller: VectorStoreCaller, body: CreateVectorStoreBody) {
  const { store, passphrase } = planStore(body);
  const id = newId('vs_');
  const key = await platform.vectorStoreKeys.createStoreKey(id, store.encryption, passphrase);
  const row = { ...store, id, wrapped_data_key: key.wrapped_data_key, kdf_salt: key.kdf_salt };
  const created = await withTransaction(platform.db, async (client) => {
    await repo.insertStore(client, caller.developerId, row, searchIndexOf(row) === 'hnsw' ? row.dimensions : null);
    await recordEvent(client, caller.developerId, 'vector_store.created', { id, name: row.name, embedding_model: row.embedding_model });
    return (await repo.findStore(client, caller.developerId, id))!;
  });
  if (body.file_ids?.length) {
    // The store exists either way; files that cannot be attached fail the request with their code, as on POST .../files.
    await attachFiles(platform, caller, created, body.file_ids.map((fileId) => ({ file_id: fileId, chunking_strategy: body.chunking_strategy })), { batchId: null, dataKey: key.dataKey });
  }
  return formatVectorStore((await repo.findStore(platform.db, caller.developerId, id))!, null);
}

export async function getVectorStore(platform: VectorStoreServices, developerId: string, id: string) {
  const store = await readableStore(platform.db, developerId, id);
  return formatVectorStore(store, await platform.vectorStoreKeys.leaseExpiresAt(store));
}

export async function listVectorStores(platform: VectorStoreServices, developerId: string, query: { limit?: string; after?: string; order?: 'asc' | 'desc' }): Promise<Page<ReturnType<typeof formatVectorStore>>> {
  const page = pageRequest({ limit: query.limit, after: acceptIdCursor(query.after, 'vs_') }, STORE_PAGE);
  const rows = await repo.listStores(platform.db, developerId, { ...page, order: query.order ?? 'desc' });
  return withIds(toPage(rows, page, (row) => formatVectorStore(row, null)));
}

export async function updateVectorStore(platform: VectorStoreServices, developerId: string, id: string, body: UpdateVectorStoreBody) {
  if (body.name != null && Buffer.byteLength(body.name) > MAX_NAME_BYTES) throw serviceError('name_too_long', { param: 'name' });
  const metadata = body.metadata === undefined ? undefined : body.metadata === null ? null : parseMetadata(body.metadata);
  await withTransaction(platform.db, async (client) => {
    await activeStore(client, developerId, id, 'share');
    await repo.updateStore(client, developerId, id, {
      ...(body.name !== undefined && { name: body.name }),
      ...(body.description !== undefined && { description: body.description }),
      ...(metadata !== undefined && { metadata }),
      ...(body.expires_after !== undefined && { expires_after_days: body.expires_after?.days ?? null }),
    });
  });
  return getVectorStore(platform, developerId, id);
}

export async function deleteVectorStore(platform: VectorStoreServices, developerId: string, id: string) {
  await withTransaction(platform.db, async (client) => {
    const store = await repo.lockStore(client, developerId, id, 'update');
    if (!store) throw serviceError('vector_store_not_found');
    if (store.state !== 'active') throw serviceError('vector_store_unavailable');
    await repo.setStoreState(client, id, 'deleting');
    await recordEvent(client, developerId, 'vector_store.deleted', { id });
  });
  await startStoreDeletion(platform, id);
  return { id, object: 'vector_store.deleted' as const, deleted: true };
}

/** POST /v1/vector_stores/{id}/unlock: a lease on a byok store's key, for `ttl_seconds`. */
export async function unlockVectorStore(platform: VectorStoreServices, developerId: string, id: string, body: { passphrase?: string; ttl_seconds?: number }) {
  const store = await activeStore(platform.db, developerId, id);
  if (store.encryption !== 'byok') throw serviceError('not_a_byok_store');
  if (!body.passphrase) throw serviceError('missing_passphrase', { param: 'passphrase' });
  const { expiresAt } = await platform.vectorStoreKeys.unlock(store, body.passphrase, body.ttl_seconds ?? LEASE_DEFAULT_SECONDS);
  return { object: 'vector_store.lease' as const, vector_store_id: id, expires_at: Math.floor(expiresAt.getTime() / 1000) };
}

export async function lockVectorStore(platform: VectorStoreServices, developerId: string, id: string) {
  const store = await activeStore(platform.db, developerId, id);
  await platform.vectorStoreKeys.lock(store);
  return { object: 'vector_store.lease' as const, vector_store_id: id, expires_at: null };
}


/** OpenAI's vector-store object, plus the spec's settings; `locked_until` tells a byok store's lease. */
export function formatVectorStore(store: repo.StoreWithCounts, leaseExpiresAt: Date | null) {
  const expiresAt = store.expires_after_days === null ? null : Math.floor(store.last_active_at.getTime() / 1000) + store.expires_after_days * 86_400;
  const status = store.state !== 'active' ? store.state : expiresAt !== null && expiresAt * 1000 < Date.now() ? 'expired' : store.file_counts.in_progress > 0 ? 'in_progress' : 'completed';
  return {
    id: store.id,
    object: 'vector_store' as const,
    created_at: seconds(store.created_at),
    name: store.name ?? '',
    description: store.description,
    usage_bytes: store.usage_bytes,
    file_counts: store.file_counts,
    status,
    expires_after: store.expires_after_days === null ? null : { anchor: 'last_active_at' as const, days: store.expires_after_days },
    expires_at: expiresAt,
    last_active_at: seconds(store.last_active_at),
    metadata: store.metadata ?? {},
    embedding_model: store.embedding_model,
    dimensions: store.dimensions,
    encryption: store.encryption,
    vector_sealing: store.vector_sealing,
    vector_index: store.vector_index,
    graphrag_enabled: store.graphrag_enabled,
    suspended_at: store.suspended_at && seconds(store.suspended_at),
    ...(store.encryption === 'byok' && { unlocked_until: leaseExpiresAt && seconds(leaseExpiresAt) }),
  };
}


