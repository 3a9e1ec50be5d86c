import { loadConfig } from '../shared/config.js';
import { createGatewayServices } from '../shared/composition/gateway.js';
import { startConsumers } from '../shared/platform/queues.js';
import { createRedis } from '../shared/platform/redis.js';
import { consumerDefinitions } from './consumers.js';
import { startQueueUpkeep } from './queue-recovery.js';
import { startOutboxListener } from '../shared/webhooks/relay-listener.js';
import { ensurePruneSchedule } from '../shared/brains/upkeep.js';
import { ensureComplianceSchedules } from '../shared/hive/compliance/schedules.js';
import { bundleWorkflowsInChildProcess, createTemporalWorker, installTemporalLogging, untilTemporalAnswers } from './temporal-worker.js';
import { lowerProcessPriority } from '../shared/platform/process-priority.js';

const config = loadConfig();
if (config.WORKER_NICENESS > 0) lowerProcessPriority(config.WORKER_NICENESS);
const platform = createGatewayServices(config, 'worker');
const { logger } = platform;
await platform.ready;
installTemporalLogging(logger);

// Bundled by a child process, so webpack's memory peak is not the worker's.
const bundle = await bundleWorkflowsInChildProcess();
const { worker, connection } = await createTemporalWorker(platform, { bundle });
const blockingRedis = createRedis(config.REDIS_URL, 'blocking', logger);
const consumers = startConsumers(consumerDefinitions(platform), blockingRedis, platform.queues.prefix, logger);
if (config.SVC_BRAINS_ENABLED) await untilTemporalAnswers(() => ensurePruneSchedule(platform), 'the brains prune schedule', logger);
await untilTemporalAnswers(() => ensureComplianceSchedules(platform), 'the hive compliance schedules', logger);
const queueUpkeep = await startQueueUpkeep(platform, logger);
const outboxListener = startOutboxListener(config.DATABASE_URL, platform.queues, logger);

logger.info({ taskQueue: config.TEMPORAL_TASK_QUEUE, temporal: config.temporalAddress, consumers: consumers.length, cpuThreads: config.CPU_POOL_THREADS }, 'worker polling');

let stopping = false;
function stop(signal: string): void {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'worker stopping: finishing in-flight tasks');
  worker.shutdown();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

try {
  // Resolves once shutdown() has let in-flight workflow and activity tasks finish.
  await worker.run();
} finally {
  await queueUpkeep.close();
  await outboxListener.close();
  await Promise.allSettled(consumers.map((consumer) => consumer.close()));
  await Promise.allSettled([blockingRedis.quit(), connection.close()]);
  await platform.close();
  logger.info('worker stopped');
}
