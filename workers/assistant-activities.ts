import type { GatewayServices } from '../shared/composition/gateway.js';
import { afterRequiresAction, finishRun, runModelStep, startRun } from '../shared/assistants/run-engine.js';
import { heartbeating } from './activity-support.js';

/** Activities of assistant runs: thin adapters over shared/assistants/run-engine.ts. */
export function createAssistantActivities(platform: GatewayServices) {
  return {
    startRun: (runId: string) => startRun(platform, runId),
    // A dead step is noticed within a second or two of heartbeats.
    runModelStep: (runId: string, stepIndex: number) => heartbeating(1_000, () => runModelStep(platform, runId, stepIndex)),
    afterRequiresAction: (runId: string) => afterRequiresAction(platform, runId),
    finishRun: (runId: string, outcome: 'completed' | 'failed' | 'cancelled' | 'expired', error: { code: string; message: string } | undefined) => finishRun(platform, runId, outcome, { ...(error && { error }) }),
  };
}

export type AssistantActivities = ReturnType<typeof createAssistantActivities>;
