import { CATALOG } from '../../shared/models/catalog.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/**
 * GET /v1/models: the live catalog for the calling account: every model with its capabilities,
 * its estimated price per million tokens in USD, and whether this deployment can reach its provider.
 */
export function modelRoutes(platform: GatewayServices): RouteDefinition[] {
  return [
    route({
      method: 'get', path: '/v1/models', surface: 'models', summary: 'List the model catalog', access: developerKey('api:read'),
      handle: (_req, res) => {
        const configured = new Set(platform.providers.configured);
        res.json({
          object: 'list',
          data: CATALOG.map((model) => ({
            id: model.id,
            object: 'model',
            owned_by: model.provider,
            kind: model.kind,
            ...(model.family && { family: model.family, version: model.version }),
            capabilities: model.capabilities,
            ...(model.contextTokens && { context_tokens: model.contextTokens }),
            ...(model.maxOutputTokens && { max_output_tokens: model.maxOutputTokens }),
            ...(model.dimensions && { dimensions: model.dimensions }),
            estimated_input_per_1m: model.inputMicrosPer1M / 1e6,
            estimated_output_per_1m: model.outputMicrosPer1M / 1e6,
            available: configured.has(model.provider) || (model.cloudIds !== undefined && (configured.has('bedrock') || configured.has('vertex'))),
          })),
        });
      },
    }),
  ];
}
