import { compatibleSurfaces } from '../../shared/compatibility/surfaces.js';
import { checkHealth } from '../../shared/health/health.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { openApiDocument } from '../openapi.js';
import { PUBLIC, route, type RouteDefinition } from '../route-table.js';

/**
 * Public routes: no credential needed. The compatibility list and the OpenAPI description are
 * made once, from the table of every route this app mounts (these three included).
 */
export function systemRoutes(platform: GatewayServices, mounted: () => readonly RouteDefinition[], version: string): RouteDefinition[] {
  let compatibility: unknown;
  let openapi: unknown;
  const surface = 'system';
  return [
    // Always 200 while this process answers; `status` and each check say what is degraded.
    route({
      method: 'get', path: '/v1/health', surface, summary: 'Reachability of PostgreSQL, Redis, Temporal and the workers', access: PUBLIC,
      handle: async (_req, res) => {
        res.setHeader('Cache-Control', 'no-store');
        res.json(await checkHealth(platform));
      },
    }),
    route({
      method: 'get', path: '/v1/compatibility', surface, summary: 'The wire formats this gateway mirrors, and which are available', access: PUBLIC,
      handle: (_req, res) => {
        compatibility ??= { object: 'compatibility', api_version: 'v1', surfaces: compatibleSurfaces(mounted()) };
        res.setHeader('Cache-Control', 'public, max-age=300');
        res.json(compatibility);
      },
    }),
    route({
      method: 'get', path: '/v1/openapi.json', surface, summary: 'This OpenAPI 3.1 description, generated from the mounted routes', access: PUBLIC,
      handle: (_req, res) => {
        openapi ??= openApiDocument(mounted(), version);
        res.setHeader('Cache-Control', 'public, max-age=300');
        res.json(openapi);
      },
    }),
  ];
}
