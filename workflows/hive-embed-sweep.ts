import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { HiveActivities } from '../workers/hive-activities.js';
import { heartbeatingChunk, QUICK_STEP } from './activity-profiles.js';

const pages = proxyActivities<HiveActivities>(heartbeatingChunk(20));
const steps = proxyActivities<HiveActivities>(QUICK_STEP);

const PAGES_PER_RUN = 500;

interface SweepState {
  jobId?: string;
  after?: string;
  totals?: { embedded: number; stale: number; refused: number; pages: number };
}

/**
 * An embedding sweep (workflow id = job id; a run of the `hive-embed-sweep` schedule opens its own
 * job, of every organisation): one hiveEmbedSweepPage per page of memories lacking a vector of the
 * configured model, walking by id from where the last page ended, then finishHiveEmbedSweep.
 */
export async function hiveEmbedSweepWorkflow(input: SweepState): Promise<Record<string, unknown>> {
  const jobId = input.jobId ?? (await steps.openScheduledHiveJob('embed', workflowInfo().workflowId));
  const totals = { embedded: 0, stale: 0, refused: 0, pages: 0, ...input.totals };
  let after = input.after ?? '';
  for (let run = 0; ; run++) {
    if (run >= PAGES_PER_RUN) return continueAsNew<typeof hiveEmbedSweepWorkflow>({ jobId, after, totals });
    const page = await pages.hiveEmbedSweepPage(jobId, after);
    if (page.next === null) break;
    totals.embedded += page.embedded;
    totals.stale += page.stale;
    totals.refused += page.refused;
    totals.pages += 1;
    after = page.next;
  }
  return steps.finishHiveEmbedSweep(jobId, totals);
}
