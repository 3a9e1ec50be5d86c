import express, { type Express } from 'express';
import type { HiveServices } from '../../shared/composition/hive.js';
import { createBaseApp, jsonBody, refuseDeclaredPast } from '../middleware/base-app.js';
import { dashboardRouter } from './dashboard/routes.js';
import { errorHandler, notFound } from './errors.js';
import { mountHiveRoutes, type HiveRouteDefinition } from './route-table.js';
import { adminRoutes } from './routes/admin.js';
import { billingRoutes, STRIPE_WEBHOOK_PATH } from './routes/billing.js';
import { dashboardApiRoutes } from './routes/dashboard.js';
import { healthRoutes } from './routes/health.js';
import { identityRoutes } from './routes/identity.js';
import { machineRoutes } from './routes/machines.js';
import { memoryRoutes } from './routes/memories.js';
import { pageRoutes } from './routes/pages.js';
import { reportRoutes } from './routes/reports.js';
import { sessionRoutes } from './routes/sessions.js';

/** Every route of the hive, in one table: the API is mounted from it and the docs pages are written from it. */
export function hiveRouteTable(hive: HiveServices): HiveRouteDefinition[] {
  const definitions = [...healthRoutes(hive), ...identityRoutes(hive), ...machineRoutes(hive), ...memoryRoutes(hive), ...sessionRoutes(hive), ...reportRoutes(hive), ...dashboardApiRoutes(hive)];
  definitions.push(...billingRoutes(hive));
  definitions.push(...adminRoutes(hive));
  definitions.push(...pageRoutes(definitions));
  return definitions;
}

/**
 * The memory hive's HTTP front door (spec 3), a server of its own beside the gateway. The same
 * order as the gateway's: the request id first (every response carries it), the access log, body
 * parsing with the hive's size limit, the routes, and last the one error handler that writes every
 * non-2xx body in the hive's shape.
 */
export function createHiveApp(hive: HiveServices): Express {
  const { config, logger } = hive;
  const app = createBaseApp(config, logger);
  // Stripe signs the exact bytes it sends: its webhook's body is read raw, before the JSON parser could.
  app.use(STRIPE_WEBHOOK_PATH, refuseDeclaredPast(config.HIVE_JSON_BODY_LIMIT, () => true), express.raw({ limit: config.HIVE_JSON_BODY_LIMIT, type: () => true }));
  app.use(jsonBody(config.HIVE_JSON_BODY_LIMIT));

  // The browser dashboard: cookie sessions, urlencoded forms and pages for its refusals (its own router).
  app.use(dashboardRouter(hive));
  app.use(mountHiveRoutes(hive, hiveRouteTable(hive)));

  app.use(notFound);
  app.use(errorHandler);
  return app;
}
