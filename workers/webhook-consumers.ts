import type { Job } from 'bullmq';
import type { ConsumerDefinition } from '../shared/platform/queues.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { attemptQueuedDelivery, DELIVERY_QUEUE, RELAY_QUEUE, relayOutbox, requeueStaleDeliveries, SWEEP_QUEUE, type DeliveryJobData } from '../shared/webhooks/delivery.js';
import { webhookRuntimeOf } from './webhook-activities.js';

/**
 * The BullMQ side of webhooks: the outbox relay (one run at a time per process; SKIP LOCKED shares
 * the rows between replicas), the first attempts (many at once), and the sweep of lost jobs.
 */
export function webhookConsumerDefinitions(platform: GatewayServices): ConsumerDefinition[] {
  const runtime = webhookRuntimeOf(platform);
  const { config } = platform;
  return [
    {
      queue: RELAY_QUEUE,
      process: async () => relayOutbox(runtime),
      options: { concurrency: 1 },
    },
    {
      queue: DELIVERY_QUEUE,
      process: async (job: Job) => attemptQueuedDelivery(runtime, (job.data as DeliveryJobData).deliveryId),
      // A job held by a dead process is taken over after the lock lapses and the next stalled check.
      options: { concurrency: config.WEBHOOK_DELIVERY_CONCURRENCY, lockDuration: config.WEBHOOK_JOB_LOCK_SECONDS * 1_000, stalledInterval: config.WEBHOOK_JOB_LOCK_SECONDS * 1_000 },
    },
    {
      queue: SWEEP_QUEUE,
      process: async () => ({ requeued: await requeueStaleDeliveries(runtime) }),
      options: { concurrency: 1 },
    },
  ];
}
