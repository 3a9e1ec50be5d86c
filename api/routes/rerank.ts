import { planRerank, rerank, rerankBody } from '../../shared/inference/rerank.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';
import { metered, route, type RouteDefinition } from '../route-table.js';

/** The common rerank wire shape; billed as one search unit. Any valid key; not for client tokens. */
export function rerankRoutes(platform: GatewayServices): RouteDefinition[] {
  return [
    route({
      method: 'post', path: '/v1/rerank', surface: 'rerank', summary: 'Rank documents by relevance to a query',
      access: metered('any', null), input: { body: rerankBody, bodyOptional: true },
      handle: async (req, res, { body }) => {
        const plan = planRerank(body, platform.providers);
        const ranked = await rerank(platform, meteredCallOf(req), plan, abortWhenClientLeaves(res));
        setWalletHeaders(res, ranked);
        res.json(ranked.body);
      },
    }),
  ];
}
