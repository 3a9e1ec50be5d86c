import { Context } from '@temporalio/activity';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { finalizeBatch, runBatchChunk, validateBatchInput, type ChunkInput, type ChunkOutcome, type ChunkProgress, type FinalOutcome, type ValidationOutcome } from '../shared/batches/run.js';

export type { ChunkInput, ChunkOutcome, FinalOutcome, ValidationOutcome };

/**
 * Batch activities: thin adapters over shared/batches/run.ts. Their names are what an operator
 * reads in the workflow history: validateBatchInput, runBatchChunk (one per chunk of lines, with
 * its progress in the heartbeat details), finalizeBatch.
 */
export function createBatchActivities(platform: GatewayServices) {
  return {
    async validateBatchInput(input: { batchId: string }): Promise<ValidationOutcome> {
      return validateBatchInput(platform, input.batchId);
    },

    async runBatchChunk(input: ChunkInput): Promise<ChunkOutcome> {
      const context = Context.current();
      // The last attempt's heartbeat says how far it got; the lines it recorded are skipped (they are no longer pending).
      const previous = context.info.heartbeatDetails as ChunkProgress | undefined;
      if (previous) platform.logger.info({ batchId: input.batchId, chunk: input.chunk, attempt: context.info.attempt, previous }, 'batch chunk resumed after a failed attempt');
      return runBatchChunk(platform, input, {
        signal: context.cancellationSignal,
        attempt: context.info.attempt,
        heartbeat: (progress: ChunkProgress) => context.heartbeat(progress),
      });
    },

    async finalizeBatch(input: { batchId: string; outcome: FinalOutcome; failure?: string }): Promise<string> {
      return finalizeBatch(platform, input.batchId, input.outcome, input.failure);
    },
  };
}

export type BatchActivities = ReturnType<typeof createBatchActivities>;
