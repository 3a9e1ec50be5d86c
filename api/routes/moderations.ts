import { moderate, moderationsBody, planModeration } from '../../shared/inference/moderations.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCallOf } from '../middleware/metered-call.js';
import { metered, route, type RouteDefinition } from '../route-table.js';

export function moderationRoutes(platform: GatewayServices): RouteDefinition[] {
  return [
    route({
      method: 'post', path: '/v1/moderations', surface: 'moderations', summary: 'Classify text for moderation (recorded, never charged)',
      access: metered('api:chat', 'moderations'), input: { body: moderationsBody, bodyOptional: true },
      handle: async (req, res, { body }) => {
        const plan = planModeration(body, platform.providers);
        res.json(await moderate(platform, meteredCallOf(req), plan, { signal: abortWhenClientLeaves(res) }));
      },
    }),
  ];
}
