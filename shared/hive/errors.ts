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
  ) {
    super(message);
    this.name = 'HiveError';
  }
}

export function hiveError(status: number, message: string): HiveError {
  return new HiveError(status, message);
}

export interface HiveErrorBody {
  error: string;
}

/** The body of every hive error response, built here only. */
export function toHiveErrorBody(error: { message: string }): HiveErrorBody {
  return { error: error.message };
}
