import { ApplicationFailure, heartbeat } from '@temporalio/activity';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { ServiceError } from '../shared/errors.js';
import { afterRequiresAction, finishRun, runModelStep, startRun } from '../shared/assistants/run-engine.js';

/** Activities of assistant runs: thin adapters over shared/assistants/run-engine.ts. */
export function createAssistantActivities(platform: GatewayServices) {
  return {
    startRun: (runId: string) => startRun(platform, runId),
    runModelStep: (runId: string, stepIndex: number) =>
      permanentAsNonRetryable(async () => {
        // Heartbeats flow while the model answers, so a live step is never taken for dead and a dead one is soon.
        const beating = setInterval(() => heartbeat(), 1_000);
        try {
          return await runModelStep(platform, runId, stepIndex);
        } finally {
          clearInterval(beating);
        }
      }),
    afterRequiresAction: (runId: string) => afterRequiresAction(platform, runId),
    finishRun: (runId: string, outcome: 'completed' | 'failed' | 'cancelled' | 'expired', error: { code: string; message: string } | undefined) => finishRun(platform, runId, outcome, error),
  };
}

/** A refusal retrying cannot cure (an empty wallet, a provider refusing the input) fails the run at once, with its code. */
async function permanentAsNonRetryable<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ServiceError && error.status < 500 && error.status !== 429) {
      throw ApplicationFailure.create({ message: error.message, type: error.code, nonRetryable: true });
    }
    throw error;
  }
}

export type AssistantActivities = ReturnType<typeof createAssistantActivities>;
