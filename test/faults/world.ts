import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, createWriteStream, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createApiKey, createDeveloperAccount } from '../../shared/accounts/accounts.js';
import { createPool, type Db } from '../../shared/db/pool.js';
import { createFullEmulator } from '../../shared/emulator/emulator.js';
import { emulatorProviderEnv } from '../../shared/emulator/provider-env.js';
import { listen, serverUrl } from '../../shared/platform/http-server.js';
import { freePort } from '../../scripts/lib/local-services.js';
import { OwnPostgres, OwnRedis, OwnTemporal } from './services.js';

/**
 * The fault suite's world: its own PostgreSQL, Redis and Temporal dev server (test/faults/services.ts),
 * the upstream emulator in this process, and the platform as a user runs it: `scripts/platform.ts
 * start` (the start command npm start runs after ensure-deps), which supervises the worker, the API,
 * the hive and the relay. The suite stops and starts the services and kills the start command's
 * children; the start command's supervisor brings a killed child back.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const KEPT_LINES = 400;
const TASK_QUEUE = 'svc-faults';

export interface Developer {
  accountId: string;
  key: string;
}

export interface FaultWorld {
  postgres: OwnPostgres;
  redis: OwnRedis;
  temporal: OwnTemporal;
  taskQueue: string;
  gatewayUrl: string;
  hiveUrl: string;
  /** A pool on the platform's database, for counting rows; it reconnects after PostgreSQL's return. */
  db: Db;
  /** A developer with an admin key and a funded wallet. */
  newDeveloper(creditMicros?: number): Promise<Developer>;
  /** The process id of a child of the start command: 'workers/main.ts' or 'api/main.ts'. */
  childPid(script: string): number | undefined;
  /** The start command's last output lines, for a failing assertion's message. */
  output(): string[];
  close(): Promise<void>;
}

export async function startFaultWorld(env: Record<string, string> = {}): Promise<FaultWorld> {
  const base = path.join(ROOT, '.data', 'faults', `${process.pid}`);
  rmSync(base, { recursive: true, force: true });
  mkdirSync(path.join(base, 'data'), { recursive: true });
  const [pgPort, redisPort, temporalPort, apiPort, hivePort, relayPort] = await Promise.all(Array.from({ length: 6 }, () => freePort()));

  const postgres = await OwnPostgres.create(path.join(base, 'postgres'), pgPort!);
  const redis = new OwnRedis(redisPort!, path.join(base, 'redis.log'));
  await redis.start();
  const temporal = new OwnTemporal(temporalPort!, path.join(base, 'temporal.db'), path.join(base, 'temporal.log'));
  await temporal.start();

  // Every provider is the emulator, a little slow, so work is still in flight when a fault strikes.
  const upstream = createFullEmulator({ latencyMs: 100 });
  const emulator: http.Server = await listen(upstream.app, 0, '127.0.0.1');
  const platformEnv: Record<string, string> = {
    ...(process.env as Record<string, string>),
    ...emulatorProviderEnv(serverUrl(emulator), upstream.credentials, path.join(base, 'data')),
    NODE_ENV: 'development',
    DATA_DIR: path.join(base, 'data'),
    DATABASE_URL: postgres.url,
    REDIS_URL: redis.url,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: TASK_QUEUE,
    API_PORT: String(apiPort),
    HIVE_PORT: String(hivePort),
    HIVE_RELAY_PORT: String(relayPort),
    // No stripe-mock: card top-ups are not part of these faults.
    HIVE_STRIPE_API_BASE: 'http://127.0.0.1:9',
    HIVE_STRIPE_SECRET_KEY: 'sk_test_faults',
    HIVE_SIGNUP_ENABLED: 'true',
    LOG_LEVEL: 'warn',
    CPU_POOL_THREADS: '1',
    // A lost or stalled stage is taken for lost after five seconds, not thirty: the suite waits for it.
    VECTOR_STORE_JOB_LOCK_SECONDS: '5',
    WEBHOOK_JOB_LOCK_SECONDS: '5',
    ...env,
  };
  delete platformEnv.VITEST;
  delete platformEnv.VITEST_POOL_ID;
  delete platformEnv.VITEST_WORKER_ID;

  const lines: string[] = [];
  const log = createWriteStream(path.join(base, 'platform.log'), { flags: 'a' });
  const platform: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'scripts/platform.ts', 'start'], { cwd: ROOT, env: platformEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (line: string) => {
    log.write(`${line}\n`);
    lines.push(line);
    if (lines.length > KEPT_LINES) lines.shift();
  };
  createInterface({ input: platform.stdout! }).on('line', keep);
  createInterface({ input: platform.stderr! }).on('line', keep);
  const killPlatform = () => platform.kill('SIGKILL');
  process.once('exit', killPlatform);

  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the platform did not come up within 240 s:\n${lines.slice(-40).join('\n')}`)), 240_000);
    const watch = setInterval(() => {
      if (lines.some((line) => line.includes('The platform is up'))) {
        clearTimeout(timer);
        clearInterval(watch);
        resolve();
      }
    }, 200);
    platform.once('exit', (code) => {
      clearTimeout(timer);
      clearInterval(watch);
      reject(new Error(`the platform exited with code ${code}:\n${lines.slice(-40).join('\n')}`));
    });
  });

  const db = createPool(postgres.url, 4, { warn: () => undefined });
  let developers = 0;
  return {
    postgres,
    redis,
    temporal,
    taskQueue: TASK_QUEUE,
    gatewayUrl: `http://127.0.0.1:${apiPort}`,
    hiveUrl: `http://127.0.0.1:${hivePort}`,
    db,
    async newDeveloper(creditMicros = 50_000_000) {
      const account = await createDeveloperAccount(db, { email: `faults${++developers}@example.test`, password: 'correct horse battery', initialCreditMicros: creditMicros });
      const { plaintext } = await createApiKey(db, account.id, { name: 'faults', scopes: ['admin'] });
      return { accountId: account.id, key: plaintext };
    },
    childPid: (script) => childOf(platform.pid!, script),
    output: () => [...lines],
    async close() {
      process.removeListener('exit', killPlatform);
      if (platform.exitCode === null) {
        const exited = new Promise((resolve) => platform.once('exit', resolve));
        platform.kill('SIGTERM');
        const timer = setTimeout(() => platform.kill('SIGKILL'), 60_000);
        await exited;
        clearTimeout(timer);
      }
      await db.end();
      emulator.closeAllConnections();
      await new Promise((resolve) => emulator.close(resolve));
      await temporal.stop();
      await redis.stop();
      await postgres.destroy();
      // The start command's output outlives the run, for reading after a failure.
      mkdirSync(path.join(ROOT, '.data', 'run'), { recursive: true });
      copyFileSync(path.join(base, 'platform.log'), path.join(ROOT, '.data', 'run', 'faults-platform.log'));
      rmSync(base, { recursive: true, force: true });
    },
  };
}

/** The child of `parent` whose command line runs `script` (the start command spawns each with node directly). */
function childOf(parent: number, script: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parentPid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parentPid !== parent) continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (command.includes(script)) return Number(entry);
    } catch {
      // The process ended while being read.
    }
  }
  return undefined;
}
