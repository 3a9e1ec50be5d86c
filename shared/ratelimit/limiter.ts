import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { serviceError, type ErrorCode } from '../errors.js';

const SCRIPT = readFileSync(new URL('./sliding-window.lua', import.meta.url), 'utf8');
const RECORD_USAGE = readFileSync(new URL('./record-usage.lua', import.meta.url), 'utf8');
const WINDOW_SECONDS = 60;

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
type RecordUsage = (numberOfKeys: number, ...keysAndArgs: (string | number)[]) => Promise<number>;

export class RateLimiter {
  private readonly run: SlidingWindow;
  private readonly record: RecordUsage;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {
    if (!('slidingWindow' in redis)) redis.defineCommand('slidingWindow', { lua: SCRIPT });
    if (!('recordUsage' in redis)) redis.defineCommand('recordUsage', { lua: RECORD_USAGE });
    this.run = (redis as unknown as { slidingWindow: SlidingWindow }).slidingWindow.bind(redis);
    this.record = (redis as unknown as { recordUsage: RecordUsage }).recordUsage.bind(redis);
  }

  /** Checks all layers in one atomic round trip; a refused request is counted in none. */
  async consume(layers: readonly LimitLayer[]): Promise<LimitDecision> {
    if (layers.length === 0) return { allowed: true, remaining: undefined };
    const args: (string | number)[] = layers.map((layer) => this.redisKey(layer.key));
    args.push(WINDOW_SECONDS);
    for (const layer of layers) args.push(layer.limit, layer.cost);
    const [allowed, failing, retryAfter, ...remaining] = await this.run(layers.length, ...args);
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

  /** Adds the tokens a call actually used to its token-per-minute layers, once they are known. */
  async recordUsage(keys: readonly string[], units: number): Promise<void> {
    if (units <= 0 || keys.length === 0) return;
    await this.record(keys.length, ...keys.map((key) => this.redisKey(key)), units, WINDOW_SECONDS);
  }

  private redisKey(key: string): string {
    return `${this.prefix}:rl:${key}`;
  }
}
