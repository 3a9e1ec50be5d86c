import type { HiveServices } from '../../../shared/composition/hive.js';
import { mintOpenCode } from '../../../shared/hive/dashboard/sessions.js';
import { emptyBody } from '../../../shared/hive/schemas.js';
import { publicOrigin } from '../dashboard/routes.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/** The API side of the browser dashboard: the client command's way into it. */
export function dashboardApiRoutes(hive: HiveServices): HiveRouteDefinition[] {
  return [
    hiveRoute({
      method: 'post', path: '/v1/dashboard/session', summary: "Mint the one-time link (2 minutes, used once) that opens the dashboard signed in as the token's person", access: 'credential', body: emptyBody,
      handle: async ({ req, res, credential }) => {
        res.status(201).json(await mintOpenCode(hive.db, credential, publicOrigin(req, hive.config.HIVE_PUBLIC_BASE_URL)));
      },
    }),
  ];
}
