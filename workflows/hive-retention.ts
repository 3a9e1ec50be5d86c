import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { HiveActivities } from '../workers/hive-activities.js';
import { heartbeatingChunk } from './activity-profiles.js';

const steps = proxyActivities<HiveActivities>(heartbeatingChunk(20));

/** Pages one run settles before it continues as new, so a sweep of any size keeps a short history. */
const PAGES_PER_RUN = 500;

/**
 * A retention sweep of the hive (workflow id = job id; a run of the `hive-retention` schedule opens
 * its own job, of every organisation). Its history reads: planHiveRetention (the plan, stored with
 * the job, once), one applyHiveRetentionPage per page of deletions (each one transaction with its
 * audit rows; a page run again finds nothing left), finishHiveRetention (expired audit rows, the
 * totals). A dry run plans and finishes. Memory content never enters the history: ids and counts.
 */
export async function hiveRetentionWorkflow(input: { jobId?: string; fromPage?: number }): Promise<Record<string, unknown>> {
  const jobId = input.jobId ?? (await steps.openScheduledHiveJob('retention', workflowInfo().workflowId));
  const plan = await steps.planHiveRetention(jobId);
  if (!plan.found) return { found: false };
  if (plan.apply) {
    const first = input.fromPage ?? 0;
    for (let page = first; page < plan.pages; page++) {
      if (page - first >= PAGES_PER_RUN) return continueAsNew<typeof hiveRetentionWorkflow>({ jobId, fromPage: page });
      await steps.applyHiveRetentionPage(jobId, page);
    }
  }
  return steps.finishHiveRetention(jobId);
}
