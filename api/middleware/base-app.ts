import express, { type Express } from 'express';
import type { Config } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { requestId } from './request-id.js';
import { requestLog } from './request-log.js';

/**
 * What every app of the platform starts with (the gateway, the memory hive): no X-Powered-By, no
 * ETags (Express would hash every response body, POST results and errors included, and no client
 * of these APIs revalidates: 3 µs a small JSON body, a pass over every audio body), the proxies
 * trusted for client addresses, then the request id (every response carries it) and the access log.
 */
export function createBaseApp(config: Pick<Config, 'TRUST_PROXY_HOPS'>, logger: Logger): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', config.TRUST_PROXY_HOPS);
  app.use(requestId);
  app.use(requestLog(app, logger));
  return app;
}
