import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { ZodError } from 'zod';
import { ServiceError, serviceError, toEnvelope, type ErrorCode } from '../../shared/errors.js';
import { classifyDatabaseError } from '../../shared/db/errors.js';
import { awayDependency } from '../../shared/platform/dependency-errors.js';
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
  logCause(req, error, failure);
  if (res.headersSent) return next(error);
  if (failure.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(failure.retryAfterSeconds));
  res.status(failure.status).json(toEnvelope(failure));
};

/**
 * Once per failed request, with its request id (req.log carries it): a 5xx's cause with its stack,
 * and a database refusal the input layer let through (a gap in shared/validation.ts to close) at warn.
 */
export function logCause(req: Request, error: unknown, failure: ServiceError): void {
  if (failure.status >= 500) req.log.error({ err: error }, 'request failed');
  else if (failure !== error && classifyDatabaseError(error)) req.log.warn({ err: error }, 'the database refused a value of the request');
}

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
  return fromDependencyError(error) ?? fromDatabaseError(error) ?? fromRequestReadingError(error) ?? serviceError('internal_error');
}

/** Redis or Temporal away (shared/platform/dependency-errors.ts): a 503 naming it, to retry. */
function fromDependencyError(error: unknown): ServiceError | undefined {
  const away = awayDependency(error);
  return away && serviceError('service_unavailable', { message: `${away} is unavailable for the moment. Retry after the Retry-After seconds.`, retryAfterSeconds: 1 });
}

/** The last line of defence (shared/db/errors.ts): a value PostgreSQL refused is the caller's 400; an unreachable database is a 503 to retry. */
function fromDatabaseError(error: unknown): ServiceError | undefined {
  const failure = classifyDatabaseError(error);
  switch (failure?.kind) {
    case undefined:
      return undefined;
    case 'input':
      return serviceError('invalid_request', {
        ...(failure.column && { param: failure.column }),
        message: `A value in the request cannot be stored${failure.column ? ` (${failure.column})` : ''}: it is out of range, too large, or not of the kind its field takes.`,
      });
    case 'conflict':
      return serviceError('concurrent_change');
    case 'unavailable':
      return serviceError('service_unavailable', { message: 'The database is unavailable for the moment. Retry after the Retry-After seconds.', retryAfterSeconds: 1 });
  }
}

/**
 * What else Express and its body parser raise while reading a request, as http-errors with a 4xx
 * status and no `type`: a body whose Content-Encoding does not decode (bad gzip), a path whose
 * percent-encoding is not UTF-8. Their own messages name library internals, so each status gets the
 * spec's code and a message of ours.
 */
function fromRequestReadingError(error: unknown): ServiceError | undefined {
  const { status, expose } = (error ?? {}) as { status?: unknown; expose?: unknown };
  if (typeof status !== 'number' || status < 400 || status >= 500) return undefined;
  // The router's path decoding failure carries its status without http-errors' `expose`.
  if (error instanceof URIError) return serviceError('invalid_request', { message: 'The request path is not valid percent-encoded UTF-8.' });
  if (expose !== true) return undefined;
  if (status === 413) return serviceError('request_too_large');
  if (status === 415) return serviceError('unsupported_media_type');
  const zlibCode = (error as { code?: unknown }).code;
  if (typeof zlibCode === 'string' && zlibCode.startsWith('Z_')) return serviceError('invalid_request', { message: 'The request body does not decode with its Content-Encoding.' });
  return serviceError('invalid_request', { message: 'The request could not be read.' });
}
