import type { Redis } from 'ioredis';
import { CredentialCache } from '../accounts/credential-cache.js';
import { QuotaGrants } from '../billing/grants.js';
import { enableMeteringGroups } from '../billing/repository.js';
import { loadClientTokenKeys, type ClientTokenKeys } from '../client-tokens/keys.js';
import type { Config } from '../config.js';
import { createPool, registerVectorTypes, type Db } from '../db/pool.js';
import { createLogger, type Logger } from '../logger.js';
import { ProviderRegistry } from '../providers/registry.js';
import { RateLimiter } from '../ratelimit/limiter.js';
import { CpuPool } from './cpu-pool.js';
import { MeteringTimings } from './metering-timings.js';
import { QueueRegistry } from './queues.js';
import { createRedis } from './redis.js';
import { connectTemporal, type TemporalHandle } from './temporal.js';

/**
 * The shared connections of one process: one PostgreSQL pool, one Redis commands connection,
 * one Temporal client, the BullMQ producers and a CPU pool. Built once at start, closed once at stop.
 */
export interface Platform {
  config: Config;
  logger: Logger;
  db: Db;
  redis: Redis;
  temporal: TemporalHandle;
  queues: QueueRegistry;
  cpu: CpuPool;
  limiter: RateLimiter;
  /** How long metered calls spend in each governance step (served beside the HTTP metrics). */
  meteringTimings: MeteringTimings;
  /** Busy payers' calls metered in memory against grants held in PostgreSQL (started by API processes). */
  grants: QuotaGrants;
  /** Verified keys and customers of metered calls, checked against their auth generation at reservation. */
  credentials: CredentialCache;
  /** An adapter for every configured upstream provider. */
  providers: ProviderRegistry;
  /** Signs (first key) and verifies (every key) client tokens. */
  clientTokenKeys: ClientTokenKeys;
  /** Settles once the database is reachable and its vector types are registered (retried until then). */
  ready: Promise<void>;
  close(): Promise<void>;
}

export function createPlatform(config: Config, processName: string, logger = createLogger(config, processName)): Platform {
  // First: a bad key stops the process before any connection opens.
  const clientTokenKeys = loadClientTokenKeys(config, logger);
  const db = createPool(config.DATABASE_URL, config.DATABASE_POOL_MAX, logger);
  enableMeteringGroups(db, config.METERING_GROUP_CONCURRENCY);
  const redis = createRedis(config.REDIS_URL, 'commands', logger);
  const temporal = connectTemporal(config);
  const queues = new QueueRegistry(redis, `${config.REDIS_KEY_PREFIX}:bull`);
  const cpu = new CpuPool(config.CPU_POOL_THREADS);
  const limiter = new RateLimiter(redis, config.REDIS_KEY_PREFIX, { blockMinRate: config.RATE_LIMIT_BLOCK_MIN_RATE });
  const providers = new ProviderRegistry(config.providers);
  const grants = new QuotaGrants(db, config, logger);
  const credentials = new CredentialCache(db, limiter, { ttlMs: config.CREDENTIAL_CACHE_SECONDS * 1000, maxEntries: 10_000, lazyCreatePerMinute: config.LAZY_CREATE_PER_MINUTE });

  let closing: Promise<void> | undefined;
  const ready = retryUntilClosed(() => registerVectorTypes(db), () => closing !== undefined, logger);
  const close = () => {
    closing ??= (async () => {
      // Producers first (they use Redis and PostgreSQL), then the connections they rode on.
      const results: PromiseSettledResult<unknown>[] = await Promise.allSettled([queues.close(), cpu.close(), limiter.flushUsage(), grants.close()]);
      results.push(...(await Promise.allSettled([db.end(), redis.quit(), temporal.connection.close(), temporal.probe.close()])));
      for (const result of results) {
        if (result.status === 'rejected') logger.warn({ err: result.reason }, 'a connection did not close cleanly');
      }
    })();
    return closing;
  };

  return { config, logger, db, redis, temporal, queues, cpu, limiter, meteringTimings: new MeteringTimings(), grants, credentials, clientTokenKeys, providers, ready, close };
}

/** A process may start before its database; keep trying, quietly after the first failure. */
async function retryUntilClosed(attempt: () => Promise<void>, closed: () => boolean, logger: Logger): Promise<void> {
  for (let tries = 0; !closed(); tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (tries === 0) logger.warn({ err: error }, 'database not ready; retrying every second');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}
