import { releaseExpiredHolds } from '../shared/billing/meter.js';
import { purgeExpiredClientTokens } from '../shared/client-tokens/client-tokens.js';
import type { ConsumerDefinition, QueueRegistry } from '../shared/platform/queues.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { webhookConsumerDefinitions } from './webhook-consumers.js';
import { batchConsumerDefinitions } from './batch-consumers.js';
import { vectorStoreConsumerDefinitions } from './vector-store-consumers.js';
import { hiveConsumerDefinitions } from './hive-consumers.js';

/**
 * The BullMQ consumers this process runs, each a thin adapter over domain code, and the
 * schedules that feed them. Job schedulers are upserted, so every worker replica may declare
 * them and each due job still runs once.
 */
export const HOLD_SWEEP_QUEUE = 'billing-hold-sweep';
export const CLIENT_TOKEN_SWEEP_QUEUE = 'client-token-registry-sweep';

export function consumerDefinitions(platform: GatewayServices): ConsumerDefinition[] {
  return [
    {
      queue: HOLD_SWEEP_QUEUE,
      process: async () => ({ released: await releaseExpiredHolds(platform.db) }),
      options: { concurrency: 1 },
    },
    {
      queue: CLIENT_TOKEN_SWEEP_QUEUE,
      process: async () => ({ deleted: await purgeExpiredClientTokens(platform.db) }),
      options: { concurrency: 1 },
    },
    ...webhookConsumerDefinitions(platform),
    ...batchConsumerDefinitions(platform),
    ...vectorStoreConsumerDefinitions(platform),
    ...hiveConsumerDefinitions(platform),
  ];
}

export async function scheduleRecurringJobs(queues: QueueRegistry, everyMs = 60_000): Promise<void> {
  await queues.queue(HOLD_SWEEP_QUEUE).upsertJobScheduler('release-expired-holds', { every: everyMs }, { name: 'release-expired-holds' });
  await queues.queue(CLIENT_TOKEN_SWEEP_QUEUE).upsertJobScheduler('purge-expired-client-tokens', { every: 60 * everyMs }, { name: 'purge-expired-client-tokens' });
}
