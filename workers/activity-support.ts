import { ApplicationFailure, heartbeat } from '@temporalio/activity';
import { ServiceError } from '../shared/errors.js';

/** A refusal that retrying cannot cure (a wallet empty, the provider refusing the input) fails the workflow at once. */
async function permanentAsNonRetryable<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ServiceError && error.status < 500 && error.status !== 429) {
      throw ApplicationFailure.create({ message: error.message, type: error.code, nonRetryable: true });
    }
    throw error;
  }
}

/**
 * A step that waits on an upstream (an embedding batch, a model's answer): heartbeats flow every
 * `everyMs` meanwhile, so a live step is never taken for dead, and `work` may beat after each
 * batch it writes. A permanent refusal fails the workflow at once (its type is the error code).
 */
export function heartbeating<T>(everyMs: number, work: (beat: () => void) => Promise<T>): Promise<T> {
  return permanentAsNonRetryable(() => beatingWhile(everyMs, work));
}

/** Heartbeats every `everyMs` while `work` runs; its errors pass through as they are (the step decides what ends it). */
export async function beatingWhile<T>(everyMs: number, work: (beat: () => void) => Promise<T>): Promise<T> {
  const beating = setInterval(() => heartbeat(), everyMs);
  try {
    return await work(() => heartbeat());
  } finally {
    clearInterval(beating);
  }
}
