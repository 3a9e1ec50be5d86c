import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { createPool, registerVectorTypes, type Db } from '../db/pool.js';
import { createLogger, type Logger } from '../logger.js';
import { CpuPool } from './cpu-pool.js';
import { QueueRegistry } from './queues.js';
import { createRedis } from './redis.js';
import { connectTemporal, type TemporalHandle } from './temporal.js';

/**
 * The shared connections of one process: one PostgreSQL pool, one Redis commands connection,
 * one Temporal client, the BullMQ producers and a CPU pool. Built once at start, closed once at
 * stop. It knows no domain: each app's composition root (shared/composition/) builds its
 * services on top of it.
 */
export interface Infrastructure {
  config: Config;
  logger: Logger;
  db: Db;
  redis: Redis;
  temporal: TemporalHandle;
  queues: QueueRegistry;
  cpu: CpuPool;
  /** Settles once the database is reachable and its vector types are registered (retried until then). */
  ready: Promise<void>;
  close(): Promise<void>;
}

export function createInfrastructure(config: Config, processName: string, logger = createLogger(config, processName)): Infrastructure {
  const db = createPool(config.DATABASE_URL, config.DATABASE_POOL_MAX, logger);
  const redis = createRedis(config.REDIS_URL, 'commands', logger);
  const temporal = connectTemporal(config);
  const queues = new QueueRegistry(redis, `${config.REDIS_KEY_PREFIX}:bull`);
  const cpu = new CpuPool(config.CPU_POOL_THREADS);

  let closing: Promise<void> | undefined;
  const ready = retryUntilClosed(() => registerVectorTypes(db), () => closing !== undefined, logger);
  const close = () => {
    closing ??= (async () => {
      // Producers first (they use Redis and PostgreSQL), then the connections they rode on.
      await settleAll([queues.close(), cpu.close()], logger);
      await settleAll([db.end(), redis.quit(), temporal.connection.close(), temporal.probe.close()], logger);
    })();
    return closing;
  };

  return { config, logger, db, redis, temporal, queues, cpu, ready, close };
}

/** Waits for every promise; one that fails is logged, not thrown, so the rest still close. */
export async function settleAll(closing: Promise<unknown>[], logger: Logger): Promise<void> {
  for (const result of await Promise.allSettled(closing)) {
    if (result.status === 'rejected') logger.warn({ err: result.reason }, 'a connection did not close cleanly');
  }
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
