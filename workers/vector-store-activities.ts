import type { GatewayServices } from '../shared/composition/gateway.js';
import { removeStoreContent } from '../shared/vector-stores/lifecycle.js';

/** Activities of vector-store workflows: thin adapters over shared/vector-stores. */
export function createVectorStoreActivities(platform: GatewayServices) {
  return {
    async removeVectorStoreContent(storeId: string): Promise<void> {
      await removeStoreContent(platform.db, storeId);
    },
  };
}

export type VectorStoreActivities = ReturnType<typeof createVectorStoreActivities>;
