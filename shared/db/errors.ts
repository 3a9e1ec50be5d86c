/**
 * Whose fault a failed statement was, read from PostgreSQL's SQLSTATE and from node's socket
 * errors, without importing the driver: the error handlers of both servers turn the answer into a
 * status (api/middleware/errors.ts). The input layer keeps what PostgreSQL would refuse out of the
 * domains (shared/validation.ts); this is the last line behind it, so one that still gets through
 * is the caller's 400, never a 500.
 */
export type DatabaseFailure =
  /** A value the statement carried from the request could not be stored or compared (class 22, some of 23, 54). */
  | { kind: 'input'; sqlState: string; column: string | undefined }
  /** A unique row another request wrote first (23505 that no domain turned into its own code). */
  | { kind: 'conflict'; sqlState: string }
  /** PostgreSQL is unreachable, shutting down, out of resources or lost the race (a fault, not the request). */
  | { kind: 'unavailable'; sqlState: string | undefined };

export const UNIQUE_VIOLATION = '23505';

/** The caller's part of class 23: a missing value, a reference to nothing, a check or exclusion refused. */
const CALLERS_INTEGRITY = new Set(['23502', '23503', '23514', '23P01']);
/** Faults of the server or the moment: query cancelled (statement timeout), lock not available, serialization failure, deadlock. */
const TRANSIENT = new Set(['57014', '55P03', '40001', '40P01']);
/** Node's socket errors of a server that cannot be reached (PostgreSQL's here, Redis's in shared/platform/queues.ts). */
export const CONNECTION_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
/** pg's own words when a connection is lost or cannot be had (they carry no code). */
const CONNECTION_MESSAGES = [/^Connection terminated/, /timeout exceeded when trying to connect/, /Client has encountered a connection error/, /Connection terminated due to connection timeout/];

export function classifyDatabaseError(error: unknown): DatabaseFailure | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, column, severity } = error as Error & { code?: unknown; column?: unknown; severity?: unknown };
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string') {
    const sqlClass = code.slice(0, 2);
    if (sqlClass === '22' || sqlClass === '54' || CALLERS_INTEGRITY.has(code)) return { kind: 'input', sqlState: code, column: typeof column === 'string' ? column : undefined };
    if (code === UNIQUE_VIOLATION) return { kind: 'conflict', sqlState: code };
    if (sqlClass === '08' || sqlClass === '53' || sqlClass === '57' || TRANSIENT.has(code)) return { kind: 'unavailable', sqlState: code };
    return undefined;
  }
  if (typeof code === 'string' && CONNECTION_ERRNOS.has(code)) return { kind: 'unavailable', sqlState: undefined };
  if (CONNECTION_MESSAGES.some((pattern) => pattern.test(error.message))) return { kind: 'unavailable', sqlState: undefined };
  return undefined;
}
