import { startUnstartedBatches } from '../shared/batches/batches.js';
import type { ConsumerDefinition, QueueRegistry } from '../shared/platform/queues.js';
import type { GatewayServices } from '../shared/composition/gateway.js';

/**
 * A batch row is committed before its workflow starts; when the start did not happen (Temporal
 * away, the API process dying in between), this sweep starts it under the same id.
 */
export const BATCH_START_SWEEP_QUEUE = 'batch-start-sweep';

export function batchConsumerDefinitions(platform: GatewayServices): ConsumerDefinition[] {
  return [
    {
      queue: BATCH_START_SWEEP_QUEUE,
      process: async () => ({ started: await startUnstartedBatches(platform) }),
      options: { concurrency: 1 },
    },
  ];
}

export async function scheduleBatchJobs(queues: QueueRegistry, everyMs = 30_000): Promise<void> {
  await queues.queue(BATCH_START_SWEEP_QUEUE).upsertJobScheduler('start-unstarted-batches', { every: everyMs }, { name: 'start-unstarted-batches', opts: { removeOnComplete: true, removeOnFail: true } });
}
