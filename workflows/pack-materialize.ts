import { proxyActivities } from '@temporalio/workflow';
import type { BrainActivities } from '../workers/brain-activities.js';
import { heartbeatingChunk } from './activity-profiles.js';

/** Mirrors shared/brains/mount-versions.ts (workflow code imports no runtime code from shared/). */
export interface MaterializeWorkflowInput {
  mountId: string;
  version: number;
  heartbeatTimeoutSeconds: number;
}

/**
 * A materialize mount's import of one pack version (workflow id pack-materialize-<mount id>-v<version>):
 * materializeMount copies the version into the brain and flips the mount to ready in one
 * transaction, heartbeating meanwhile; a killed worker's attempt rolls back whole and the next
 * one starts over. 'stale' when the mount was deleted or moved to another version first.
 */
export async function packMaterializeWorkflow(input: MaterializeWorkflowInput): Promise<string> {
  const { materializeMount } = proxyActivities<BrainActivities>(heartbeatingChunk(input.heartbeatTimeoutSeconds));
  return materializeMount(input.mountId, input.version);
}
