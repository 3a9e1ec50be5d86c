import { withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { acceptIdCursor } from '../files/files.js';
import * as filesRepo from '../files/repository.js';
import { pageRequest, toPage } from '../pagination.js';
import { AUTO_CHUNKING } from './chunking.js';
import { openText, textAad } from './crypto.js';
import { enqueueIngest, finishBatchIn } from './ingest.js';
import * as repo from './repository.js';
import { activeStore, readableStore, assertNotSuspended, seconds, STORE_PAGE, withIds, type VectorStoreCaller, type VectorStoreServices } from './common.js';

/**
 * Files of a vector store (OpenAI's /v1/vector_stores/{id}/files): attaching a file queues its
 * ingest; its status moves pending -> in_progress -> completed | failed | cancelled, with cancel
 * and retry as the spec's transitions. The file object's id is the file's own id.
 */

export interface FileToAttach {
  file_id: string;
  attributes?: repo.StoreFileRow['attributes'] | undefined;
  chunking_strategy?: { type: 'auto' } | { type: 'static'; static: { max_chunk_size_tokens: number; chunk_overlap_tokens: number } } | undefined;
}

function chunkingOf(strategy: FileToAttach['chunking_strategy']): repo.StoreFileRow['chunking'] {
  return strategy?.type === 'static' ? { type: 'static', ...strategy.static } : { type: 'auto', ...AUTO_CHUNKING };
}

/**
 * Attaches files and queues their ingest. Every file must be the developer's (404 file_not_found
 * before anything is written). A byok store's key must be at hand (lease or passphrase): the
 * queued stages carry it wrapped by the master key, since they outlive the request.
 */
export async function attachFiles(
  platform: VectorStoreServices,
  caller: VectorStoreCaller,
  store: repo.VectorStoreRow,
  files: FileToAttach[],
  options: { batchId: string | null; dataKey?: Buffer | null },
): Promise<repo.StoreFileRow[]> {
  await assertNotSuspended(platform, store, caller.payerAccountId);
  const dataKey = store.encryption === 'byok' ? (options.dataKey ?? (await platform.vectorStoreKeys.dataKey(store, caller.passphrase))) : null;
  const known = await filesRepo.findFiles(platform.db, caller.developerId, [...new Set(files.map((file) => file.file_id))]);
  const missing = files.find((file) => !known.has(file.file_id));
  if (missing) throw serviceError('file_not_found', { param: 'file_id', message: `No file ${JSON.stringify(missing.file_id.slice(0, 64))} of yours.` });

  const attached = await withTransaction(platform.db, async (client) => {
    await activeStore(client, caller.developerId, store.id, 'share');
    return repo.upsertFiles(
      client,
      caller,
      store.id,
      files.map((file) => ({ fileId: file.file_id, customerId: caller.customerId, batchId: options.batchId, attributes: file.attributes ?? null, chunking: chunkingOf(file.chunking_strategy) })),
    );
  });
  await enqueueIngest(platform, store, attached, dataKey);
  return attached;
}

export async function attachFile(platform: VectorStoreServices, caller: VectorStoreCaller, storeId: string, file: FileToAttach) {
  const store = await activeStore(platform.db, caller.developerId, storeId);
  const [attached] = await attachFiles(platform, caller, store, [file], { batchId: null });
  return formatStoreFile(attached!);
}

export async function getStoreFile(platform: VectorStoreServices, developerId: string, storeId: string, fileId: string) {
  await storeOf(platform.db, developerId, storeId);
  return formatStoreFile(await fileOf(platform.db, storeId, fileId));
}

export async function listStoreFiles(
  platform: VectorStoreServices,
  developerId: string,
  storeId: string,
  query: { limit?: string; after?: string; order?: 'asc' | 'desc'; filter?: string },
  batchId?: string,
) {
  await storeOf(platform.db, developerId, storeId);
  const page = pageRequest({ limit: query.limit, after: acceptIdCursor(query.after, 'file_') }, STORE_PAGE);
  const rows = await repo.listStoreFiles(platform.db, storeId, { ...page, order: query.order ?? 'desc' }, { status: query.filter, batchId });
  return withIds(toPage(rows.map((row) => ({ ...row, id: row.file_id })), page, formatStoreFile));
}

export async function updateStoreFile(platform: VectorStoreServices, developerId: string, storeId: string, fileId: string, attributes: repo.StoreFileRow['attributes']) {
  await activeStore(platform.db, developerId, storeId);
  const updated = await repo.updateFileAttributes(platform.db, storeId, fileId, attributes);
  if (!updated) throw serviceError('vector_store_file_not_found');
  return formatStoreFile(updated);
}

/** Detaches a file: its chunks go with it; the uploaded file itself stays (DELETE /v1/files removes that). */
export async function detachStoreFile(platform: VectorStoreServices, developerId: string, storeId: string, fileId: string) {
  const removed = await withTransaction(platform.db, async (client) => {
    await activeStore(client, developerId, storeId, 'share');
    return repo.deleteStoreFile(client, storeId, fileId);
  });
  if (!removed) throw serviceError('vector_store_file_not_found');
  return { id: fileId, object: 'vector_store.file.deleted' as const, deleted: true };
}

/** pending or in_progress -> cancelled (409 file_not_cancellable otherwise); its chunks are removed. */
export async function cancelStoreFile(platform: VectorStoreServices, developerId: string, storeId: string, fileId: string) {
  const cancelled = await withTransaction(platform.db, async (client) => {
    await activeStore(client, developerId, storeId, 'share');
    await repo.lockBatchOfFile(client, storeId, fileId);
    const file = await fileOf(client, storeId, fileId, true);
    if (file.status !== 'pending' && file.status !== 'in_progress') throw serviceError('file_not_cancellable');
    const moved = (await repo.moveFile(client, storeId, fileId, ['pending', 'in_progress'], 'cancelled'))!;
    await repo.deleteFileChunks(client, storeId, fileId);
    await finishBatchIn(client, moved);
    return moved;
  });
  return formatStoreFile(cancelled);
}

/** failed or cancelled -> pending, as a new attempt (409 file_not_retryable otherwise). */
export async function retryStoreFile(platform: VectorStoreServices, caller: VectorStoreCaller, storeId: string, fileId: string) {
  const store = await activeStore(platform.db, caller.developerId, storeId);
  await assertNotSuspended(platform, store, caller.payerAccountId);
  const dataKey = store.encryption === 'byok' ? await platform.vectorStoreKeys.dataKey(store, caller.passphrase) : null;
  const retried = await withTransaction(platform.db, async (client) => {
    await activeStore(client, caller.developerId, storeId, 'share');
    const file = await fileOf(client, storeId, fileId, true);
    if (file.status !== 'failed' && file.status !== 'cancelled') throw serviceError('file_not_retryable');
    return (await repo.moveFile(client, storeId, fileId, ['failed', 'cancelled'], 'pending'))!;
  });
  await enqueueIngest(platform, store, [retried], dataKey);
  return formatStoreFile(retried);
}

/** The parsed text of a file, chunk by chunk (OpenAI's file content page); a sealed store needs its key. */
export async function storeFileContent(platform: VectorStoreServices, caller: VectorStoreCaller, storeId: string, fileId: string) {
  const store = await storeOf(platform.db, caller.developerId, storeId);
  await fileOf(platform.db, storeId, fileId);
  const keys = await platform.vectorStoreKeys.keys(store, caller.passphrase);
  const chunks = await repo.fileChunks(platform.db, storeId, store.active_space, fileId);
  return {
    object: 'vector_store.file_content.page' as const,
    data: chunks.map((chunk) => ({ type: 'text' as const, text: chunk.text ?? openText(keys!, chunk.text_sealed!, textAad(storeId, fileId, chunk.chunk_index)) })),
    has_more: false,
    next_page: null,
  };
}

const storeOf = readableStore;

async function fileOf(q: Queryable, storeId: string, fileId: string, lock = false): Promise<repo.StoreFileRow> {
  const file = await repo.findStoreFile(q, storeId, fileId, lock);
  if (!file) throw serviceError('vector_store_file_not_found');
  return file;
}

/** OpenAI's vector_store.file object. pending reads as in_progress there (the SDK's poll waits on in_progress only). */
export function formatStoreFile(file: repo.StoreFileRow) {
  return {
    id: file.file_id,
    object: 'vector_store.file' as const,
    created_at: seconds(file.created_at),
    vector_store_id: file.vector_store_id,
    status: file.status === 'pending' ? ('in_progress' as const) : file.status,
    ingest_status: file.status,
    usage_bytes: file.usage_bytes,
    last_error: file.last_error_code === null ? null : { code: file.last_error_code, message: file.last_error_message ?? '' },
    attributes: file.attributes ?? {},
    chunking_strategy:
      file.chunking.type === 'static'
        ? { type: 'static' as const, static: { max_chunk_size_tokens: file.chunking.max_chunk_size_tokens, chunk_overlap_tokens: file.chunking.chunk_overlap_tokens } }
        : { type: 'static' as const, static: { ...AUTO_CHUNKING } },
    ...(file.batch_id && { batch_id: file.batch_id }),
  };
}
