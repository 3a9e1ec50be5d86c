import { type ErrorRequestHandler, type Express, type Router } from 'express';
import { Registry } from 'prom-client';
import { MAX_ENTRY_REQUEST_BYTES } from '../shared/brains/entries.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { serviceError } from '../shared/errors.js';
import { dashboardRoutes } from './dashboard/routes.js';
import { readCredential } from './middleware/authenticate.js';
import { errorHandler, notFound } from './middleware/errors.js';
import { HttpMetrics } from './middleware/metrics.js';
import { createBaseApp, jsonBody } from './middleware/base-app.js';
import { gatewayRoutes } from './routes/index.js';
import { mountRoutes } from './route-table.js';

/**
 * The gateway's HTTP front door. Order matters: the request id first (every response carries it),
 * then logging and metrics, body parsing with its size limit, the credential, the routes, and last
 * the one error handler that writes every non-2xx body.
 */
export interface GatewayAppOptions {
  metrics?: HttpMetrics;
  /** More routers, on paths of their own, tried before the platform's (benchmarks and tests). */
  routes?: Router[];
}

export function createGatewayApp(platform: GatewayServices, options: GatewayAppOptions = {}): Express {
  const metrics = options.metrics ?? new HttpMetrics();
  const { config, logger } = platform;
  // Metered calls are served here, so this process meters its busy payers against quota grants.
  platform.grants.start();
  const app = createBaseApp(config, logger);
  app.use(metrics.middleware);

  const exposed = Registry.merge([metrics.registry, platform.meteringTimings.registry]);
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', exposed.contentType);
    res.send(await exposed.metrics());
  });

  // Brain entries carry bodies of up to 100 MB (spec 2): their JSON is read with room for escapes,
  // and one past even that is the spec's 413 entry_too_large.
  app.use('/v1/brains', ...jsonBody(MAX_ENTRY_REQUEST_BYTES), ((error, _req, _res, next) => {
    next((error as { type?: string }).type === 'entity.too.large' ? serviceError('entry_too_large', { param: 'body' }) : error);
  }) as ErrorRequestHandler);
  app.use(jsonBody(config.JSON_BODY_LIMIT));
  app.use(readCredential);

  // Routers spell out full paths, so the matched pattern (the metrics label) is the whole route.
  // Express tries routers in order, every route of each, until one matches: the metered calls,
  // the gateway's traffic, come first (with the extra routers, which use their own paths).
  for (const router of options.routes ?? []) app.use(router);
  app.use(mountRoutes(platform, gatewayRoutes(platform)));
  app.use(dashboardRoutes(platform));

  app.use(notFound);
  app.use(errorHandler);
  return app;
}
