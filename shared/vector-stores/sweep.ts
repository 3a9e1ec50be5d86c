import type { GatewayServices } from '../composition/gateway.js';
import { withTransaction } from '../db/pool.js';
import { recordEvent } from '../events/outbox.js';
import { restartIngest } from './ingest.js';
import { startStoreDeletion } from './lifecycle.js';
import * as repo from './repository.js';

/**
 * The recovery sweep (a BullMQ job scheduler, every minute): work whose queued job or workflow
 * start was lost (Redis flushed, a process dying between commit and enqueue) is started again.
 * An ingest with no progress for `stalledSeconds` restarts at parse (its stages are idempotent);
 * a byok file cannot, since its key left with the lost job, so it fails with a message saying to
 * retry it unlocked. A store left deleting gets its deletion workflow (started idempotently).
 */
export const SWEEP_QUEUE = 'vector-store-sweep';

export async function sweepVectorStores(platform: GatewayServices, stalledSeconds: number): Promise<{ restarted: number; failed: number; deletions: number }> {
  let restarted = 0;
  let failed = 0;
  for (const file of await repo.stalledFiles(platform.db, stalledSeconds, 500)) {
    if (file.encryption === 'byok') {
      const error = { code: 'server_error', message: 'The ingest was interrupted while this byok store was locked; retry the file with the store unlocked.' };
      await withTransaction(platform.db, async (client) => {
        const moved = await repo.moveFile(client, file.vector_store_id, file.file_id, ['pending', 'in_progress'], 'failed', { attempt: file.attempt, error });
        if (moved) await recordEvent(client, file.developer_id, 'vector_store.file.failed', { vector_store_id: file.vector_store_id, file_id: file.file_id, last_error: error });
      });
      failed++;
      continue;
    }
    await repo.touchFile(platform.db, file.vector_store_id, file.file_id, file.attempt);
    await restartIngest(platform, { storeId: file.vector_store_id, fileId: file.file_id, attempt: file.attempt });
    restarted++;
  }
  const deleting = await repo.stalledDeletions(platform.db, stalledSeconds);
  for (const storeId of deleting) await startStoreDeletion(platform, storeId);
  return { restarted, failed, deletions: deleting.length };
}
