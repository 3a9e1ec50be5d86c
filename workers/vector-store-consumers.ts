import type { GatewayServices } from '../shared/composition/gateway.js';
import type { ConsumerDefinition } from '../shared/platform/queues.js';
import { INGEST_STAGES, ingestProcessor, ingestQueue } from '../shared/vector-stores/ingest.js';
import { IVF_QUEUE, ivfProcessor } from '../shared/vector-stores/ivf.js';

/**
 * One BullMQ consumer per ingest stage (parse, chunk, embed, store) and one for IVF builds, each a
 * thin adapter over shared/vector-stores.
 */
export function vectorStoreConsumerDefinitions(platform: GatewayServices): ConsumerDefinition[] {
  return [
    ...INGEST_STAGES.map((stage) => ({
      queue: ingestQueue(stage),
      process: ingestProcessor(platform, stage),
      options: { concurrency: platform.config.VECTOR_STORE_INGEST_CONCURRENCY },
    })),
    // Builds are CPU-heavy (k-means in the pool): one at a time per worker.
    { queue: IVF_QUEUE, process: ivfProcessor(platform), options: { concurrency: 1 } },
  ] as ConsumerDefinition[];
}
