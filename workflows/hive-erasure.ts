import { condition, continueAsNew, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { HiveActivities } from '../workers/hive-activities.js';
import { heartbeatingChunk } from './activity-profiles.js';

const steps = proxyActivities<HiveActivities>(heartbeatingChunk(20));

/** Sent to a queued erasure when a legal hold of its organisation lifts. */
export const holdLiftedSignal = defineSignal('holdLifted');

/**
 * Steps one run takes before it continues as new: a hold may last years, and a queued erasure
 * looks at the holds hourly, so its history is kept short by starting afresh where it stands.
 */
const STEPS_PER_RUN = 500;

interface ErasureInput {
  jobId: string;
  /** Where a continued run resumes: the next page of memories, or the events and the rest. */
  fromPage?: number;
  remainder?: boolean;
}

/**
 * An erasure of one person (workflow id = job id; the plan was made with the request). Each page
 * of memories, then each batch of events, is one transaction; a step that finds a legal hold in
 * its way changes nothing and the workflow waits, queued, for a hold to lift (a signal from the
 * lift, or an hourly look), then resumes where it stopped. Ids and counts only in its history.
 */
export async function hiveErasureWorkflow(input: ErasureInput): Promise<string> {
  let lifted = false;
  setHandler(holdLiftedSignal, () => {
    lifted = true;
  });
  let taken = 0;
  const waitForLift = async () => {
    await condition(() => lifted, '1 hour');
  };
  if (!input.remainder) {
    const pages = await steps.hiveErasurePages(input.jobId);
    for (let page = input.fromPage ?? 0; page < pages; ) {
      if (++taken > STEPS_PER_RUN) return continueAsNew<typeof hiveErasureWorkflow>({ jobId: input.jobId, fromPage: page });
      // Reset before the step: a lift signalled while it runs is not lost.
      lifted = false;
      const step = await steps.eraseHiveMemoryPage(input.jobId, page);
      if (step === 'held') await waitForLift();
      else page += 1;
    }
  }
  for (;;) {
    if (++taken > STEPS_PER_RUN) return continueAsNew<typeof hiveErasureWorkflow>({ jobId: input.jobId, remainder: true });
    lifted = false;
    const step = await steps.eraseHiveRemainder(input.jobId);
    if (step === 'done') return input.jobId;
    if (step === 'held') await waitForLift();
  }
}
