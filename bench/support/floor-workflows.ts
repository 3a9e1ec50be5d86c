import { proxyLocalActivities } from '@temporalio/workflow';

/**
 * Workflows with nothing inside them, for the assistant bench's floor: what the Temporal server
 * and the SDK cost per workflow on this machine, before a run does any work of its own.
 */
const steps = proxyLocalActivities<{ step(last: boolean): Promise<void> }>({ startToCloseTimeout: '30 seconds' });

/** Starts and ends; its one local step only tells the bench it ended. */
export async function emptyWorkflow(): Promise<void> {
  await steps.step(true);
}

/** The shape of a run without tools (start, model step, finish), each step doing nothing. */
export async function runShapedWorkflow(): Promise<void> {
  await steps.step(false);
  await steps.step(false);
  await steps.step(true);
}
