import express, { type Express } from 'express';
import type { HiveServices } from '../../shared/composition/hive.js';
import { createBaseApp } from '../middleware/base-app.js';
import { errorHandler, notFound } from './errors.js';
import { mountHiveRoutes } from './route-table.js';
import { healthRoutes } from './routes/health.js';
import { identityRoutes } from './routes/identity.js';
import { memoryRoutes } from './routes/memories.js';

/**
 * The memory hive's HTTP front door (spec 3), a server of its own beside the gateway. The same
 * order as the gateway's: the request id first (every response carries it), the access log, body
 * parsing with the hive's size limit, the routes, and last the one error handler that writes every
 * non-2xx body in the hive's shape.
 */
export function createHiveApp(hive: HiveServices): Express {
  const { config, logger } = hive;
  const app = createBaseApp(config, logger);
  app.use(express.json({ limit: config.HIVE_JSON_BODY_LIMIT, type: ['application/json', 'application/*+json'] }));

  app.use(healthRoutes(hive));
  app.use(mountHiveRoutes(hive, [...identityRoutes(hive), ...memoryRoutes(hive)]));

  app.use(notFound);
  app.use(errorHandler);
  return app;
}
