import { boundedMessage } from '../errors.js';

/**
 * The hive's one error shape (spec 3, "Errors"): `{"error": "<message>"}` with a status that means
 * what it says: 400 a request that does not parse, 401 no credential, 403 a credential without
 * the grant, 404 nothing there, 409 a guard refusing, 503 a dependency away. Spec 3 names no
 * codes, and the gateway's envelope (shared/errors.ts) is not the hive's.
 */
export class HiveError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** What a refusal reports beside its message (an erasure refused under a legal hold: what it would have done). */
    readonly detail?: Record<string, unknown>,
    /** A 503's Retry-After header: when asking again may find what was away. */
    readonly retryAfterSeconds?: number,
  ) {
    super(boundedMessage(message));
    this.name = 'HiveError';
  }
}

export function hiveError(status: number, message: string, detail?: Record<string, unknown>): HiveError {
  return new HiveError(status, message, detail);
}

/** A 503 to ask again after `retryAfterSeconds` (what answers the request is away for now). */
export function hiveUnavailable(message: string, retryAfterSeconds: number): HiveError {
  return new HiveError(503, message, undefined, retryAfterSeconds);
}

export interface HiveErrorBody {
  error: string;
  [field: string]: unknown;
}

/** The body of every hive error response, built here only: the message, then any detail the refusal carries. */
export function toHiveErrorBody(error: { message: string; detail?: Record<string, unknown> }): HiveErrorBody {
  return { ...error.detail, error: error.message };
}
