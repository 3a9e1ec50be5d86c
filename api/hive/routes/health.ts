import type { HiveServices } from '../../../shared/composition/hive.js';
import { checkHiveHealth } from '../../../shared/hive/health.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/** Routes with no credential (spec 3). */
export function healthRoutes(hive: HiveServices): HiveRouteDefinition[] {
  return [
    hiveRoute({
      method: 'get', path: '/v1/health', summary: 'Server presence, the schema version it runs on, the embedding model', access: 'public',
      // 200 while the hive can read its tables; 503 with the hive's error body when it cannot.
      handle: async ({ res }) => {
        res.setHeader('Cache-Control', 'no-store');
        res.json(await checkHiveHealth(hive));
      },
    }),
    hiveRoute({
      method: 'get', path: '/v1/health/live', summary: 'The process is running (liveness; the database is not asked)', access: 'public',
      handle: ({ res }) => {
        res.setHeader('Cache-Control', 'no-store');
        res.json({ status: 'alive' });
      },
    }),
  ];
}
