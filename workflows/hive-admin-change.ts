import { getExternalWorkflowHandle, proxyActivities } from '@temporalio/workflow';
import type { HiveAdminChange } from '../shared/hive/compliance/jobs.js';
import type { HiveActivities } from '../workers/hive-activities.js';
import { QUICK_STEP } from './activity-profiles.js';
import { holdLiftedSignal } from './hive-erasure.js';

const steps = proxyActivities<HiveActivities>(QUICK_STEP);

/**
 * A legal hold placed or lifted, or a node's settings replaced (workflow id names the change, so
 * a retried request joins the change already made). Each is one transaction with its audit row,
 * made idempotent by the change's own id; a lift then signals every queued erasure of the
 * organisation from here, so a worker that dies between the lift and the signals still wakes them.
 */
export async function hiveAdminChangeWorkflow(change: HiveAdminChange): Promise<{ woken: string[] }> {
  switch (change.kind) {
    case 'hold.place':
      await steps.placeHiveHold(change);
      return { woken: [] };
    case 'settings.replace':
      await steps.replaceHiveSettings(change);
      return { woken: [] };
    case 'hold.lift': {
      const queued = await steps.liftHiveHold(change);
      const woken: string[] = [];
      for (const jobId of queued) {
        try {
          await getExternalWorkflowHandle(jobId).signal(holdLiftedSignal);
          woken.push(jobId);
        } catch {
          // An erasure that ended meanwhile has nothing to wake; one that is still queued looks at the holds hourly.
        }
      }
      return { woken };
    }
  }
}
