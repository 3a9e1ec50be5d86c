import { condition, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { BrainActivities } from '../workers/brain-activities.js';
import { heartbeatingChunk, RESOURCE_STEP } from './activity-profiles.js';

/** Mirrors shared/brains/reindex.ts (workflow code imports no runtime code from shared/). */
export interface ReindexWorkflowInput {
  jobId: string;
  rollbackWindowSeconds: number;
  heartbeatTimeoutSeconds: number;
}

/** POST /v1/brains/{id}/reindex/{jobId}/rollback marks the job rolling_back, then sends this. */
export const rollbackSignal = defineSignal('rollback');

const steps = proxyActivities<BrainActivities>(RESOURCE_STEP);

/**
 * A brain's reindex (workflow id = job id). Its history reads: beginReindex, embedMissingChunks
 * again and again until the new space holds every row (each heartbeating, each resuming where a
 * killed one stopped), indexReindexSpace, swapReindex (refused if a write landed meanwhile).
 * Then the rollback window: a timer, unless the rollback signal comes first, in which case rows
 * written since the swap are embedded back and swapBack restores the prior model and space.
 * When the window closes, dropPriorSpace. A failure before the swap ends in abandonReindex.
 */
export async function brainReindexWorkflow(input: ReindexWorkflowInput): Promise<string> {
  const { jobId } = input;
  let rollbackRequested = false;
  setHandler(rollbackSignal, () => {
    rollbackRequested = true;
  });
  const chunk = heartbeatingChunk(input.heartbeatTimeoutSeconds);
  const { embedMissingChunks } = proxyActivities<BrainActivities>({ ...chunk, retry: { ...chunk.retry, maximumAttempts: 10 } });
  try {
    if (!(await steps.beginReindex(jobId))) return 'stopped';
    while ((await embedMissingChunks(jobId, 'forward')).remaining > 0);
    await steps.indexReindexSpace(jobId);
    const swap = await steps.swapReindex(jobId);
    if (swap !== 'swapped') return swap;
  } catch (error) {
    const reason = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
    await steps.abandonReindex(jobId, reason);
    throw error;
  }

  const signalled = await condition(() => rollbackRequested, input.rollbackWindowSeconds * 1_000);
  if (!signalled && (await steps.dropPriorSpace(jobId)) === 'dropped') return 'completed';
  while ((await embedMissingChunks(jobId, 'back')).remaining > 0);
  return steps.swapBack(jobId);
}
