import { proxyActivities } from '@temporalio/workflow';
import type { BrainActivities } from '../workers/brain-activities.js';
import { RESOURCE_STEP } from './activity-profiles.js';

const steps = proxyActivities<BrainActivities>({ ...RESOURCE_STEP, retry: { ...RESOURCE_STEP.retry, maximumAttempts: 5 } });

/**
 * A pack version over 1,000 entries (workflow id pack-build-<version id>): buildPackVersion copies
 * the brain as it stood at the snapshot in one transaction (a retry starts clean), the version
 * turns ready, then a plaintext version gets the HNSW index its reference mounts search. A build
 * that keeps failing marks the version failed.
 */
export async function packBuildWorkflow(input: { versionId: string }): Promise<string> {
  try {
    await steps.buildPackVersion(input.versionId);
  } catch (error) {
    const reason = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
    await steps.failPackVersion(input.versionId, reason);
    return 'failed';
  }
  await steps.indexPackVersion(input.versionId);
  return 'ready';
}
