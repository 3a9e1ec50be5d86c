import type { ErrorRequestHandler, RequestHandler } from 'express';
import { HiveError, toHiveErrorBody } from '../../shared/hive/errors.js';
import { logCause, toServiceError } from '../middleware/errors.js';

/** Any path no hive router claimed. */
export const notFound: RequestHandler = (req, _res, next) => {
  next(new HiveError(404, `Not found: ${req.method} ${req.path}`));
};

/** The one place a hive error becomes a response: spec 3's `{"error": "<message>"}`, never a stack trace. */
export const errorHandler: ErrorRequestHandler = (error: unknown, req, res, next) => {
  if (error instanceof HiveError) {
    if (error.status >= 500) req.log.error({ err: error }, 'request failed');
    if (res.headersSent) return next(error);
    if (error.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(error.retryAfterSeconds));
    return res.status(error.status).json(toHiveErrorBody(error));
  }
  // Anything else (the body parser's refusals, a zod failure, a database refusal, a bug) keeps the
  // status, message and Retry-After the gateway gives it, in the hive's body.
  const failure = toServiceError(error);
  logCause(req, error, failure);
  if (res.headersSent) return next(error);
  if (failure.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(failure.retryAfterSeconds));
  res.status(failure.status).json(toHiveErrorBody(failure));
};
