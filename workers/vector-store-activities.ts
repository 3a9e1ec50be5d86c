import type { GatewayServices } from '../shared/composition/gateway.js';
import { removeStoreContent } from '../shared/vector-stores/lifecycle.js';
import { abandonMigration, flipMigration, prepareMigration, reembedBatch, retireOldSpace } from '../shared/vector-stores/migrations.js';
import { heartbeating } from './activity-support.js';

/** Activities of vector-store workflows (deletion, migration): thin adapters over shared/vector-stores. */
export function createVectorStoreActivities(platform: GatewayServices) {
  return {
    async removeVectorStoreContent(storeId: string): Promise<void> {
      await removeStoreContent(platform.db, storeId);
    },
    prepareMigration: (migrationId: string) => prepareMigration(platform, migrationId),
    reembedMigrationBatch: (migrationId: string, wrappedKey: string | undefined) => heartbeating(2_000, (beat) => reembedBatch(platform, migrationId, wrappedKey, beat)),
    flipMigration: (migrationId: string) => flipMigration(platform, migrationId),
    retireOldSpace: (migrationId: string, wrappedKey: string | undefined) => retireOldSpace(platform, migrationId, wrappedKey),
    abandonMigration: (migrationId: string, reason: string) => abandonMigration(platform, migrationId, reason),
  };
}

export type VectorStoreActivities = ReturnType<typeof createVectorStoreActivities>;
