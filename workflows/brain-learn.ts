import { patched, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { BrainActivities } from '../workers/brain-activities.js';
import { LOCAL_MODEL_STEP, MODEL_STEP, RESOURCE_STEP } from './activity-profiles.js';

const steps = proxyActivities<BrainActivities>(RESOURCE_STEP);
const modelSteps = proxyActivities<BrainActivities>(MODEL_STEP);

/**
 * A learn pass's steps as local activities: they run on the worker that runs the pass, inside its
 * workflow task, so a pass costs the Temporal server one workflow task instead of three plus two
 * activity tasks (the server's CPU was a third of the machine's under load). A worker that dies
 * mid-step is replaced when the task times out, and the step runs again there; each step keeps
 * its outcome in the pass row, so a step run twice asks the model once and files once.
 */
const localModelSteps = proxyLocalActivities<BrainActivities>(LOCAL_MODEL_STEP);

/**
 * One learn pass (workflow id = pass id, so a retried observe joins it, and a completed pass is
 * never run again). Its history reads: extractMemories (the ignore gate and the extraction call,
 * recorded in the pass row), commitLearnPass (judgements, embeddings and one transaction that
 * files everything with the pass's completion), then, when the scope is crowded, a request for
 * its consolidation. Memory text stays in PostgreSQL (sealed when the brain is), never here.
 */
export async function brainLearnWorkflow(input: { passId: string }): Promise<unknown> {
  // Passes begun before the steps became local replay their own history.
  const learn = patched('learn-steps-local') ? localModelSteps : modelSteps;
  const extracted = await learn.extractMemories(input.passId);
  if (extracted.next === 'done') return extracted.result;
  const committed = await learn.commitLearnPass(input.passId);
  if (committed.consolidate) await steps.requestConsolidation(committed.brainId, committed.scope);
  return committed.result;
}

/** Merges related memories of a crowded scope (one per brain and scope at a time). */
export async function brainConsolidationWorkflow(input: { brainId: string; scope: string }): Promise<{ merged: number; replaced: number }> {
  return modelSteps.consolidateScope(input.brainId, input.scope);
}

/**
 * Prunes cold soft memories of every brain; run daily by the `brain-prune` schedule. `at` stands
 * in for now (a test, or an operator replaying a day); by default it is the workflow's own clock.
 */
export async function brainPruneWorkflow(input: { at?: string }): Promise<{ brains: number; pruned: number }> {
  return steps.pruneColdMemories(input.at ?? new Date().toISOString());
}
