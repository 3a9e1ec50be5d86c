import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { serviceError, type ErrorCode } from '../errors.js';

const SCRIPT = readFileSync(new URL('./sliding-window.lua', import.meta.url), 'utf8');
const WINDOW_SECONDS = 60;
/** How long tokens a call used may wait for the next check to carry them before going alone. */
const USAGE_FLUSH_MS = 20;

/**
 * Blocks of requests (see consume). A block holds about this many milliseconds of its layer set's
 * recent calls, serves for at most BLOCK_LIFETIME_MS, and takes at most BLOCK_ROOM_SHARE of the
 * room left in each of its layers, so a caller near a limit goes call by call and refusals stay
 * exact. What a block did not serve lapses: it stays counted, so an idle-going caller is counted
 * up to one block more than it used (the round trip that would give it back costs what a block saves).
 */
const BLOCK_HORIZON_MS = 50;
const BLOCK_LIFETIME_MS = 200;
const BLOCK_ROOM_SHARE = 1 / 20;
/** How often a layer set's arrival rate is sampled, and after how long idle its state is dropped. */
const RATE_PERIOD_MS = 100;
const IDLE_STATE_MS = 10_000;

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

export interface RateLimiterOptions {
  /** Calls a second of one layer set from which it is checked a block at a time (0 = never). */
  blockMinRate: number;
}

/** What one process knows of one set of layers (one caller): its arrival rate and its block. */
interface LayerSetState {
  periodStartedAt: number;
  arrivals: number;
  /** Calls a second over the last complete sampling period. */
  rate: number;
  lastArrivalAt: number;
  /** Requests of the current block not yet served, until blockEndsAt. */
  blockLeft: number;
  blockEndsAt: number;
  /** X-RateLimit-Remaining once the whole block is served. */
  remainingAfterBlock: number | undefined;
  /** Room in the tightest request-counting layer at the last round trip (after it); 0 = unknown. */
  requestRoom: number;
  /** Redis keys of the set's token layers: a block serves only while each has room (tokenRoom). */
  tokenKeys: string[];
  /** The block round trip under way; calls that find the block empty wait for it. */
  blockInFlight: Promise<unknown> | undefined;
}

export class RateLimiter {
  private readonly run: SlidingWindow;
  /** Tokens calls used that Redis has not counted yet, by Redis key (see recordUsage). */
  private pendingUsage = new Map<string, number>();
  private usageTimer: NodeJS.Timeout | undefined;
  private readonly layerSets = new Map<string, LayerSetState>();
  /**
   * Room left in each token layer by Redis key: as the last round trip read it, less the tokens
   * this process recorded since. Another replica's tokens show at the next round trip.
   */
  private readonly tokenRoom = new Map<string, number>();
  private scriptRuns = 0;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly options: RateLimiterOptions = { blockMinRate: 0 },
  ) {
    if (!('slidingWindow' in redis)) redis.defineCommand('slidingWindow', { lua: SCRIPT });
    this.run = (redis as unknown as { slidingWindow: SlidingWindow }).slidingWindow.bind(redis);
  }

  /**
   * Checks all layers in one atomic round trip; a refused request is counted in none. Tokens
   * recorded since the last round trip are counted first, in the same script.
   *
   * A busy caller far from its limits is checked a block at a time: once one set of layers comes
   * this often (options.blockMinRate), a round trip counts a block of requests in every layer at
   * once, the next calls of the set are served from it in this process's memory, and the calls
   * that arrive while that round trip is under way wait for it. Like the quota grants of wallets,
   * a block is requests already counted in Redis, so no limit is exceeded however many replicas
   * hold blocks of the same layers.
   */
  async consume(layers: readonly LimitLayer[]): Promise<LimitDecision> {
    if (layers.length === 0) return { allowed: true, remaining: undefined };
    if (this.options.blockMinRate <= 0) return this.check(layers, 1);
    const state = this.arrive(layers);
    for (;;) {
      if (state.blockLeft > 0 && this.blockServes(state)) {
        state.blockLeft -= 1;
        return { allowed: true, remaining: remainingBefore(state.remainingAfterBlock, state.blockLeft) };
      }
      if (!state.blockInFlight) break;
      await state.blockInFlight.catch(() => undefined);
    }
    const size = this.blockSize(state);
    if (size <= 1) return this.check(layers, 1, state);
    const taking = this.check(layers, size, state);
    state.blockInFlight = taking;
    try {
      const decision = await taking;
      // A full token layer refuses one call as it refuses a block.
      if (decision.allowed || decision.layer.cost === 0) return decision;
    } finally {
      state.blockInFlight = undefined;
    }
    // Another replica took the room the block needed: this call alone may still fit.
    return this.check(layers, 1, state);
  }

  /** Script runs so far, checks and usage flushes alike. */
  get roundTrips(): number {
    return this.scriptRuns;
  }

  /** Like consume, but a refusal throws the layer's 429 with Retry-After. */
  async enforce(layers: readonly LimitLayer[]): Promise<number | undefined> {
    const decision = await this.consume(layers);
    if (!decision.allowed) throw serviceError(decision.layer.code, { retryAfterSeconds: decision.retryAfterSeconds });
    return decision.remaining;
  }

  /**
   * One round trip counting `size` requests in every request layer. With size > 1 it opens a block
   * whose first request is this call's.
   */
  private async check(layers: readonly LimitLayer[], size: number, state?: LayerSetState): Promise<LimitDecision> {
    const [allowed, failing, retryAfter, ...remaining] = await this.roundTrip(layers, size);
    if (allowed !== 1) {
      if (state) state.requestRoom = 0;
      return { allowed: false, layer: layers[failing! - 1]!, retryAfterSeconds: retryAfter! };
    }
    let requestRemaining: number | undefined;
    let room = Number.POSITIVE_INFINITY;
    layers.forEach((layer, i) => {
      const left = remaining[i]!;
      if (layer.countsRequests) requestRemaining = Math.min(requestRemaining ?? Number.POSITIVE_INFINITY, Math.max(0, left));
      if (layer.cost > 0) room = Math.min(room, left);
      // Only blocks read it, so only a limiter with blocks keeps it.
      else if (state) this.tokenRoom.set(this.redisKey(layer.key), left);
    });
    if (state) {
      state.requestRoom = Number.isFinite(room) ? room : 0;
      // A call checked alone leaves a block another round trip opened meanwhile as it is.
      if (size > 1) {
        state.blockLeft = size - 1;
        state.blockEndsAt = performance.now() + BLOCK_LIFETIME_MS;
        state.remainingAfterBlock = requestRemaining;
      }
    }
    return { allowed: true, remaining: remainingBefore(requestRemaining, size - 1) };
  }

  /** Counts one call of this layer set towards its arrival rate; returns the set's state. */
  private arrive(layers: readonly LimitLayer[]): LayerSetState {
    const now = performance.now();
    let signature = '';
    for (const layer of layers) signature += `${layer.key}\n${layer.limit}\n${layer.cost}\n`;
    let state = this.layerSets.get(signature);
    if (!state) {
      if (this.layerSets.size >= 1_000) this.forgetIdle(now);
      state = {
        periodStartedAt: now,
        arrivals: 0,
        rate: 0,
        lastArrivalAt: now,
        blockLeft: 0,
        blockEndsAt: 0,
        remainingAfterBlock: undefined,
        requestRoom: 0,
        tokenKeys: layers.filter((layer) => layer.cost === 0).map((layer) => this.redisKey(layer.key)),
        blockInFlight: undefined,
      };
      this.layerSets.set(signature, state);
    }
    state.arrivals += 1;
    state.lastArrivalAt = now;
    const elapsed = now - state.periodStartedAt;
    if (elapsed >= RATE_PERIOD_MS) {
      state.rate = (state.arrivals * 1000) / elapsed;
      state.arrivals = 0;
      state.periodStartedAt = now;
    }
    return state;
  }

  /** A block serves until it lapses, and only while each of its token layers has room. */
  private blockServes(state: LayerSetState): boolean {
    if (performance.now() >= state.blockEndsAt) {
      state.blockLeft = 0;
      return false;
    }
    for (const key of state.tokenKeys) if ((this.tokenRoom.get(key) ?? 0) <= 0) return false;
    return true;
  }

  /** Requests the next round trip of this set counts: 1 unless the set is busy and far from its limits. */
  private blockSize(state: LayerSetState): number {
    if (state.rate < this.options.blockMinRate) return 1;
    const wanted = Math.ceil((state.rate * BLOCK_HORIZON_MS) / 1000);
    return Math.max(1, Math.min(wanted, Math.floor(state.requestRoom * BLOCK_ROOM_SHARE)));
  }

  private forgetIdle(now: number): void {
    for (const [signature, state] of this.layerSets) if (now - state.lastArrivalAt > IDLE_STATE_MS && !state.blockInFlight) this.layerSets.delete(signature);
    if (this.tokenRoom.size > 10_000) this.tokenRoom.clear();
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
      const room = this.tokenRoom.get(redisKey);
      if (room !== undefined) this.tokenRoom.set(redisKey, room - units);
    }
    // A failed flush is not lost: roundTrip keeps its counts for the next check.
    this.usageTimer ??= setTimeout(() => void this.flushUsage().catch(() => undefined), USAGE_FLUSH_MS);
  }

  /** Sends the tokens recorded but not yet counted (also called before the process closes Redis). */
  async flushUsage(): Promise<void> {
    if (this.pendingUsage.size > 0) await this.roundTrip([], 1);
  }

  /**
   * One script run: the pending usage first, then the layers. Usage that fails to go is kept for
   * the next check or the next call's timer, not retried on a timer of its own while Redis is down.
   */
  private async roundTrip(layers: readonly LimitLayer[], size: number): Promise<number[]> {
    this.scriptRuns += 1;
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
    for (const layer of layers) keysAndArgs.push(layer.limit, size === 1 ? layer.cost : layer.cost * size);
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

/**
 * X-RateLimit-Remaining for a call served while `blockLeft` requests of its block are still unserved:
 * what remains once the block is all served, plus those.
 */
function remainingBefore(remainingAfterBlock: number | undefined, blockLeft: number): number | undefined {
  return remainingAfterBlock === undefined ? undefined : remainingAfterBlock + blockLeft;
}
