/**
 * The one error shape of the platform. Domain code throws `serviceError(code)`; one middleware turns
 * any ServiceError into the spec's envelope `{error:{type,code,message,param?,retry_after_seconds?}}`.
 * Each code's status and type live in CATALOG, so a code can never be sent with two different statuses.
 */
export type ErrorType =
  | 'authentication_error'
  | 'invalid_request_error'
  | 'permission_error'
  | 'rate_limit_error'
  | 'conflict_error'
  | 'not_found_error'
  | 'payment_required'
  | 'api_error'
  | 'not_implemented';

interface ErrorSpec {
  status: number;
  type: ErrorType;
  message: string;
}

const CATALOG = {
  // Authentication and authorization (spec 1, "Authentication and authorization").
  missing_token: { status: 401, type: 'authentication_error', message: 'No Authorization header was sent.' },
  invalid_auth_scheme: {
    status: 401,
    type: 'authentication_error',
    message: "The Authorization header must start with 'Bearer ' or 'Client '.",
  },
  invalid_token_format: {
    status: 401,
    type: 'authentication_error',
    message: "The Bearer credential is not a developer API key: it must be 'ko_' followed by 64 lowercase hex characters.",
  },
  invalid_token: { status: 401, type: 'authentication_error', message: 'The API key is unknown, revoked or expired.' },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'The API key is missing or revoked.' },
  invalid_client_token: { status: 401, type: 'authentication_error', message: 'The client token is invalid, revoked or expired.' },
  invalid_provisioning_key: {
    status: 401,
    type: 'authentication_error',
    message: "This route needs a provisioning key: 'Authorization: Bearer rsk_<64 hex>'. The key sent is missing, malformed or revoked.",
  },
  insufficient_scope: { status: 403, type: 'permission_error', message: 'The API key lacks the scope this route needs.' },
  endpoint_not_allowed_for_client_token: {
    status: 403,
    type: 'permission_error',
    message: 'Client tokens cannot call this endpoint; use a developer API key from your server.',
  },

  // Request shape.
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'The request is invalid.' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is larger than this endpoint accepts.' },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    message: 'The request body encoding or charset is not supported; send UTF-8 JSON.',
  },
  not_found: { status: 404, type: 'not_found_error', message: 'No such resource.' },

  // Accounts (spec 1, "Accounts").
  account_not_found: { status: 404, type: 'not_found_error', message: 'No such account under this developer.' },
  account_exists: { status: 409, type: 'conflict_error', message: 'The email or username is already in use.' },

  // Service side.
  internal_error: { status: 500, type: 'api_error', message: 'The service failed to handle the request. Retry with backoff.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof CATALOG;

export interface ErrorDetails {
  message?: string;
  /** The offending field, for field-validation errors only. */
  param?: string;
  /** For rate-limit errors; also sent as the Retry-After header. */
  retryAfterSeconds?: number;
}

export class ServiceError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: ErrorCode;
  readonly param: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, details: ErrorDetails = {}) {
    const spec: ErrorSpec = CATALOG[code];
    super(details.message ?? spec.message);
    this.name = 'ServiceError';
    this.status = spec.status;
    this.type = spec.type;
    this.code = code;
    this.param = details.param;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

export function serviceError(code: ErrorCode, details?: ErrorDetails): ServiceError {
  return new ServiceError(code, details);
}

export interface ErrorEnvelope {
  error: {
    type: ErrorType;
    code: ErrorCode;
    message: string;
    param?: string;
    retry_after_seconds?: number;
  };
}

export function toEnvelope(error: ServiceError): ErrorEnvelope {
  return {
    error: {
      type: error.type,
      code: error.code,
      message: error.message,
      ...(error.param !== undefined && { param: error.param }),
      ...(error.retryAfterSeconds !== undefined && { retry_after_seconds: error.retryAfterSeconds }),
    },
  };
}
