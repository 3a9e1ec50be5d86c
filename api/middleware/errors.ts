import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ZodError } from 'zod';
import { ServiceError, serviceError, toEnvelope, type ErrorCode } from '../../shared/errors.js';
import { fromZodError } from '../../shared/validation.js';

/** Any path no router claimed. */
export const notFound: RequestHandler = (req, _res, next) => {
  next(serviceError('not_found', { message: `No route for ${req.method} ${req.path}.` }));
};

/** The one place an error becomes a response: the spec's envelope, never a stack trace. */
export const errorHandler: ErrorRequestHandler = (error: unknown, req, res, next) => {
  const failure = toServiceError(error);
  // The access log line (middleware/request-log.ts) carries the code; a 500 also logs its cause here, with the stack.
  res.locals.errorCode = failure.code;
  if (failure.status >= 500) req.log.error({ err: error }, 'request failed');
  if (res.headersSent) return next(error);
  if (failure.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(failure.retryAfterSeconds));
  res.status(failure.status).json(toEnvelope(failure));
};

/** Errors raised by Express's body parser carry a `type`; each maps to one code. */
const BODY_PARSER_CODES: Record<string, ErrorCode> = {
  'entity.parse.failed': 'invalid_json',
  'entity.too.large': 'request_too_large',
  'encoding.unsupported': 'unsupported_media_type',
  'charset.unsupported': 'unsupported_media_type',
  'entity.verify.failed': 'invalid_request',
  'request.aborted': 'invalid_request',
  'request.size.invalid': 'invalid_request',
  'stream.encoding.set': 'internal_error',
  'stream.not.readable': 'internal_error',
};

export function toServiceError(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error instanceof ZodError) return fromZodError(error);
  const bodyErrorType = (error as { type?: unknown } | null)?.type;
  if (typeof bodyErrorType === 'string' && bodyErrorType in BODY_PARSER_CODES) {
    const code = BODY_PARSER_CODES[bodyErrorType]!;
    return code === 'request_too_large'
      ? serviceError(code, { message: `The request body is larger than the ${(error as { limit?: number }).limit ?? ''} bytes this endpoint accepts.`.replace('  ', ' ') })
      : serviceError(code);
  }
  return serviceError('internal_error');
}
