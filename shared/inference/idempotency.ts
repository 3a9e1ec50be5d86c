import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { contentHash } from '../content-hash.js';
import { serviceError } from '../errors.js';

/**
 * Idempotent calls (spec 1: header `idempotency-key`, 24-hour replay, scope developer + customer +
 * key). The first request claims the key atomically; a retry gets the original result, a
 * concurrent duplicate waits for the first to finish, and the same key with another body is a 409.
 * A call that fails gives its key back, so retrying it really retries.
 */
const REPLAY_WINDOW_SECONDS = 24 * 3600;
const WAIT_STEP_MS = 50;
const WAIT_LIMIT_MS = 130_000;

export interface StoredResult {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

type Entry = { state: 'pending'; bodyHash: string } | { state: 'done'; bodyHash: string; result: StoredResult };

export interface IdempotencyScope {
  developerId: string;
  customerId: string | null;
  key: string;
}

export class IdempotencyStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** Claims the key for this request, or returns the original result when it already has one. */
  async begin(scope: IdempotencyScope, body: unknown): Promise<{ replay: StoredResult } | { claimed: true }> {
    const redisKey = this.redisKey(scope);
    const bodyHash = contentHash(body);
    const deadline = Date.now() + WAIT_LIMIT_MS;
    for (;;) {
      const claimed = await this.redis.set(redisKey, JSON.stringify({ state: 'pending', bodyHash } satisfies Entry), 'EX', REPLAY_WINDOW_SECONDS, 'NX');
      if (claimed === 'OK') return { claimed: true };
      const raw = await this.redis.get(redisKey);
      if (raw === null) continue; // the first request failed and gave the key back: claim it now
      const entry = JSON.parse(raw) as Entry;
      if (entry.bodyHash !== bodyHash) throw serviceError('idempotency_key_reuse', { param: 'idempotency-key' });
      if (entry.state === 'done') return { replay: entry.result };
      if (Date.now() > deadline) throw serviceError('idempotency_key_in_progress', { param: 'idempotency-key' });
      await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
    }
  }

  /** Stores the result for replay, within the 24 hours counted from the first request. */
  async complete(scope: IdempotencyScope, body: unknown, result: StoredResult): Promise<void> {
    await this.redis.set(this.redisKey(scope), JSON.stringify({ state: 'done', bodyHash: contentHash(body), result } satisfies Entry), 'KEEPTTL', 'XX');
  }

  /** Gives the key back after a failed call. */
  async abandon(scope: IdempotencyScope): Promise<void> {
    await this.redis.del(this.redisKey(scope));
  }

  /**
   * Runs `work` once per key: a retry with the same body gets the first result (replayed true), a
   * different body is 409 idempotency_key_reuse, and a failure gives the key back.
   */
  async run<T>(scope: IdempotencyScope, body: unknown, work: () => Promise<T>): Promise<{ result: T; replayed: boolean }> {
    const begun = await this.begin(scope, body);
    if ('replay' in begun) return { result: begun.replay.body as T, replayed: true };
    try {
      const result = await work();
      await this.complete(scope, body, { status: 200, headers: {}, body: result });
      return { result, replayed: false };
    } catch (error) {
      await this.abandon(scope).catch(() => undefined);
      throw error;
    }
  }

  private redisKey(scope: IdempotencyScope): string {
    const key = createHash('sha256').update(scope.key).digest('hex');
    return `${this.prefix}:idem:${scope.developerId}:${scope.customerId ?? '-'}:${key}`;
  }
}
