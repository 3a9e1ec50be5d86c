import type { GatewayServices } from '../shared/composition/gateway.js';
import { createWebhookActivities } from './webhook-activities.js';
import { createBatchActivities } from './batch-activities.js';
import { createVectorStoreActivities } from './vector-store-activities.js';
import { createAssistantActivities } from './assistant-activities.js';
import { createBrainActivities } from './brain-activities.js';
import { createHiveActivities } from './hive-activities.js';

/**
 * Activities are thin adapters over domain code, made by a factory over the process's shared
 * connections. Each domain's activities are spread in here as they are written.
 */
export function createActivities(platform: GatewayServices): Record<string, (...args: never[]) => Promise<unknown>> {
  return {
    ...createWebhookActivities(platform),
    ...createBatchActivities(platform),
    ...createVectorStoreActivities(platform),
    ...createAssistantActivities(platform),
    ...createBrainActivities(platform),
    ...createHiveActivities(platform),
  };
}
