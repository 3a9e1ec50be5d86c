import type { GatewayServices } from '../shared/composition/gateway.js';
import type { Logger } from '../shared/logger.js';
import { awayDependency } from '../shared/platform/dependency-errors.js';
import { startUnstartedBatches } from '../shared/batches/batches.js';
import { requestRelay, requeueStaleDeliveries, scheduleWebhookJobs } from '../shared/webhooks/delivery.js';
import { startUnstartedComplianceJobs } from '../shared/hive/compliance/jobs.js';
import { anyLeftUnembedded } from '../shared/hive/compliance/repository.js';
import { scheduleIdOf } from '../shared/hive/compliance/schedules.js';
import { sweepVectorStores } from '../shared/vector-stores/sweep.js';
import { scheduleRecurringJobs } from './consumers.js';
import { scheduleBatchJobs } from './batch-consumers.js';
import { scheduleVectorStoreJobs } from './vector-store-consumers.js';
import { scheduleHiveJobs } from './hive-consumers.js';

/**
 * Redis holds BullMQ's queues, their job schedulers included, and may lose them: the local Redis
 * keeps nothing on disk, and a managed one can fail over to a replica behind its last writes.
 * PostgreSQL holds the truth of every long piece of work, so after a loss the queues are rebuilt
 * from it. A marker key is written beside the schedulers; a worker that finds it gone re-declares
 * the schedulers and runs each pipeline's recovery sweep at once, not at its usual pace (a vector
 * store's stalled ingest would otherwise wait VECTOR_STORE_STALL_SECONDS, ten minutes by default).
 * SET NX on a second key elects one replica to do it.
 */
const MARKER = 'queues-declared';
const CHECK_EVERY_MS = 2_000;

/**
 * Declares the schedulers (upserted, so every replica may) and then watches the marker: found
 * missing at start (a first start, or Redis emptied while no worker ran) or at any check every two
 * seconds, the queues are rebuilt. A check while Redis is away fails and is tried again two seconds
 * later: the loss shows once it is back. Call it once the Temporal schedules exist (the recovery
 * may trigger one).
 */
export async function startQueueUpkeep(platform: GatewayServices, logger: Logger): Promise<{ close(): Promise<void> }> {
  const followUps = new Set<NodeJS.Timeout>();
  const recoverIfLost = async () => {
    if ((await platform.redis.exists(markerKey(platform))) === 1) return;
    // One replica recovers; the marker is written only once it has, so a failed try is tried again.
    if ((await platform.redis.set(recoveringKey(platform), process.pid, 'EX', 60, 'NX')) !== 'OK') return;
    try {
      logger.warn('Redis holds no queues of this platform (a first start, or it restarted empty or failed over): declaring the schedules and recovering queued work from PostgreSQL');
      await declareSchedules(platform);
      logger.info({ recovered: await recoverQueuedWork(platform) }, 'queued work recovered from PostgreSQL');
      await platform.redis.set(markerKey(platform), new Date().toISOString());
    } finally {
      await platform.redis.del(recoveringKey(platform));
    }
    // A stage a worker held when the data went finishes and queues its successor into the new
    // Redis; one that fails meanwhile has lost its retry. A second pass, once such a stage would
    // have stalled, restarts those.
    const followUp = setTimeout(() => {
      followUps.delete(followUp);
      recoverQueuedWork(platform).then(
        (recovered) => logger.info({ recovered }, 'queued work recovered from PostgreSQL (second pass)'),
        (error: unknown) => logger.warn({ err: error }, 'second recovery pass failed; the regular sweeps continue'),
      );
    }, recoveryGraceSeconds(platform) * 1_000);
    followUps.add(followUp);
  };

  let running: Promise<void> | undefined;
  const check = () =>
    (running ??= recoverIfLost()
      .catch((error: unknown) => {
        // Redis away is the outage itself, already logged by its connection; anything else is said.
        if (awayDependency(error) === 'Redis') logger.debug({ err: error }, 'queue marker check: Redis away');
        else logger.warn({ err: error }, 'recovering the queues failed; trying again in two seconds');
      })
      .finally(() => {
        running = undefined;
      }));
  await declareSchedules(platform);
  await check();
  const timer = setInterval(check, CHECK_EVERY_MS);
  timer.unref();
  return {
    async close() {
      clearInterval(timer);
      for (const followUp of followUps) clearTimeout(followUp);
      await running;
    },
  };
}

async function declareSchedules(platform: GatewayServices): Promise<void> {
  await scheduleRecurringJobs(platform.queues);
  await scheduleWebhookJobs(platform.queues, platform.config);
  await scheduleBatchJobs(platform.queues);
  await scheduleVectorStoreJobs(platform.queues);
  await scheduleHiveJobs(platform.queues);
}

/**
 * Every pipeline's recovery from PostgreSQL: work untouched for a job lock's length (so not in a
 * live worker's hands) is queued again. Each stage acts only for the attempt it was queued for, a
 * delivery is keyed by its id, and a batch's or hive job's workflow by its row's: nothing happens twice.
 */
export async function recoverQueuedWork(platform: GatewayServices): Promise<Record<string, number>> {
  const grace = recoveryGraceSeconds(platform);
  const ingest = await sweepVectorStores(platform, grace);
  const deliveries = await requeueStaleDeliveries({ ...platform, config: { ...platform.config, WEBHOOK_REQUEUE_AFTER_SECONDS: grace } });
  await requestRelay(platform.queues);
  const batches = await startUnstartedBatches(platform, 0);
  const hiveJobs = await startUnstartedComplianceJobs(platform, grace);
  // Hive memories queue their embeddings in Redis too; the hourly embedding sweep (a Temporal
  // schedule) embeds every memory without a vector, so it runs now when one waits.
  const embeddings = await anyLeftUnembedded(platform.db, grace);
  if (embeddings) await platform.temporal.client.schedule.getHandle(scheduleIdOf('hive-embed-sweep', platform.config.TEMPORAL_TASK_QUEUE)).trigger();
  return { ingestsRestarted: ingest.restarted, ingestsFailed: ingest.failed, storeDeletions: ingest.deletions, deliveries, batches, hiveJobs, embeddingSweeps: Number(embeddings) };
}

function recoveryGraceSeconds(platform: GatewayServices): number {
  return Math.max(platform.config.VECTOR_STORE_JOB_LOCK_SECONDS, platform.config.WEBHOOK_JOB_LOCK_SECONDS);
}

const markerKey = (platform: GatewayServices) => `${platform.queues.prefix}:${MARKER}`;
const recoveringKey = (platform: GatewayServices) => `${platform.queues.prefix}:${MARKER}:recovering`;
