import express, { type Express, type RequestHandler } from 'express';
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

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * The JSON body reader of both servers, limited to `limitBytes`. A body declared (Content-Length)
 * past the limit is refused before a byte of it is read, and the connection closed after the
 * answer: Express's parser would first read the whole declared body to keep the connection usable,
 * so a lying `Content-Length: 1073741824` held the request open until the client gave up. The
 * refusal is the parser's own (type entity.too.large), so each app's mapping of it holds.
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
  return [refuseDeclaredPast(limitBytes, JSON_TYPES), express.json({ limit: limitBytes, type: JSON_TYPES })];
}

/** A browser form's body (the dashboards'), with jsonBody's refusal of a declared length past the limit. */
export function formBody(limitBytes: number): RequestHandler[] {
  const types = ['application/x-www-form-urlencoded'];
  return [refuseDeclaredPast(limitBytes, types), express.urlencoded({ extended: false, limit: limitBytes, type: types })];
}

/** The refusal of jsonBody for any body parser (the Stripe webhook's raw bytes): a declared length past `limitBytes` is 413 at once. */
export function refuseDeclaredPast(limitBytes: number, types: string[] | (() => boolean)): RequestHandler {
  return (req, res, next) => {
    // A body already read (by a route's own larger limit, as brain entries have) is past this check.
    const ofType = typeof types === 'function' ? types() : req.is(types);
    if (!declaresMoreThan(req, limitBytes) || req.body !== undefined || !ofType) return next();
    res.setHeader('Connection', 'close');
    next(Object.assign(new Error('request entity too large'), { type: 'entity.too.large', status: 413, expose: true, limit: limitBytes }));
  };
}

export const declaresMoreThan = (req: { headers: { 'content-length'?: string } }, limitBytes: number): boolean => Number(req.headers['content-length']) > limitBytes;
