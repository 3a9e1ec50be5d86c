import { ActivityCancellationType, CancellationScope, defineSignal, isCancellation, proxyActivities, setHandler, sleep } from '@temporalio/workflow';
import type { BatchActivities, FinalOutcome } from '../workers/batch-activities.js';
import { heartbeatingChunk, RESOURCE_STEP } from './activity-profiles.js';

/** Mirrors shared/batches/batches.ts (workflow code imports no runtime code from shared/). */
export interface BatchWorkflowInput {
  batchId: string;
  /** Unix milliseconds: the end of the completion window. */
  expiresAt: number;
  heartbeatTimeoutSeconds: number;
}

/** POST /v1/batches/{id}/cancel: stop handing out chunks, cancel the running ones, end as cancelled. */
export const cancelBatchSignal = defineSignal('cancelBatch');

/**
 * One batch (workflow id = batch id). Its history reads: validateBatchInput, then runBatchChunk
 * for chunk 1 of N, 2 of N ... (a few at once, each heartbeating its progress), then
 * finalizeBatch. A chunk whose worker dies is retried and resumes at its first unfinished line;
 * the completion window is a durable timer; a cancel arrives as the cancelBatch signal.
 */
export async function batchWorkflow(input: BatchWorkflowInput): Promise<string> {
  try {
    return await runBatch(input);
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // The workflow itself was cancelled (an operator in the Web UI, `temporal workflow cancel`):
    // its chunks have stopped, so the batch ends cancelled with what it finished, like a cancel signal.
    return CancellationScope.nonCancellable(() => finalizeBatch({ batchId: input.batchId, outcome: 'cancelled' }));
  }
}

const { validateBatchInput, finalizeBatch } = proxyActivities<BatchActivities>(RESOURCE_STEP);

async function runBatch(input: BatchWorkflowInput): Promise<string> {
  const { batchId } = input;

  let stop: 'cancelled' | 'expired' | undefined;
  let failure: string | undefined;
  const work = new CancellationScope();
  setHandler(cancelBatchSignal, () => {
    stop ??= 'cancelled';
    work.cancel();
  });

  const plan = await validateBatchInput({ batchId });
  if (plan.outcome === 'finished') return 'finished';
  if (plan.outcome === 'cancelling') stop ??= 'cancelled';

  const window = new CancellationScope();
  void window
    .run(() => sleep(Math.max(0, input.expiresAt - Date.now()), { summary: 'completion window (24h)' }))
    .then(
      () => {
        stop ??= 'expired';
        work.cancel();
      },
      () => undefined,
    );

  if (!stop && plan.outcome === 'run') {
    const chunks = Math.ceil(plan.runnable / plan.chunkSize);
    let next = 0;
    try {
      await work.run(async () => {
        const lane = async () => {
          while (next < chunks && !stop && failure === undefined) {
            const chunk = next++;
            const { runBatchChunk } = proxyActivities<BatchActivities>({
              ...heartbeatingChunk(input.heartbeatTimeoutSeconds),
              summary: `chunk ${chunk + 1} of ${chunks}: lines ${chunk * plan.chunkSize + 1}-${Math.min(plan.runnable, (chunk + 1) * plan.chunkSize)}`,
              // A cancelled chunk first records the lines it finished; finalize must not read before that.
              // (Explicit: an unset cancellationType is encoded as TRY_CANCEL.)
              cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            });
            try {
              const outcome = await runBatchChunk({ batchId, chunk, from: chunk * plan.chunkSize, to: Math.min(plan.runnable, (chunk + 1) * plan.chunkSize) });
              // The row said cancelling before the signal arrived: stop handing out chunks.
              if (outcome.stopped) stop ??= 'cancelled';
            } catch (error) {
              if (isCancellation(error)) throw error;
              failure ??= error instanceof Error ? error.message : String(error);
            }
          }
        };
        // Every lane settles before finalize reads the results: a cancelled chunk first writes what it finished.
        const lanes = await Promise.allSettled(Array.from({ length: Math.min(plan.parallelChunks, chunks) }, lane));
        const rejected = lanes.find((result) => result.status === 'rejected');
        if (rejected) throw rejected.reason;
      });
    } catch (error) {
      if (!isCancellation(error) || !stop) throw error;
    }
  }
  window.cancel();

  const outcome: FinalOutcome = failure !== undefined ? 'failed' : (stop ?? 'completed');
  return finalizeBatch({ batchId, outcome, ...(failure !== undefined && { failure }) });
}
