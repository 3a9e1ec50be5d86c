import type { GatewayServices } from '../../shared/composition/gateway.js';
import { startConsumers } from '../../shared/platform/queues.js';
import { createRedis } from '../../shared/platform/redis.js';
import { vectorStoreConsumerDefinitions } from '../../workers/vector-store-consumers.js';
import { startInProcessWorker } from './batch-helpers.js';

/**
 * What a worker process runs, inside the test process, for suites that never kill it: the
 * vector-store ingest consumers (BullMQ) and a Temporal worker on the platform's task queue.
 */
export async function startInProcessWorkers(platform: GatewayServices): Promise<{ stop(): Promise<void> }> {
  const blocking = createRedis(platform.config.REDIS_URL, 'blocking', platform.logger);
  const consumers = startConsumers(vectorStoreConsumerDefinitions(platform), blocking, platform.queues.prefix, platform.logger);
  const temporal = await startInProcessWorker(platform);
  return {
    async stop() {
      await Promise.all(consumers.map((consumer) => consumer.close()));
      await temporal.stop();
      await blocking.quit();
    },
  };
}
