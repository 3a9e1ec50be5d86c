import type { GatewayServices } from '../shared/composition/gateway.js';
import { purgeBrain } from '../shared/brains/repository.js';

/** Activities of brains: thin adapters over shared/brains. */
export function createBrainActivities(platform: GatewayServices) {
  return {
    purgeBrainContent: (brainId: string) => purgeBrain(platform.db, brainId),
  };
}

export type BrainActivities = ReturnType<typeof createBrainActivities>;
