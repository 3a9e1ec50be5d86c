import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RateLimiter, type LimitLayer } from '../shared/ratelimit/limiter.js';
import {
  bearer,
  call,
  createDeveloper,
  createProvisioningKeyFor,
  startSecondInstance,
  startTestPlatform,
  type TestPlatform,
} from './support/test-platform.js';

function expect429(response: { status: number; headers: Headers; body: any }, code: string): void {
  expect(response.status).toBe(429);
  expect(response.body.error).toMatchObject({ type: 'rate_limit_error', code });
  const retryAfter = response.headers.get('retry-after');
  expect(retryAfter).toMatch(/^[1-9]\d*$/);
  expect(response.body.error.retry_after_seconds).toBe(Number(retryAfter));
  expect(Number(retryAfter)).toBeLessThanOrEqual(60);
}

describe('developer rpm across two API instances sharing Redis', () => {
  let gateway: TestPlatform;
  let replica: Awaited<ReturnType<typeof startSecondInstance>>;
  beforeAll(async () => {
    gateway = await startTestPlatform({ DEVELOPER_RPM_LIMIT: '60', DATABASE_POOL_MAX: '20' });
    replica = await startSecondInstance(gateway);
  });
  afterAll(async () => {
    await replica?.close();
    await gateway?.close();
  });

  it('lets exactly 60 of 1,000 concurrent requests through, and refuses the rest with Retry-After', async () => {
    const developer = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    const responses = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => call(i % 2 ? replica.baseUrl : gateway.baseUrl, '/v1/balance', { headers: bearer(developer.key) })),
    );
    const passed = responses.filter((response) => response.status === 200);
    const refused = responses.filter((response) => response.status === 429);
    expect(passed).toHaveLength(60);
    expect(refused).toHaveLength(940);
    for (const response of refused) expect429(response, 'developer_rate_limit_exceeded');
    // Both replicas served some of the 60: the counter is shared, not per process.
    const remaining = passed.map((response) => Number(response.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => i));
    expect(responses.every((response) => !response.headers.has('x-ratelimit-limit') && !response.headers.has('x-ratelimit-reset'))).toBe(true);
  });

  it("keeps one developer's limit away from another's", async () => {
    const other = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    const response = await call(gateway.baseUrl, '/v1/balance', { headers: bearer(other.key) });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-ratelimit-remaining')).toBe('59');
  });
});

describe('edge and provisioning layers', () => {
  let gateway: TestPlatform;
  beforeAll(async () => {
    gateway = await startTestPlatform({ EDGE_RPM_LIMIT: '5', PROVISIONING_RPM_LIMIT: '3' });
  });
  afterAll(() => gateway?.close());

  it('429 edge_rate_limit_exceeded once one address and key pass the edge ceiling (the lowest ceiling wins)', async () => {
    const developer = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await call(gateway.baseUrl, '/v1/balance', { headers: bearer(developer.key) })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect429(await call(gateway.baseUrl, '/v1/balance', { headers: bearer(developer.key) }), 'edge_rate_limit_exceeded');
    // The refused request was counted in no layer: the developer layer still has its room.
    const { rows } = await gateway.platform.db.query('SELECT 1');
    expect(rows).toHaveLength(1);
    const developerWindow = await gateway.platform.redis.hgetall(`${gateway.config.REDIS_KEY_PREFIX}:rl:developer:${developer.accountId}:rpm`);
    const buckets = Object.entries(developerWindow).filter(([field]) => /^\d+$/.test(field));
    expect(buckets.reduce((sum, [, count]) => sum + Number(count), 0)).toBe(5);
    expect(Number(developerWindow.sum)).toBe(5);
  });

  it('429 rate_limited past the per-minute calls of one rsk_ key', async () => {
    const developer = await createDeveloper(gateway.platform);
    const key = await createProvisioningKeyFor(gateway.platform, developer.accountId);
    for (let i = 0; i < 3; i++) expect((await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(key) })).status).toBe(200);
    expect429(await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(key) }), 'rate_limited');
  });
});

/** A layer of the limiter's own tests: a request layer with cost 1, a token layer with cost 0 and countsRequests false. */
const layer = (key: string, limit: number, cost: number, countsRequests = true): LimitLayer => ({
  key,
  limit,
  cost,
  code: 'customer_rate_limit_exceeded',
  countsRequests,
});

describe('the sliding-window limiter', () => {
  let gateway: TestPlatform;
  beforeAll(async () => {
    gateway = await startTestPlatform();
  });
  afterAll(() => gateway?.close());

  it('checks a token layer with cost 0 and charges the tokens used afterwards', async () => {
    const { limiter } = gateway.platform;
    const tokens = layer('t:tpm', 1000, 0, false);
    expect(await limiter.consume([tokens])).toMatchObject({ allowed: true });
    limiter.recordUsage(['t:tpm'], 999);
    expect(await limiter.consume([tokens])).toMatchObject({ allowed: true });
    limiter.recordUsage(['t:tpm'], 5);
    const refused = await limiter.consume([tokens]);
    expect(refused).toMatchObject({ allowed: false, layer: { key: 't:tpm' } });
    if (!refused.allowed) expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  });

  it('sends recorded tokens on their own when no check follows, so another replica sees them', async () => {
    const { limiter, redis, config } = gateway.platform;
    const replica = new RateLimiter(redis, config.REDIS_KEY_PREFIX);
    const tokens = layer('idle:tpm', 50, 0, false);
    expect(await replica.consume([tokens])).toMatchObject({ allowed: true });
    limiter.recordUsage(['idle:tpm'], 50);
    await vi.waitFor(async () => expect(await replica.consume([tokens])).toMatchObject({ allowed: false, layer: { key: 'idle:tpm' } }));
  });

  it('counts recorded tokens once when a round trip that carried none fails while another carries them', async () => {
    const { redis, config } = gateway.platform;
    const limiter = new RateLimiter(redis, config.REDIS_KEY_PREFIX);
    const tokens = layer('once:tpm', 100, 0, false);
    // A cost the script cannot read makes this one round trip fail in Redis, and only it.
    const failing = limiter.consume([layer('once:broken', 10, 'x' as unknown as number)]);
    limiter.recordUsage(['once:tpm'], 60);
    const carrying = limiter.consume([tokens]);
    await expect(failing).rejects.toThrow();
    expect(await carrying).toMatchObject({ allowed: true });
    await limiter.flushUsage();
    // 60 of 100 counted: room left. Counted twice (120) the layer would be full.
    expect(await limiter.consume([tokens])).toMatchObject({ allowed: true });
  });

  /** A layer's hash as an earlier writer left it: units by bucket age in seconds, and any other fields (`from` as an age too). */
  async function writeWindow(key: string, buckets: Record<number, number>, fields: Record<string, number> = {}) {
    const { redis, config } = gateway.platform;
    const [now] = (await redis.time()).map(Number);
    const redisKey = `${config.REDIS_KEY_PREFIX}:rl:${key}`;
    const entries = Object.entries(buckets).map(([ago, units]) => [String(now! - Number(ago)), String(units)]);
    const extra = Object.entries(fields).map(([name, value]) => [name, String(name === 'from' ? now! - value : value)]);
    await redis.hset(redisKey, Object.fromEntries([...entries, ...extra]));
    await redis.expire(redisKey, 61);
    return { now: now!, read: () => redis.hgetall(redisKey) };
  }

  it('drops the buckets that left the window from the total it keeps', async () => {
    const window = await writeWindow('slide:rpm', { 70: 4, 30: 2 }, { sum: 6, from: 70 });
    expect(await gateway.platform.limiter.consume([layer('slide:rpm', 10, 1)])).toEqual({ allowed: true, remaining: 7 });
    const kept = await window.read();
    expect(kept[String(window.now - 70)]).toBeUndefined();
    expect(Number(kept.sum)).toBe(3);
  });

  it('totals once a hash written before hashes kept their total', async () => {
    const window = await writeWindow('legacy:rpm', { 70: 4, 30: 2 });
    expect(await gateway.platform.limiter.consume([layer('legacy:rpm', 10, 1)])).toEqual({ allowed: true, remaining: 7 });
    expect(Number((await window.read()).sum)).toBe(3);
  });

  it('refuses until the oldest buckets in the window leave it', async () => {
    await writeWindow('full:rpm', { 50: 2, 10: 1 }, { sum: 3, from: 50 });
    const refused = await gateway.platform.limiter.consume([layer('full:rpm', 3, 1)]);
    expect(refused).toMatchObject({ allowed: false, layer: { key: 'full:rpm' } });
    // The bucket 50 s old leaves a 60 s window in 10 s (9 if Redis's clock ticked meanwhile).
    if (!refused.allowed) expect([9, 10]).toContain(refused.retryAfterSeconds);
  });

  it('counts nothing in any layer when one layer refuses', async () => {
    const { limiter } = gateway.platform;
    const roomy = layer('a:rpm', 100, 1);
    const full = layer('b:rpm', 1, 1);
    expect(await limiter.consume([roomy, full])).toEqual({ allowed: true, remaining: 0 });
    expect(await limiter.consume([roomy, full])).toMatchObject({ allowed: false, layer: { key: 'b:rpm' } });
    expect(await limiter.consume([roomy])).toEqual({ allowed: true, remaining: 98 });
  });
});

describe('blocks of requests for a busy caller', () => {
  let gateway: TestPlatform;
  beforeAll(async () => {
    gateway = await startTestPlatform();
  });
  afterAll(() => gateway?.close());

  const requests = (key: string, limit: number) => layer(key, limit, 1);
  const tokens = (key: string, limit: number) => layer(key, limit, 0, false);
  const limiterWithBlocks = () => new RateLimiter(gateway.platform.redis, gateway.platform.config.REDIS_KEY_PREFIX, { blockMinRate: 50 });
  const counted = async (key: string) => Number(await gateway.platform.redis.hget(`${gateway.platform.config.REDIS_KEY_PREFIX}:rl:${key}`, 'sum'));

  /** `waves` rounds of `perWave` concurrent checks, 10 ms apart: a caller at about perWave x 100 calls a second. */
  async function paced(limiter: RateLimiter, layers: LimitLayer[], waves: number, perWave: number) {
    const decisions = [];
    for (let wave = 0; wave < waves; wave++) {
      decisions.push(...(await Promise.all(Array.from({ length: perWave }, () => limiter.consume(layers)))));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return decisions;
  }

  it('checks a busy caller in far fewer round trips, never counts past its limit, and refuses exactly once full', async () => {
    const limiter = limiterWithBlocks();
    const decisions = await paced(limiter, [requests('block:rpm', 2000)], 120, 20);
    const passed = decisions.filter((decision) => decision.allowed);
    // Near the limit blocks shrink to single calls, so the window fills exactly.
    expect(await counted('block:rpm')).toBe(2000);
    // Every block is served within its 200 ms at this pace; a stall of the test process longer
    // than that could let one lapse, leaving that block's rest counted but unserved.
    expect(passed.length).toBeLessThanOrEqual(2000);
    expect(passed.length).toBeGreaterThan(1900);
    expect(decisions.slice(passed.length).every((decision) => !decision.allowed)).toBe(true);
    // Call by call that would have been 2,400 round trips.
    expect(limiter.roundTrips).toBeLessThan(1000);
    // X-RateLimit-Remaining counts down through each block: every value once, down to 0.
    const remaining = passed.map((decision) => (decision.allowed ? decision.remaining! : -1));
    expect(new Set(remaining).size).toBe(passed.length);
    expect(Math.min(...remaining)).toBe(0);
  });

  it('counts at most one block more than a caller used once it stops', async () => {
    const limiter = limiterWithBlocks();
    const decisions = await paced(limiter, [requests('idle:rpm', 1_000_000)], 30, 20);
    expect(decisions.every((decision) => decision.allowed)).toBe(true);
    const extra = (await counted('idle:rpm')) - decisions.length;
    expect(extra).toBeGreaterThanOrEqual(0);
    // A block holds about 50 ms of the caller's 2,000 calls a second.
    expect(extra).toBeLessThanOrEqual(200);
  });

  it('stops serving a block once the tokens this process recorded fill a token layer', async () => {
    const limiter = limiterWithBlocks();
    const layers = [requests('tb:rpm', 1_000_000), tokens('tb:tpm', 5_000)];
    const before = await paced(limiter, layers, 20, 10);
    expect(before.every((decision) => decision.allowed)).toBe(true);
    const tripsBefore = limiter.roundTrips;
    limiter.recordUsage(['tb:tpm'], 5_000);
    expect(await limiter.consume(layers)).toMatchObject({ allowed: false, layer: { key: 'tb:tpm' } });
    expect(limiter.roundTrips).toBe(tripsBefore + 1);
  });

  it('is off with blockMinRate 0: one round trip a call', async () => {
    const limiter = new RateLimiter(gateway.platform.redis, gateway.platform.config.REDIS_KEY_PREFIX, { blockMinRate: 0 });
    await paced(limiter, [requests('off:rpm', 1_000_000)], 10, 20);
    expect(limiter.roundTrips).toBe(200);
    expect(await counted('off:rpm')).toBe(200);
  });
});
