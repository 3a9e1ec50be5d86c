import { classifyDatabaseError } from '../db/errors.js';
import { ServiceError, serviceError } from '../errors.js';

/**
 * A failure to write a balance or its ledger is a 500 wallet_error; the transaction rolled back, so
 * nothing was charged. PostgreSQL away is not that: it goes on as itself, the 503 to retry.
 */
export async function guardLedger<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ServiceError || error instanceof RangeError || classifyDatabaseError(error)?.kind === 'unavailable') throw error;
    throw Object.assign(serviceError('wallet_error'), { cause: error });
  }
}
