import { ApplicationFailure, condition, defineSignal, patched, proxyLocalActivities, setHandler } from '@temporalio/workflow';
import type { AssistantActivities } from '../workers/assistant-activities.js';
import { QUICK_STEP } from './activity-profiles.js';

/** Mirrors shared/assistants/runs.ts (workflow code imports no runtime code from shared/). */
export interface RunWorkflowInput {
  runId: string;
  requiresActionSeconds: number;
  /** How long a model step retries on its own worker before retries go through the server (Temporal's local retry threshold). */
  heartbeatSeconds: number;
}

/** Wake-ups only: submit_tool_outputs and cancel write the run row first, and the activities read it. */
export const toolOutputsSignal = defineSignal('toolOutputs');
export const cancelRunSignal = defineSignal('cancelRun');

/**
 * The run's quick database steps (start, the wake-up check, finish) are local activities: they run
 * on the worker that runs the workflow, without a round trip through the Temporal server each,
 * which a run would otherwise pay several times over a millisecond of work.
 */
const steps = proxyLocalActivities<AssistantActivities>(QUICK_STEP);

/** Model calls one run may make before it fails (shared/assistants/run-engine.ts MAX_RUN_STEPS). */
const MAX_RUN_STEPS = 24;

/**
 * One run of an assistant on a thread (workflow id = run id). Its history reads: runModelStep 0,
 * 1, ... (each one model call through the gateway's chat path, file_search run inside it; step 0
 * starts the run), waiting between them for tool outputs when the model calls a function, until
 * the model answers in text, which completes the run in the same step. A run without tools is
 * therefore one local activity. A worker killed mid-step is replaced and the step, recorded once,
 * answers as it did.
 */
export async function assistantRunWorkflow(input: RunWorkflowInput): Promise<string> {
  const { runId } = input;
  // A model call (chat's own deadline is 2 minutes, retries included); a permanent refusal fails at once.
  // A local activity too: the call runs on the workflow's worker, saving two trips through the
  // server a step; a worker that dies mid-call is replaced when its workflow task times out, and
  // the step, recorded once and billed under its own key, runs again there.
  const { runModelStep } = proxyLocalActivities<AssistantActivities>({
    startToCloseTimeout: '5 minutes',
    localRetryThreshold: `${input.heartbeatSeconds} seconds`,
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 6 },
  });
  // A count, not a flag: a wake-up that arrives in the same activation as a step's result (signals
  // are delivered first) must not be cleared by the code that then starts waiting.
  let wakeups = 0;
  setHandler(toolOutputsSignal, () => {
    wakeups++;
  });
  setHandler(cancelRunSignal, () => {
    wakeups++;
  });
  // Runs begun before start and finish moved into the model step replay their own history.
  const startsInModelStep = patched('run-starts-and-completes-in-model-step');
  try {
    if (!startsInModelStep) {
      const started = await steps.startRun(runId);
      if (started.cancelling) return finish(runId, 'cancelled');
      if (!started.running) return 'stopped';
    }
    for (let step = 0; step < MAX_RUN_STEPS; ) {
      const outcome = await runModelStep(runId, step);
      switch (outcome.kind) {
        case 'message':
          return startsInModelStep ? 'completed' : finish(runId, 'completed');
        case 'cancelling':
          return finish(runId, 'cancelled');
        case 'stopped':
          return 'stopped';
        case 'tools':
          step = outcome.nextStep;
          break;
        case 'requires_action': {
          let after: Awaited<ReturnType<AssistantActivities['afterRequiresAction']>>;
          // The row first: the outputs may already be in (a lost or early signal), then wait for a wake-up or the time limit.
          for (;;) {
            const seen = wakeups;
            after = await steps.afterRequiresAction(runId);
            if (after !== 'waiting') break;
            await condition(() => wakeups > seen, `${input.requiresActionSeconds} seconds`);
          }
          if (after === 'cancelling') return finish(runId, 'cancelled');
          if (after === 'expired' || after === 'stopped') return after;
          step += 1;
          break;
        }
      }
    }
    throw ApplicationFailure.create({ message: `the run made ${MAX_RUN_STEPS} model calls without an answer`, type: 'max_steps', nonRetryable: true });
  } catch (error) {
    const failure = error instanceof Error ? (error.cause instanceof ApplicationFailure ? error.cause : error) : undefined;
    const code = failure instanceof ApplicationFailure && failure.type ? failure.type : 'server_error';
    await steps.finishRun(runId, 'failed', { code, message: failure?.message ?? 'The run failed.' });
    return 'failed';
  }
}

async function finish(runId: string, outcome: 'completed' | 'cancelled'): Promise<string> {
  await steps.finishRun(runId, outcome, undefined);
  return outcome;
}
