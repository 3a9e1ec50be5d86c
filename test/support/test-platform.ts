import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type http from 'node:http';
import type { Router } from 'express';
import { inject } from 'vitest';
import { createGatewayApp } from '../../api/app.js';
import { listen, serverUrl as httpServerUrl } from '../../shared/platform/http-server.js';
import { createApiKey, createDeveloperAccount, createProvisioningKey } from '../../shared/accounts/accounts.js';
import type { DeveloperScope } from '../../shared/accounts/scopes.js';
import { loadConfig, type Config } from '../../shared/config.js';
import { createGatewayServices, type GatewayServices } from '../../shared/composition/gateway.js';
import { TEST_DB_PREFIX, dropDatabase, serverUrl, withServer } from './databases.js';

export interface TestPlatform {
  config: Config;
  platform: GatewayServices;
  baseUrl: string;
  /** A unique suffix of this platform's database, Redis prefix and task queue. */
  tag: string;
  /** The environment this platform's config was loaded from, for a process that should join it (a worker). */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** What a test gateway serves besides the app's own routes (a probe). */
export interface TestPlatformOptions {
  routes?: (platform: GatewayServices) => Router[];
}

/**
 * A whole gateway for one test file: its own database cloned from the migrated template, its own
 * Redis key prefix and Temporal task queue, and the real app listening on an ephemeral port.
 */
export async function startTestPlatform(env: Record<string, string> = {}, options: TestPlatformOptions = {}): Promise<TestPlatform> {
  const tag = `${process.pid}_${randomBytes(4).toString('hex')}`;
  const database = `${TEST_DB_PREFIX}${tag}`;
  const base = loadConfig();
  await withServer(base.DATABASE_URL, (client) =>
    client.query(`CREATE DATABASE ${client.escapeIdentifier(database)} TEMPLATE ${client.escapeIdentifier(inject('templateDatabase'))}`),
  );
  const platformEnv = {
    DATABASE_URL: serverUrl(base.DATABASE_URL, database),
    REDIS_KEY_PREFIX: `svct:${tag}`,
    TEMPORAL_TASK_QUEUE: `svct-${tag}`,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    CPU_POOL_THREADS: '1',
    // Files (uploads, batch results) of this platform alone, never the developer's .data.
    DATA_DIR: env.DATA_DIR ?? mkdtempSync(path.join(os.tmpdir(), `svct-${tag}-`)),
    ...env,
  };
  const ownDataDir = env.DATA_DIR === undefined ? platformEnv.DATA_DIR : undefined;
  const config = loadConfig({ ...process.env, ...platformEnv });
  const platform = createGatewayServices(config, 'test');
  await platform.ready;
  const server: http.Server = await listen(createGatewayApp(platform, { routes: options.routes?.(platform) }), 0, '127.0.0.1');

  return {
    config,
    platform,
    baseUrl: httpServerUrl(server),
    tag,
    env: Object.fromEntries(Object.entries({ ...process.env, ...platformEnv }).filter((entry): entry is [string, string] => entry[1] !== undefined)),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await deleteRedisKeys(platform, `${config.REDIS_KEY_PREFIX}:*`);
      await platform.close();
      await withServer(base.DATABASE_URL, (client) => dropDatabase(client, database));
      if (ownDataDir) await rm(ownDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Another API replica of the same platform: its own process-level connections and server, the same
 * database, Redis prefix and task queue, as a second machine behind a load balancer would have.
 */
export async function startSecondInstance(first: TestPlatform, options: TestPlatformOptions = {}): Promise<{ baseUrl: string; close(): Promise<void> }> {
  const platform = createGatewayServices(first.config, 'test-replica');
  await platform.ready;
  const server = await listen(createGatewayApp(platform, { routes: options.routes?.(platform) }), 0, '127.0.0.1');
  return {
    baseUrl: httpServerUrl(server),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await platform.close();
    },
  };
}

async function deleteRedisKeys(platform: GatewayServices, pattern: string): Promise<void> {
  if (platform.redis.status !== 'ready') return; // a test may point this platform at no Redis at all
  let cursor = '0';
  do {
    const [next, keys] = await platform.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    if (keys.length) await platform.redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

export interface TestDeveloper {
  accountId: string;
  email: string;
  /** A ko_ key with the scopes asked for. */
  key: string;
}

let developerCount = 0;

/** A developer account with a wallet credit and one key, made through the same domain functions as the CLI. */
export async function createDeveloper(
  platform: GatewayServices,
  options: { scopes?: DeveloperScope[]; creditMicros?: number } = {},
): Promise<TestDeveloper> {
  const email = `dev${++developerCount}-${randomBytes(3).toString('hex')}@example.test`;
  const account = await createDeveloperAccount(platform.db, { email, password: 'correct horse battery', initialCreditMicros: options.creditMicros ?? 5_000_000 });
  const { plaintext } = await createApiKey(platform.db, account.id, { name: 'test', scopes: options.scopes ?? ['admin'] });
  return { accountId: account.id, email, key: plaintext };
}

export async function createProvisioningKeyFor(platform: GatewayServices, accountId: string): Promise<string> {
  return (await createProvisioningKey(platform.db, accountId)).plaintext;
}

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A real HTTP request to the test platform; the body is parsed when it is JSON. */
export async function call<T = any>(baseUrl: string, path: string, init: RequestInit & { json?: unknown } = {}): Promise<ApiResponse<T>> {
  const { json, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (json !== undefined) headers.set('content-type', 'application/json');
  const response = await fetch(`${baseUrl}${path}`, { ...rest, headers, ...(json !== undefined && { body: JSON.stringify(json) }) });
  const text = await response.text();
  const isJson = response.headers.get('content-type')?.includes('json');
  return { status: response.status, headers: response.headers, body: (isJson && text ? JSON.parse(text) : text) as T, text };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

/** A developer wallet's balance, straight from PostgreSQL. */
export async function walletBalanceMicros(platform: GatewayServices, accountId: string): Promise<number> {
  const { rows } = await platform.db.query<{ balance_micros: string }>('SELECT balance_micros FROM wallets WHERE account_id = $1', [accountId]);
  return Number(rows[0]!.balance_micros);
}
