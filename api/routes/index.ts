import type { GatewayServices } from '../../shared/composition/gateway.js';
import type { RouteDefinition } from '../route-table.js';
import { accountRoutes } from './accounts.js';
import { assistantRoutes } from './assistants.js';
import { batchRoutes } from './batches.js';
import { billingRoutes } from './billing.js';
import { brainRoutes } from './brains.js';
import { chatRoutes } from './chat.js';
import { clientTokenRoutes } from './client-tokens.js';
import { conversationRoutes } from './conversations.js';
import { customerRoutes } from './customers.js';
import { embeddingRoutes } from './embeddings.js';
import { fileRoutes } from './files.js';
import { mediaRoutes } from './media.js';
import { modelDefinitionRoutes } from './model-definitions.js';
import { modelRoutes } from './models.js';
import { moderationRoutes } from './moderations.js';
import { packRoutes } from './packs.js';
import { rerankRoutes } from './rerank.js';
import { systemRoutes } from './system.js';
import { vectorStoreRoutes } from './vector-stores.js';
import { webhookRoutes } from './webhooks.js';

/** The API version the OpenAPI description states. */
export const API_VERSION = '1.0.0';

/**
 * Every /v1 route of the gateway, in the order Express tries them: the metered calls, the
 * gateway's traffic, first.
 */
export function gatewayRoutes(platform: GatewayServices): RouteDefinition[] {
  const table: RouteDefinition[] = [
    ...chatRoutes(platform),
    ...embeddingRoutes(platform),
    ...moderationRoutes(platform),
    ...rerankRoutes(platform),
    ...mediaRoutes(platform),
    ...systemRoutes(platform, () => table, API_VERSION),
    ...accountRoutes(platform),
    ...customerRoutes(platform),
    ...billingRoutes(platform),
    ...modelRoutes(platform),
    ...modelDefinitionRoutes(platform),
    ...clientTokenRoutes(platform),
    ...webhookRoutes(platform),
    ...fileRoutes(platform),
    ...batchRoutes(platform),
    ...vectorStoreRoutes(platform),
    ...assistantRoutes(platform),
    ...conversationRoutes(platform),
    ...brainRoutes(platform),
    ...packRoutes(platform),
  ];
  return table;
}
