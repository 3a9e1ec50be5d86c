import type { z } from 'zod';
import { withTransaction } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { finishBatchIn } from './ingest.js';
import * as repo from './repository.js';
import type { fileBatchBody } from './schemas.js';
import { attachFiles, listStoreFiles, type FileToAttach } from './store-files.js';
import { activeStore, readableStore, seconds, type VectorStoreCaller, type VectorStoreServices } from './common.js';

/**
 * File batches (OpenAI's /v1/vector_stores/{id}/file_batches): up to 500 files attached in one
 * call. A batch has no state of its own beyond its cancel: its status and file_counts are read
 * from its files, so they always add up.
 */
export const MAX_BATCH_FILES = 500;

export async function createFileBatch(platform: VectorStoreServices, caller: VectorStoreCaller, storeId: string, body: z.output<typeof fileBatchBody>) {
  const files: FileToAttach[] = [
    ...(body.file_ids ?? []).map((fileId) => ({ file_id: fileId, attributes: body.attributes, chunking_strategy: body.chunking_strategy })),
    ...(body.files ?? []).map((file) => ({ file_id: file.file_id, attributes: file.attributes ?? body.attributes, chunking_strategy: file.chunking_strategy ?? body.chunking_strategy })),
  ];
  if (files.length === 0) throw serviceError('invalid_file_ids', { param: 'file_ids' });
  if (files.length > MAX_BATCH_FILES) throw serviceError('too_many_files', { param: 'file_ids' });
  if (new Set(files.map((file) => file.file_id)).size !== files.length) {
    throw serviceError('invalid_file_ids', { param: 'file_ids', message: 'file_ids names the same file twice.' });
  }
  const store = await activeStore(platform.db, caller.developerId, storeId);
  const id = newId('vsfb_');
  await withTransaction(platform.db, (client) => repo.insertFileBatch(client, caller.developerId, storeId, id));
  await attachFiles(platform, caller, store, files, { batchId: id });
  return getFileBatch(platform, caller.developerId, storeId, id);
}

export async function getFileBatch(platform: VectorStoreServices, developerId: string, storeId: string, id: string) {
  await storeOf(platform, developerId, storeId);
  const batch = await repo.findFileBatch(platform.db, storeId, id);
  if (!batch) throw serviceError('file_batch_not_found');
  return formatFileBatch(batch);
}

/** Stops the batch's queued and running files (they end cancelled); finished files stay as they are. */
export async function cancelFileBatch(platform: VectorStoreServices, developerId: string, storeId: string, id: string) {
  await withTransaction(platform.db, async (client) => {
    await activeStore(client, developerId, storeId, 'share');
    if (!(await repo.findFileBatch(client, storeId, id))) throw serviceError('file_batch_not_found');
    // Its UPDATE of the batch row takes the batch's lock before its files'.
    const cancelled = await repo.cancelFileBatch(client, storeId, id);
    for (const file of cancelled) await repo.deleteFileChunks(client, storeId, file.file_id);
    await finishBatchIn(client, { batch_id: id, developer_id: developerId });
  });
  return getFileBatch(platform, developerId, storeId, id);
}

export async function listFileBatchFiles(platform: VectorStoreServices, developerId: string, storeId: string, id: string, query: Parameters<typeof listStoreFiles>[3]) {
  await getFileBatch(platform, developerId, storeId, id);
  return listStoreFiles(platform, developerId, storeId, query, id);
}

async function storeOf(platform: VectorStoreServices, developerId: string, storeId: string) {
  return readableStore(platform.db, developerId, storeId);
}

function formatFileBatch(batch: repo.FileBatchRow) {
  const counts = batch.file_counts;
  const status =
    // A cancelled batch reads in_progress until its running files stop (the SDK's poll waits on in_progress only).
    counts.in_progress > 0 ? 'in_progress' : batch.cancelled_at ? 'cancelled' : counts.failed > 0 && counts.completed === 0 ? 'failed' : 'completed';
  return {
    id: batch.id,
    object: 'vector_store.files_batch' as const,
    created_at: seconds(batch.created_at),
    vector_store_id: batch.vector_store_id,
    status,
    file_counts: counts,
  };
}
