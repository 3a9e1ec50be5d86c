import type { GatewayServices } from '../shared/composition/gateway.js';
import { commitLearnPass, extractMemories, requestConsolidation } from '../shared/brains/learning.js';
import { materializeMount } from '../shared/brains/mounts.js';
import { buildVersion, failVersion, indexBuiltVersion } from '../shared/brains/packs.js';
import { abandonReindex, beginReindex, dropPriorSpace, embedMissingChunks, indexReindexSpace, swapBack, swapReindex } from '../shared/brains/reindex.js';
import { purgeBrain } from '../shared/brains/repository.js';
import { consolidateScope, pruneColdMemories } from '../shared/brains/upkeep.js';
import { beatingWhile, heartbeating } from './activity-support.js';

/** Activities of brains: thin adapters over shared/brains. */
export function createBrainActivities(platform: GatewayServices) {
  return {
    purgeBrainContent: (brainId: string) => purgeBrain(platform.db, brainId),
    beginReindex: (jobId: string) => beginReindex(platform, jobId),
    embedMissingChunks: (jobId: string, direction: 'forward' | 'back') => heartbeating(2_000, (beat) => embedMissingChunks(platform, jobId, direction, beat)),
    indexReindexSpace: (jobId: string) => indexReindexSpace(platform, jobId),
    swapReindex: (jobId: string) => swapReindex(platform, jobId),
    swapBack: (jobId: string) => swapBack(platform, jobId),
    dropPriorSpace: (jobId: string) => dropPriorSpace(platform, jobId),
    abandonReindex: (jobId: string, reason: string) => abandonReindex(platform, jobId, reason),
    // A pass ends its own refusals (skipped, failed); what escapes is infrastructure, retried.
    // Its steps run as local activities now; the beats serve passes begun before, still on regular ones.
    extractMemories: (passId: string) => beatingWhile(2_000, () => extractMemories(platform, passId)),
    commitLearnPass: (passId: string) => beatingWhile(2_000, () => commitLearnPass(platform, passId)),
    requestConsolidation: (brainId: string, scope: string) => requestConsolidation(platform, brainId, scope),
    consolidateScope: (brainId: string, scope: string) => beatingWhile(2_000, () => consolidateScope(platform, brainId, scope)),
    pruneColdMemories: (at: string) => pruneColdMemories(platform, new Date(at)),
    buildPackVersion: async (versionId: string) => {
      const built = await buildVersion(platform, versionId);
      return built?.status ?? 'missing';
    },
    failPackVersion: (versionId: string, reason: string) => failVersion(platform, versionId, reason),
    indexPackVersion: (versionId: string) => indexBuiltVersion(platform, versionId),
    materializeMount: (mountId: string, version: number) => heartbeating(2_000, (beat) => materializeMount(platform, mountId, version, beat)),
  };
}

export type BrainActivities = ReturnType<typeof createBrainActivities>;
