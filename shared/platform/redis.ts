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
  return redis;
}
