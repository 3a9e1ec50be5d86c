import { compatibleSurfaces } from '../../shared/compatibility/surfaces.js';
import { checkHealth } from '../../shared/health/health.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { openApiDocument } from '../openapi.js';
import { PUBLIC, route, type RouteDefinition } from '../route-table.js';

const LIVE = { status: 'alive' } as const;

/**
 * Public routes: no credential needed. The compatibility list and the OpenAPI description are
 * made once, from the table of every route this app mounts (these three included).
 */
export function systemRoutes(platform: GatewayServices, mounted: () => readonly RouteDefinition[], version: string): RouteDefinition[] {
  let compatibility: unknown;
  let openapi: unknown;
  const surface = 'system';
  return [
    // Readiness, for a load balancer: 503 while PostgreSQL or Redis, which every metered call needs, is away (drain this
    // replica); 200 otherwise, `status` and each check saying what is degraded (Temporal, the worker: long work waits).
    route({
      method: 'get', path: '/v1/health', surface, summary: 'Reachability of PostgreSQL, Redis, Temporal and the workers; 503 while PostgreSQL or Redis is away', access: PUBLIC,
      handle: async (_req, res) => {
        const report = await checkHealth(platform);
        res.setHeader('Cache-Control', 'no-store');
        res.status(report.status === 'unavailable' ? 503 : 200).json(report);
      },
    }),
    // Liveness, for a supervisor: this process answers. Nothing it depends on is asked.
    route({
      method: 'get', path: '/v1/health/live', surface, summary: 'The process is running (liveness; no dependency is checked)', access: PUBLIC,
      handle: (_req, res) => {
        res.setHeader('Cache-Control', 'no-store');
        res.json(LIVE);
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
