import { Client, Connection, defaultGrpcRetryOptions, isGrpcDeadlineError, makeGrpcRetryInterceptor, type WorkflowHandle } from '@temporalio/client';
import type { Config } from '../config.js';

export interface TemporalHandle {
  connection: Connection;
  client: Client;
  /**
   * For /v1/health only: no retry interceptor, so a probe of an unreachable server fails at once
   * and leaves no retry timer behind to fire after the process closed its channels.
   */
  probe: Connection;
}

/**
 * How long one Temporal call may take when its caller set no deadline of its own. gRPC sets none,
 * so without it a call to a server that accepts connections and does not answer (paused,
 * overloaded, behind a partition) holds its request until the channel's keepalive gives the
 * connection up, 45 s at best. A healthy call is a frontend round trip and a persistence write,
 * tens of milliseconds; 3 s leaves a loaded machine's pauses far behind (this process's event-loop
 * lag counts against a deadline, as it did against the 1 s Redis command timeout dropped in
 * ad28a45), and a caller still hears 503 within seconds, long before clients and proxies give up.
 * The worker's calls through this client (activities and queue jobs starting workflows) are
 * bounded alike; its task polls go through its own NativeConnection.
 */
export const TEMPORAL_CALL_DEADLINE_MS = 3_000;

/**
 * The calls that wait on the server for something to happen (a workflow to close, an update to
 * finish): they keep their caller's deadline (workflowResultBy) or none, never the default above.
 * A history is long-polled only with waitNewEvent, which an interceptor cannot see in the encoded
 * request; nothing here reads a history otherwise.
 */
const LONG_POLLS = new Set(
  ['GetWorkflowExecutionHistory', 'PollWorkflowExecutionUpdate', 'UpdateWorkflowExecution', 'ExecuteMultiOperation'].map(
    (method) => `/temporal.api.workflowservice.v1.WorkflowService/${method}`,
  ),
);

/**
 * Lazy connections: the API starts (and reports Temporal as down in /v1/health) even while
 * the Temporal server is still starting or unreachable.
 */
export function connectTemporal(config: Pick<Config, 'temporalAddress' | 'TEMPORAL_NAMESPACE'>): TemporalHandle {
  const connection = Connection.lazy({ address: config.temporalAddress, interceptors: [retryWithinDeadline()] });
  const probe = Connection.lazy({ address: config.temporalAddress, interceptors: [] });
  return { connection, client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), probe };
}

type GrpcInterceptor = ReturnType<typeof makeGrpcRetryInterceptor>;

/**
 * The SDK's retry interceptor (its default backoff on UNAVAILABLE and the like) under a deadline:
 * the caller's, else TEMPORAL_CALL_DEADLINE_MS from now for any call but a long poll. A retry whose
 * backoff would end past the deadline is not made, so a Temporal refusing connections fails the
 * call with its own error before the deadline rather than with DEADLINE_EXCEEDED up to 5 s after.
 */
function retryWithinDeadline(): GrpcInterceptor {
  const backoff = defaultGrpcRetryOptions();
  return (options, nextCall) => {
    const deadline = options.deadline ?? (LONG_POLLS.has(options.method_definition.path) ? undefined : Date.now() + TEMPORAL_CALL_DEADLINE_MS);
    const deadlineMs = deadline === undefined ? Infinity : typeof deadline === 'number' ? deadline : deadline.getTime();
    let delayMs = 0;
    const retry = makeGrpcRetryInterceptor({
      retryableDecider: (attempt, status) => {
        delayMs = backoff.delayFunction(attempt, status);
        return backoff.retryableDecider(attempt, status) && Date.now() + delayMs < deadlineMs;
      },
      delayFunction: () => delayMs,
    });
    return retry(deadline === undefined ? options : { ...options, deadline }, nextCall);
  };
}

/**
 * The workflow's result, or undefined when it has not ended by `deadline` (ms since the epoch);
 * a workflow that failed, was cancelled or terminated throws, as handle.result() does. The wait
 * is the result's own long poll under that deadline, so giving up ends the poll: racing
 * handle.result() against a timer instead leaves it polling Temporal until the workflow ends, one
 * poll per request that gave up, piling up while no worker runs the workflows.
 */
export async function workflowResultBy<T>(handle: WorkflowHandle, deadline: number): Promise<T | undefined> {
  try {
    return (await handle.client.withDeadline(deadline, () => handle.result())) as T;
  } catch (error) {
    if (isGrpcDeadlineError(error)) return undefined;
    throw error;
  }
}
