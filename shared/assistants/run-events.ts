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

/** A follower of one run: the events read for it and not yet taken, and how to wake it. */
interface Follower {
  key: string;
  /** The id of the last event this follower has been given. */
  cursor: string;
  queue: RunEvent[];
  failure?: unknown;
  wake?: () => void;
}

/**
 * Every run's followers in this process, served by one blocking Redis connection: one XREAD BLOCK
 * over the streams of all runs being followed, each from the earliest cursor its followers hold,
 * its entries handed to the followers they are new to. A connection per follower (XREAD BLOCK
 * holds the connection it runs on) would cost a connect for every streamed run and a connection
 * to Redis for each stream open at once.
 *
 * A follower that arrives while the read is blocked needs its stream in the read: the read is
 * interrupted (CLIENT UNBLOCK from the commands connection) and issued again with it.
 */
export class RunEventReader {
  private readonly followers = new Map<string, Set<Follower>>();
  private blocking: Redis | undefined;
  /** The blocking connection's client id, for CLIENT UNBLOCK; read again after each reconnect. */
  private blockingId: number | undefined;
  /** The read in flight (a token per read): a follower added meanwhile interrupts this one. */
  private reading: object | undefined;
  /** The read loop while it runs; cleared by the loop itself in the same step that finds no one to read for. */
  private loop: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly commands: Redis,
    private readonly openBlocking: () => Redis,
    private readonly prefix: string,
    private readonly blockMs = 5_000,
  ) {}

  /**
   * The run's events after `afterId`, until one that ends this stream of them (the run finished,
   * or it waits for tool outputs) or the caller's signal.
   */
  async *follow(runId: string, afterId: string, signal: AbortSignal): AsyncGenerator<RunEvent> {
    if (this.closed) throw readerClosed();
    const follower: Follower = { key: keyOf(this.prefix, runId), cursor: afterId, queue: [] };
    const wake = () => follower.wake?.();
    signal.addEventListener('abort', wake, { once: true });
    this.add(follower);
    try {
      while (!signal.aborted) {
        const event = follower.queue.shift();
        if (event) {
          yield event;
          if (TERMINAL.has(event.event)) return;
          continue;
        }
        if (follower.failure !== undefined) throw follower.failure;
        await new Promise<void>((resolve) => (follower.wake = resolve));
        follower.wake = undefined;
      }
    } finally {
      signal.removeEventListener('abort', wake);
      this.remove(follower);
    }
  }

  /** Ends every follower still waiting; the read in flight fails as its connection closes. */
  async close(): Promise<void> {
    this.closed = true;
    for (const followers of this.followers.values()) for (const follower of followers) this.fail(follower, readerClosed());
    this.followers.clear();
    this.blocking?.disconnect();
    await this.loop;
  }

  private add(follower: Follower): void {
    const followers = this.followers.get(follower.key) ?? new Set();
    followers.add(follower);
    this.followers.set(follower.key, followers);
    this.loop ??= this.read();
    if (this.reading) {
      // Failing that (Redis away), the read still ends within blockMs and the next one covers it.
      this.unblock(this.reading).catch(() => undefined);
    }
  }

  private remove(follower: Follower): void {
    const followers = this.followers.get(follower.key);
    followers?.delete(follower);
    if (followers?.size === 0) this.followers.delete(follower.key);
  }

  /** Reads while anyone follows; a read that fails fails the followers it was reading for. */
  private async read(): Promise<void> {
    for (;;) {
      if (this.followers.size === 0 || this.closed) {
        this.loop = undefined;
        return;
      }
      const keys = [...this.followers.keys()];
      const cursors = keys.map((key) => earliest([...this.followers.get(key)!].map((follower) => follower.cursor)));
      this.reading = {};
      try {
        const connection = await this.connection();
        const batch = (await connection.xread('COUNT', 100, 'BLOCK', this.blockMs, 'STREAMS', ...keys, ...cursors)) as [string, [string, string[]][]][] | null;
        for (const [key, entries] of batch ?? []) this.deliver(key, entries);
      } catch (error) {
        for (const key of keys) for (const follower of this.followers.get(key) ?? []) this.fail(follower, error);
        for (const key of keys) this.followers.delete(key);
      } finally {
        this.reading = undefined;
      }
    }
  }

  private deliver(key: string, entries: [string, string[]][]): void {
    for (const follower of this.followers.get(key) ?? []) {
      for (const [id, fields] of entries) {
        if (compareIds(id, follower.cursor) <= 0) continue;
        follower.cursor = id;
        follower.queue.push({ event: fields[fields.indexOf('event') + 1]!, data: JSON.parse(fields[fields.indexOf('data') + 1]!) });
      }
      follower.wake?.();
    }
  }

  private fail(follower: Follower, error: unknown): void {
    follower.failure = error;
    follower.wake?.();
  }

  private async connection(): Promise<Redis> {
    if (!this.blocking) {
      this.blocking = this.openBlocking();
      this.blocking.on('ready', () => (this.blockingId = undefined));
    }
    this.blockingId ??= Number(await this.blocking.client('ID'));
    return this.blocking;
  }

  /**
   * Interrupts the read in flight so that the next one covers the followers added since it began.
   * CLIENT UNBLOCK reaches Redis on another connection than the read, so it may arrive before the
   * read does; it is sent again until the read has returned.
   */
  private async unblock(read: object): Promise<void> {
    while (this.reading === read) {
      if (this.blockingId !== undefined && Number(await this.commands.client('UNBLOCK', this.blockingId)) === 1) return;
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
}

/** Stream ids as Redis orders them: milliseconds, then sequence ('0' is the start). */
function compareIds(a: string, b: string): number {
  const [aMs, aSeq = '0'] = a.split('-');
  const [bMs, bSeq = '0'] = b.split('-');
  return Number(aMs) - Number(bMs) || Number(aSeq) - Number(bSeq);
}

const readerClosed = () => new Error('the run event reader closed');

const earliest = (ids: string[]) => ids.reduce((first, id) => (compareIds(id, first) < 0 ? id : first));
