import type { Redis } from 'ioredis';

/**
 * A run's progress as OpenAI's assistant stream events (thread.run.in_progress,
 * thread.run.step.created, thread.message.delta, thread.run.completed ...), appended by the
 * workflow's activities to a Redis stream per run as they make the progress. `stream: true` on
 * create-run and submit-tool-outputs follows that stream: the same steps the polling callers see,
 * never a second way of running.
 */
export interface RunEvent {
  event: string;
  data: unknown;
}

/** Events of a finished run are kept this long for late followers. */
const KEEP_SECONDS = 3_600;
const MAX_EVENTS = 2_000;
const TERMINAL = new Set(['thread.run.completed', 'thread.run.failed', 'thread.run.cancelled', 'thread.run.expired', 'thread.run.incomplete', 'thread.run.requires_action']);

const keyOf = (prefix: string, runId: string) => `${prefix}:run-events:${runId}`;

export async function publishRunEvents(redis: Redis, prefix: string, runId: string, events: RunEvent[]): Promise<void> {
  if (events.length === 0) return;
  const key = keyOf(prefix, runId);
  const pipeline = redis.multi();
  for (const { event, data } of events) pipeline.xadd(key, 'MAXLEN', '~', String(MAX_EVENTS), '*', 'event', event, 'data', JSON.stringify(data));
  pipeline.expire(key, KEEP_SECONDS);
  await pipeline.exec();
}

/** The id of the run's last event so far ('0' when none): a follower that starts after it misses nothing later. */
export async function lastRunEventId(redis: Redis, prefix: string, runId: string): Promise<string> {
  const last = await redis.xrevrange(keyOf(prefix, runId), '+', '-', 'COUNT', 1);
  return last[0]?.[0] ?? '0';
}

/**
 * The run's events after `afterId`, until one that ends this stream of them (the run finished,
 * or it waits for tool outputs) or the caller's signal. `blocking` is a connection of its own
 * (XREAD BLOCK holds it).
 */
export async function* followRunEvents(blocking: Redis, prefix: string, runId: string, afterId: string, signal: AbortSignal): AsyncGenerator<RunEvent> {
  const key = keyOf(prefix, runId);
  let cursor = afterId;
  while (!signal.aborted) {
    const batch = (await blocking.xread('COUNT', 100, 'BLOCK', 1_000, 'STREAMS', key, cursor)) as [string, [string, string[]][]][] | null;
    for (const [, entries] of batch ?? []) {
      for (const [id, fields] of entries) {
        cursor = id;
        const event = fields[fields.indexOf('event') + 1]!;
        yield { event, data: JSON.parse(fields[fields.indexOf('data') + 1]!) };
        if (TERMINAL.has(event)) return;
      }
    }
  }
}

/** A follower of one run's events on a blocking connection of its own, closed when the follower stops. */
export async function* runEventStream(redis: Redis, prefix: string, runId: string, afterId: string, signal: AbortSignal): AsyncGenerator<RunEvent> {
  const blocking = redis.duplicate();
  try {
    yield* followRunEvents(blocking, prefix, runId, afterId, signal);
  } finally {
    blocking.disconnect();
  }
}
