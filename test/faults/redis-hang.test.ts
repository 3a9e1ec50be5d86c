import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { awayDependency } from '../../shared/platform/dependency-errors.js';
import { createRedis } from '../../shared/platform/redis.js';
import { freePort } from '../../scripts/lib/local-services.js';
import { pollUntil } from '../support/poll.js';
import { OwnRedis } from './services.js';

/**
 * A Redis that hangs with its connections open (paused with SIGSTOP here; a wedged server or a
 * partition dropping packets alike) must not hold a request: the commands connection's watchdog
 * fails the waiting commands as Redis being away (503 to a caller), and the connection serves
 * again once Redis answers. Without it the command below would wait for TCP, minutes.
 */
let redis: OwnRedis;
let client: Redis;
let dir: string;
const warnings: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'svc-redis-hang-'));
  redis = new OwnRedis(await freePort(), path.join(dir, 'redis.log'));
  await redis.start();
  const logger = { warn: (_details: object, message: string) => warnings.push(message), info: () => undefined, debug: () => undefined, error: () => undefined };
  client = createRedis(redis.url, 'commands', logger as never);
  await pollUntil(() => Promise.resolve(client.status), (status) => status === 'ready');
});

afterAll(async () => {
  redis.signal('SIGCONT');
  client?.disconnect();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('fails a command waiting on a paused Redis as Redis being away, and serves again once it answers', async () => {
  await client.set('hang-test', 'before');
  redis.signal('SIGSTOP');
  const waiting = await client.get('hang-test').then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(waiting).toBeInstanceOf(Error);
  expect(awayDependency(waiting)).toBe('Redis');
  expect(warnings).toContain('Redis stopped answering; failing the commands waiting on it and reconnecting');
  // While it is still paused, a new command is refused at once rather than queued.
  expect(awayDependency(await client.get('hang-test').catch((error: unknown) => error))).toBe('Redis');

  redis.signal('SIGCONT');
  const value = await pollUntil(() => client.get('hang-test').catch(() => undefined), (answer) => answer === 'before', { timeoutMs: 30_000 });
  expect(value).toBe('before');
});
