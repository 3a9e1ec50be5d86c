import { Redis } from 'ioredis';
import type { Logger } from '../logger.js';

/**
 * Two kinds of connection: `commands` fail fast when Redis is away (a request must not hang on a
 * rate-limit check); the blocking ones wait forever, as BullMQ workers and the run event reader's
 * XREAD BLOCK require. The role names the connection in CLIENT LIST.
 */
export function createRedis(url: string, role: 'commands' | 'blocking' | 'run-events', logger: Logger): Redis {
  const redis = new Redis(url, {
    connectionName: `svc-${role}`,
    maxRetriesPerRequest: role === 'commands' ? 2 : null,
    // A request's command while Redis is away fails at once (503 to the caller) instead of queueing
    // for reconnects. No per-command timeout: a 1 s one fired on a loaded 2-core machine (a burst of
    // 110 client-token mints, a worker starting beside the test suite), refusing calls Redis served.
    ...(role === 'commands' && { enableOfflineQueue: false }),
    connectTimeout: 5_000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
  });
  let reported = false;
  redis.on('error', (error) => {
    // ioredis retries by itself; log the outage once, not once per retry.
    if (!reported) logger.warn({ err: error, role }, 'Redis connection failed; retrying');
    reported = true;
  });
  redis.on('ready', () => {
    reported = false;
  });
  if (role === 'commands') watchForHang(redis, logger);
  return redis;
}

/**
 * A Redis that stops answering without closing its connections (a paused or wedged server, a
 * partition that drops packets) would hold a request's command until TCP gives up, minutes later.
 * A ping every second tells: one unanswered for HANG_MS means Redis hangs; its waiting commands
 * fail at once ("Connection is closed": 503 to the caller) and the connection is made again;
 * while it reconnects, new commands fail at once through the disabled offline queue, until Redis
 * answers its ready check again. A ping is judged only when this process's own timer fired on
 * time: after the event loop was blocked the reply may be waiting unread, and a process busy on 2
 * cores must not take its own slowness for Redis's (a per-command timeout did, refusing calls
 * Redis had answered).
 */
const PING_EVERY_MS = 1_000;
const HANG_MS = 2_000;
const LATE_TICK_MS = 500;

function watchForHang(redis: Redis, logger: Logger): void {
  let pingSentAt: number | undefined;
  let lastTick = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    const onTime = now - lastTick < PING_EVERY_MS + LATE_TICK_MS;
    lastTick = now;
    if (redis.status !== 'ready') {
      pingSentAt = undefined;
      return;
    }
    if (pingSentAt === undefined) {
      const sentAt = now;
      pingSentAt = sentAt;
      const answered = () => {
        if (pingSentAt === sentAt) pingSentAt = undefined;
      };
      redis.ping().then(answered, answered);
    } else if (onTime && now - pingSentAt >= HANG_MS) {
      const waitedMs = now - pingSentAt;
      pingSentAt = undefined;
      logger.warn({ waitedMs }, 'Redis stopped answering; failing the commands waiting on it and reconnecting');
      // ioredis's own recovery from a connection it cannot trust: reject every waiting command, then reconnect.
      const error = new Error(`Connection is closed: Redis did not answer for ${waitedMs} ms`);
      redis.recoverFromFatalError(error, error, {});
    }
  }, PING_EVERY_MS);
  timer.unref();
  redis.once('end', () => clearInterval(timer));
}
