import { getExternalWorkflowHandle, proxyActivities } from '@temporalio/workflow';
import type { HiveAdminChange, HiveAdminChangeResult } from '../shared/hive/compliance/jobs.js';
import type { HiveActivities } from '../workers/hive-activities.js';
import { QUICK_STEP } from './activity-profiles.js';
import { holdLiftedSignal } from './hive-erasure.js';

const steps = proxyActivities<HiveActivities>(QUICK_STEP);

/**
 * A legal hold placed or lifted, or a node's settings replaced (the workflow id is made of what
 * was asked, so the same request sent again joins the change while it runs). Each is one
 * transaction with its audit row, made idempotent by the change's own id; a placement answers the
 * hold it stands for, so a request that joined gets the same hold. A lift then signals every
 * queued erasure of the organisation from here, so a worker that dies between the lift and the
 * signals still wakes them.
 */
export async function hiveAdminChangeWorkflow(change: HiveAdminChange): Promise<HiveAdminChangeResult> {
  switch (change.kind) {
    case 'hold.place': {
      // A step recorded before it answered the hold's id (undefined in its history) placed the change's own.
      const holdId = (await steps.placeHiveHold(change)) ?? change.holdId;
      return { holdId, woken: [] };
    }
    case 'settings.replace':
      await steps.replaceHiveSettings(change);
      return { holdId: null, woken: [] };
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
      return { holdId: change.holdId, woken };
    }
  }
}
