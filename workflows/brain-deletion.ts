import { proxyActivities } from '@temporalio/workflow';
import type { BrainActivities } from '../workers/brain-activities.js';
import { RESOURCE_STEP } from './activity-profiles.js';

/** Mirrors shared/brains/brains.ts deleteBrain (workflow code imports no runtime code from shared/). */
export interface BrainDeletionInput {
  brainId: string;
}

const { purgeBrainContent } = proxyActivities<BrainActivities>(RESOURCE_STEP);

/**
 * A deleted brain (workflow id `brain-deletion-<brain id>`): it already reads as gone; this drops
 * its chunk partition and its entry versions. Retried until the database answers.
 */
export async function brainDeletionWorkflow(input: BrainDeletionInput): Promise<string> {
  await purgeBrainContent(input.brainId);
  return 'deleted';
}
