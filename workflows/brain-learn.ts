import { proxyActivities } from '@temporalio/workflow';
import type { BrainActivities } from '../workers/brain-activities.js';
import { MODEL_STEP, RESOURCE_STEP } from './activity-profiles.js';

const steps = proxyActivities<BrainActivities>(RESOURCE_STEP);
const modelSteps = proxyActivities<BrainActivities>(MODEL_STEP);

/**
 * One learn pass (workflow id = pass id, so a retried observe joins it, and a completed pass is
 * never run again). Its history reads: extractMemories (the ignore gate and the extraction call,
 * recorded in the pass row), commitLearnPass (judgements, embeddings and one transaction that
 * files everything with the pass's completion), then, when the scope is crowded, a request for
 * its consolidation. Memory text stays in PostgreSQL (sealed when the brain is), never here.
 */
export async function brainLearnWorkflow(input: { passId: string }): Promise<unknown> {
  const extracted = await modelSteps.extractMemories(input.passId);
  if (extracted.next === 'done') return extracted.result;
  const committed = await modelSteps.commitLearnPass(input.passId);
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
