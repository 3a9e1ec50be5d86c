import type { GatewayServices } from '../shared/composition/gateway.js';
import type { ConsumerDefinition } from '../shared/platform/queues.js';
import { INGEST_STAGES, ingestProcessor, ingestQueue, type IngestJob } from '../shared/vector-stores/ingest.js';

/** One BullMQ consumer per ingest stage (parse, chunk, embed, store), each a thin adapter over shared/vector-stores/ingest.ts. */
export function vectorStoreConsumerDefinitions(platform: GatewayServices): ConsumerDefinition<IngestJob>[] {
  return INGEST_STAGES.map((stage) => ({
    queue: ingestQueue(stage),
    process: ingestProcessor(platform, stage),
    options: { concurrency: platform.config.VECTOR_STORE_INGEST_CONCURRENCY },
  }));
}
