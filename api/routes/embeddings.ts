import { createEmbeddings, embeddingsBody, planEmbeddings } from '../../shared/inference/embeddings.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';
import { metered, route, type RouteDefinition } from '../route-table.js';

export function embeddingRoutes(platform: GatewayServices): RouteDefinition[] {
  return [
    route({
      method: 'post', path: '/v1/embeddings', surface: 'embeddings', summary: 'Create embeddings',
      access: metered('api:chat', 'embeddings'), input: { body: embeddingsBody, bodyOptional: true },
      handle: async (req, res, { body }) => {
        const plan = planEmbeddings(body, platform.providers);
        const created = await createEmbeddings(platform, meteredCallOf(req), plan, { signal: abortWhenClientLeaves(res) });
        setWalletHeaders(res, created);
        res.json(created.body);
      },
    }),
  ];
}
