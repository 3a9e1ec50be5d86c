/**
 * Whether an error says Redis or Temporal is away, read from the clients' own error names and
 * words without importing them: the error handlers of both servers answer such a failure 503 with
 * Retry-After, naming the dependency, never 500 (PostgreSQL's are read by shared/db/errors.ts).
 */
export type AwayDependency = 'Redis' | 'Temporal';

/** ioredis: no connection and no offline queue, retries spent, a command past its timeout, a closed connection. */
const REDIS_AWAY = [/enableOfflineQueue options is false/, /^Reached the max retries per request limit/, /^Command timed out/, /^Connection is closed/];
/** gRPC status codes of a Temporal call that never reached a server that could answer: UNAVAILABLE, DEADLINE_EXCEEDED. */
const GRPC_AWAY = new Set([14, 4]);

export function awayDependency(error: unknown): AwayDependency | undefined {
  if (!(error instanceof Error)) return undefined;
  if (error.name === 'MaxRetriesPerRequestError' || REDIS_AWAY.some((pattern) => pattern.test(error.message))) return 'Redis';
  // @temporalio/client wraps the gRPC error (its `code`) in a ServiceError as `cause`.
  for (const candidate of [error, (error as { cause?: unknown }).cause]) {
    const code = (candidate as { code?: unknown } | undefined)?.code;
    if (typeof code === 'number' && GRPC_AWAY.has(code) && (error.name === 'ServiceError' || 'details' in (candidate as object))) return 'Temporal';
  }
  return undefined;
}
