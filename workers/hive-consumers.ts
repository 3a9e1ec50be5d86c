import type { GatewayServices } from '../shared/composition/gateway.js';
import { startUnstartedComplianceJobs } from '../shared/hive/compliance/jobs.js';
import { hiveEmbeddingConsumer } from '../shared/hive/embedding.js';
import type { ConsumerDefinition, QueueRegistry } from '../shared/platform/queues.js';

/**
 * The BullMQ side of the memory hive: the embedding of each memory written, and the start sweep of
 * compliance jobs. A job row (retention, erasure, embedding sweep) is committed before its workflow
 * starts; when the start did not happen (Temporal away, the hive process dying in between), the
 * sweep starts it under the job's id.
 */
export const HIVE_JOB_START_SWEEP_QUEUE = 'hive-job-start-sweep';

export function hiveConsumerDefinitions(platform: GatewayServices): ConsumerDefinition[] {
  return [
    hiveEmbeddingConsumer(platform) as ConsumerDefinition,
    {
      queue: HIVE_JOB_START_SWEEP_QUEUE,
      process: async () => ({ started: await startUnstartedComplianceJobs(platform) }),
      options: { concurrency: 1 },
    },
  ];
}

/** The start sweep's schedule; upserted, so every worker replica may declare it and each run happens once. */
export async function scheduleHiveJobs(queues: QueueRegistry, everyMs = 30_000): Promise<void> {
  await queues.queue(HIVE_JOB_START_SWEEP_QUEUE).upsertJobScheduler('start-unstarted-compliance-jobs', { every: everyMs }, { name: 'start-unstarted-compliance-jobs', opts: { removeOnComplete: true, removeOnFail: true } });
}
