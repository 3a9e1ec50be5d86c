import { proxyLocalActivities } from '@temporalio/workflow';
import { LOCAL_MODEL_STEP } from '../../workflows/activity-profiles.js';

/**
 * The floor under the brains section's learn passes: a workflow of a learn pass's shape
 * (brainLearnWorkflow: two local activities one after the other, under the same profile) whose
 * activities do nothing. What the Temporal server and the SDK cost a pass before any learning.
 */
const steps = proxyLocalActivities<{ step(): Promise<void> }>(LOCAL_MODEL_STEP);

export async function learnShapedWorkflow(): Promise<void> {
  await steps.step();
  await steps.step();
}
