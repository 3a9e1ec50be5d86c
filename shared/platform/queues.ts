import { Queue, Worker, type Job, type Processor, type WorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { CONNECTION_ERRNOS } from '../db/errors.js';
import { awayDependency } from './dependency-errors.js';

/**
 * BullMQ queues of the platform. Producers (API and workers) share one commands connection;
 * every queue lives under `<REDIS_KEY_PREFIX>:bull`, so platforms and test files never see each other's jobs.
 */
export class QueueRegistry {
  private readonly queues = new Map<string, Queue>();

  constructor(
    private readonly connection: Redis,
    readonly prefix: string,
  ) {}

  queue<Data = unknown>(name: string): Queue<Data> {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
      this.queues.set(name, queue);
    }
    return queue as unknown as Queue<Data>;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((queue) => queue.close()));
    this.queues.clear();
  }
}

export interface ConsumerDefinition<Data = unknown> {
  queue: string;
  process: Processor<Data>;
  options?: Omit<WorkerOptions, 'connection' | 'prefix'>;
}

/**
 * Starts one BullMQ worker per definition on a shared blocking connection; failures are logged,
 * never swallowed. Losing Redis is said once for all of them, not by every consumer at every
 * reconnect attempt (a hundred lines a second), and again after it came back and went.
 */
export function startConsumers(definitions: ConsumerDefinition[], connection: Redis, prefix: string, logger: Logger): Worker[] {
  let redisLossReported = false;
  connection.on('ready', () => {
    redisLossReported = false;
  });
  return definitions.map((definition) => {
    const worker = new Worker(definition.queue, definition.process, { ...definition.options, connection, prefix });
    worker.on('failed', (job: Job | undefined, error: Error) =>
      logger.error({ err: error, queue: definition.queue, jobId: job?.id, attempts: job?.attemptsMade }, 'queued job failed'),
    );
    worker.on('error', (error) => {
      if (!isConnectionError(error)) return logger.error({ err: error, queue: definition.queue }, 'queue consumer error');
      if (redisLossReported) return;
      redisLossReported = true;
      logger.warn({ err: error }, 'queue consumers lost Redis; they resume when it answers again');
    });
    return worker;
  });
}

function isConnectionError(error: Error): boolean {
  return CONNECTION_ERRNOS.has((error as Error & { code?: string }).code ?? '') || awayDependency(error) === 'Redis';
}
