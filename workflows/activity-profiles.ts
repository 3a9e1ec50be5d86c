import type { ActivityOptions, LocalActivityOptions, RetryPolicy } from '@temporalio/workflow';

/**
 * The timeouts and retry policies activities run under, named for the work they suit, so a new
 * workflow picks a profile instead of restating numbers. Activities that fail on infrastructure
 * (the database away, a worker restarting) retry with these backoffs; a permanent failure is an
 * ApplicationFailure marked non-retryable by the activity itself.
 */

/** Backoff for database-bound steps: quick first retries, capped at half a minute. */
const DATABASE_BACKOFF: RetryPolicy = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' };

/** One step over a resource row (validate, finalize): bounded, retried until the database answers. */
export const RESOURCE_STEP: ActivityOptions = { startToCloseTimeout: '30 minutes', retry: DATABASE_BACKOFF };

/**
 * A quick database step of an interactive operation (a run's start, finish, a wake-up check): it
 * takes milliseconds, so one whose worker died is retried after 30 seconds, not half an hour.
 */
export const QUICK_STEP: ActivityOptions = { startToCloseTimeout: '30 seconds', retry: DATABASE_BACKOFF };

/**
 * A long chunk of work that heartbeats its progress (a batch chunk): a worker that stops
 * heartbeating for `heartbeatSeconds` is presumed dead and the chunk resumes elsewhere.
 */
export function heartbeatingChunk(heartbeatSeconds: number): ActivityOptions {
  return { startToCloseTimeout: '24 hours', heartbeatTimeout: `${heartbeatSeconds} seconds`, retry: DATABASE_BACKOFF };
}

/**
 * A step that waits on a model's answers (a learn pass's extraction and judgements, a
 * consolidation): bounded like a resource step, and heartbeating, so a step whose worker died
 * resumes on another within 20 seconds instead of after its start-to-close timeout.
 */
export const MODEL_STEP: ActivityOptions = { startToCloseTimeout: '30 minutes', heartbeatTimeout: '20 seconds', retry: DATABASE_BACKOFF };

/**
 * A model-bound step run as a local activity, inside its workflow task (a learn pass's): bounded
 * and retried as MODEL_STEP; retries past its heartbeat window wait on the server as timers rather
 * than holding a worker slot. A worker that dies mid-step is replaced when the task times out.
 */
export const LOCAL_MODEL_STEP: LocalActivityOptions = { startToCloseTimeout: MODEL_STEP.startToCloseTimeout, localRetryThreshold: MODEL_STEP.heartbeatTimeout, retry: DATABASE_BACKOFF };

/** One outbound HTTP attempt (a webhook delivery, at most 60 s): retried only for infrastructure failures. */
export const OUTBOUND_ATTEMPT: ActivityOptions = {
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
};
