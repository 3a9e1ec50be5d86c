import { ServiceError, serviceError } from '../errors.js';

/** A failure to write a balance or its ledger is a 500 wallet_error; the transaction rolled back, so nothing was charged. */
export async function guardLedger<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ServiceError || error instanceof RangeError) throw error;
    throw Object.assign(serviceError('wallet_error'), { cause: error });
  }
}
