import type { GatewayServices } from '../shared/composition/gateway.js';
import type { ConsumerDefinition } from '../shared/platform/queues.js';
import { INGEST_STAGES, ingestProcessor, ingestQueue } from '../shared/vector-stores/ingest.js';
import { IVF_QUEUE, ivfProcessor } from '../shared/vector-stores/ivf.js';
import { SWEEP_QUEUE, sweepVectorStores } from '../shared/vector-stores/sweep.js';
import type { QueueRegistry } from '../shared/platform/queues.js';

/**
 * One BullMQ consumer per ingest stage (parse, chunk, embed, store) and one for IVF builds, each a
 * thin adapter over shared/vector-stores.
 */
export function vectorStoreConsumerDefinitions(platform: GatewayServices): ConsumerDefinition[] {
  // A stage held by a worker that died is taken over once its lock lapses; it resumes idempotently.
  const lockMs = platform.config.VECTOR_STORE_JOB_LOCK_SECONDS * 1_000;
  return [
    ...INGEST_STAGES.map((stage) => ({
      queue: ingestQueue(stage),
      process: ingestProcessor(platform, stage),
      options: { concurrency: platform.config.VECTOR_STORE_INGEST_CONCURRENCY, lockDuration: lockMs, stalledInterval: lockMs },
    })),
    // Builds are CPU-heavy (k-means in the pool): one at a time per worker.
    { queue: IVF_QUEUE, process: ivfProcessor(platform), options: { concurrency: 1 } },
    { queue: SWEEP_QUEUE, process: () => sweepVectorStores(platform, platform.config.VECTOR_STORE_STALL_SECONDS), options: { concurrency: 1 } },
  ] as ConsumerDefinition[];
}

/** The recovery sweep's schedule; upserted, so every worker replica may declare it and each run happens once. */
export async function scheduleVectorStoreJobs(queues: QueueRegistry, everyMs = 60_000): Promise<void> {
  await queues.queue(SWEEP_QUEUE).upsertJobScheduler('sweep-vector-stores', { every: everyMs }, { name: 'sweep-vector-stores', opts: { removeOnComplete: true, removeOnFail: true } });
}
