import { ApplicationFailure, heartbeat } from '@temporalio/activity';
import { ServiceError } from '../shared/errors.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { removeStoreContent } from '../shared/vector-stores/lifecycle.js';
import { abandonMigration, flipMigration, prepareMigration, reembedBatch, retireOldSpace } from '../shared/vector-stores/migrations.js';

/** Activities of vector-store workflows (deletion, migration): thin adapters over shared/vector-stores. */
export function createVectorStoreActivities(platform: GatewayServices) {
  return {
    async removeVectorStoreContent(storeId: string): Promise<void> {
      await removeStoreContent(platform.db, storeId);
    },
    prepareMigration: (migrationId: string) => prepareMigration(platform, migrationId),
    reembedMigrationBatch: (migrationId: string, wrappedKey: string | undefined) =>
      permanentAsNonRetryable(async () => {
        // Heartbeats flow while an embedding call waits on a slow upstream, so a live batch is never taken for dead.
        const beating = setInterval(() => heartbeat(), 2_000);
        try {
          return await reembedBatch(platform, migrationId, wrappedKey, () => heartbeat());
        } finally {
          clearInterval(beating);
        }
      }),
    flipMigration: (migrationId: string) => flipMigration(platform, migrationId),
    retireOldSpace: (migrationId: string, wrappedKey: string | undefined) => retireOldSpace(platform, migrationId, wrappedKey),
    abandonMigration: (migrationId: string, reason: string) => abandonMigration(platform, migrationId, reason),
  };
}

/** A refusal that retrying cannot cure (a wallet empty, the provider refusing the input) fails the workflow at once. */
async function permanentAsNonRetryable<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ServiceError && error.status < 500 && error.status !== 429) {
      throw ApplicationFailure.create({ message: `${error.code}: ${error.message}`, type: error.code, nonRetryable: true });
    }
    throw error;
  }
}

export type VectorStoreActivities = ReturnType<typeof createVectorStoreActivities>;
