import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { serviceError, type ErrorCode } from '../errors.js';

const SCRIPT = readFileSync(new URL('./sliding-window.lua', import.meta.url), 'utf8');
const WINDOW_SECONDS = 60;
/** How long tokens a call used may wait for the next check to carry them before going alone. */
const USAGE_FLUSH_MS = 5;

/**
 * One layer of a request's rate limits: a counter shared by every API replica through Redis.
 * `cost` is what the request adds (1 for a request-per-minute layer). A token-per-minute layer
 * is checked with cost 0 (refused only once full) and charged the tokens used after the call.
 */
export interface LimitLayer {
  /** Unique per subject, e.g. `developer:<id>:rpm`; the limiter adds the platform prefix. */
  key: string;
  limit: number;
  cost: number;
  /** The code a refusal carries, e.g. customer_rate_limit_exceeded. */
  code: ErrorCode;
  /** Whether this layer counts requests (it then feeds X-RateLimit-Remaining). */
  countsRequests: boolean;
}

export type LimitDecision =
  | { allowed: true; remaining: number | undefined }
  | { allowed: false; layer: LimitLayer; retryAfterSeconds: number };

type SlidingWindow = (numberOfKeys: number, ...keysAndArgs: (string | number)[]) => Promise<number[]>;

export class RateLimiter {
  private readonly run: SlidingWindow;
  /** Tokens calls used that Redis has not counted yet, by Redis key (see recordUsage). */
  private pendingUsage = new Map<string, number>();
  private usageTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {
    if (!('slidingWindow' in redis)) redis.defineCommand('slidingWindow', { lua: SCRIPT });
    this.run = (redis as unknown as { slidingWindow: SlidingWindow }).slidingWindow.bind(redis);
  }

  /**
   * Checks all layers in one atomic round trip; a refused request is counted in none. Tokens
   * recorded since the last round trip are counted first, in the same script.
   */
  async consume(layers: readonly LimitLayer[]): Promise<LimitDecision> {
    if (layers.length === 0) return { allowed: true, remaining: undefined };
    const [allowed, failing, retryAfter, ...remaining] = await this.roundTrip(layers);
    if (allowed !== 1) return { allowed: false, layer: layers[failing! - 1]!, retryAfterSeconds: retryAfter! };
    const requestRemaining = layers.flatMap((layer, i) => (layer.countsRequests ? [Math.max(0, remaining[i]!)] : []));
    return { allowed: true, remaining: requestRemaining.length ? Math.min(...requestRemaining) : undefined };
  }

  /** Like consume, but a refusal throws the layer's 429 with Retry-After. */
  async enforce(layers: readonly LimitLayer[]): Promise<number | undefined> {
    const decision = await this.consume(layers);
    if (!decision.allowed) throw serviceError(decision.layer.code, { retryAfterSeconds: decision.retryAfterSeconds });
    return decision.remaining;
  }

  /**
   * Adds the tokens a call actually used to its token-per-minute layers, once they are known. The
   * count leaves with this process's next check (which therefore already sees it), or on its own
   * after USAGE_FLUSH_MS when no check comes: under load that saves every call a Redis round
   * trip, which on this kind of machine costs about as much CPU as the script itself.
   */
  recordUsage(keys: readonly string[], units: number): void {
    if (units <= 0 || keys.length === 0) return;
    for (const key of keys) {
      const redisKey = this.redisKey(key);
      this.pendingUsage.set(redisKey, (this.pendingUsage.get(redisKey) ?? 0) + units);
    }
    // A failed flush is not lost: roundTrip keeps its counts for the next check.
    this.usageTimer ??= setTimeout(() => void this.flushUsage().catch(() => undefined), USAGE_FLUSH_MS);
  }

  /** Sends the tokens recorded but not yet counted (also called before the process closes Redis). */
  async flushUsage(): Promise<void> {
    if (this.pendingUsage.size > 0) await this.roundTrip([]);
  }

  /**
   * One script run: the pending usage first, then the layers. Usage that fails to go is kept for
   * the next check or the next call's timer, not retried on a timer of its own while Redis is down.
   */
  private async roundTrip(layers: readonly LimitLayer[]): Promise<number[]> {
    clearTimeout(this.usageTimer);
    this.usageTimer = undefined;
    // Usage is taken only when there is some: a Map a round trip was needless garbage.
    const usage = this.pendingUsage;
    const tookUsage = usage.size > 0;
    if (tookUsage) this.pendingUsage = new Map();
    // The script's KEYS (the layers', then the pending usage's), then ARGV: the window, how many
    // layers, each layer's limit and cost, each usage count.
    const keysAndArgs: (string | number)[] = [];
    for (const layer of layers) keysAndArgs.push(this.redisKey(layer.key));
    for (const key of usage.keys()) keysAndArgs.push(key);
    const keyCount = keysAndArgs.length;
    keysAndArgs.push(WINDOW_SECONDS, layers.length);
    for (const layer of layers) keysAndArgs.push(layer.limit, layer.cost);
    for (const units of usage.values()) keysAndArgs.push(units);
    try {
      return await this.run(keyCount, ...keysAndArgs);
    } catch (error) {
      // Without usage taken, `usage` is the live map, which another round trip may have taken since.
      if (tookUsage) for (const [key, units] of usage) this.pendingUsage.set(key, (this.pendingUsage.get(key) ?? 0) + units);
      throw error;
    }
  }

  private redisKey(key: string): string {
    return `${this.prefix}:rl:${key}`;
  }
}
