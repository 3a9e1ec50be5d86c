import type { ErrorRequestHandler, RequestHandler } from 'express';
import { HiveError, toHiveErrorBody } from '../../shared/hive/errors.js';
import { toServiceError } from '../middleware/errors.js';

/** Any path no hive router claimed. */
export const notFound: RequestHandler = (req, _res, next) => {
  next(new HiveError(404, `Not found: ${req.method} ${req.path}`));
};

/** The one place a hive error becomes a response: spec 3's `{"error": "<message>"}`, never a stack trace. */
export const errorHandler: ErrorRequestHandler = (error: unknown, req, res, next) => {
  const failure = toHiveError(error);
  if (failure.status >= 500) req.log.error({ err: error }, 'request failed');
  if (res.headersSent) return next(error);
  res.status(failure.status).json(toHiveErrorBody(failure));
};

/**
 * A HiveError as it is; anything else (the body parser's refusals, a zod failure, a bug) keeps the
 * status and message the gateway gives it, in the hive's body.
 */
function toHiveError(error: unknown): HiveError {
  if (error instanceof HiveError) return error;
  const failure = toServiceError(error);
  return new HiveError(failure.status, failure.message);
}
