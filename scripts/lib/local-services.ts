import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';

const run = promisify(execFile);

/** Where built tools are cached outside the repository (ensure-deps.sh's Temporal CLI, the bench's load generator). */
export function cachedBinPath(name: string): string {
  const cacheDir = process.env.SVC_CACHE_DIR || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'svc-platform');
  return path.join(cacheDir, 'bin', name);
}

export function isPortOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface TemporalDevServer {
  address: string;
  uiUrl: string | undefined;
  process: ChildProcess;
}

/**
 * Dynamic config the dev server starts with (docker compose's Temporal reads the same values from
 * scripts/docker/temporal-dynamic-config.yaml). A history shard reads its queue of new transfer
 * and timer tasks at most `…MaxPollRPS` times a second, 20 by default: every workflow and activity
 * task then waited up to 50 ms in history before matching could hand it to a worker, about 35 ms
 * of an empty workflow's 50 ms on this machine. At 200 a task waits at most 5 ms, and throughput
 * under load is unchanged (the reader still takes every waiting task in one read).
 */
export const TEMPORAL_DYNAMIC_CONFIG: Record<string, number> = {
  'history.transferProcessorMaxPollRPS': 200,
  'history.timerProcessorMaxPollRPS': 200,
};

/**
 * Starts `temporal server start-dev`: with a SQLite file it keeps workflow history across restarts
 * (npm start); without one it is in memory (npm test). Its log goes to a file, not the console.
 */
export async function startTemporalDevServer(options: {
  port: number;
  uiPort?: number;
  dbFile?: string;
  logFile: string;
}): Promise<TemporalDevServer> {
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(options.port), '--log-level', 'warn'];
  if (options.uiPort) args.push('--ui-port', String(options.uiPort));
  else args.push('--headless');
  for (const [key, value] of Object.entries(TEMPORAL_DYNAMIC_CONFIG)) args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  if (options.dbFile) {
    mkdirSync(path.dirname(options.dbFile), { recursive: true });
    args.push('--db-filename', options.dbFile);
  }
  mkdirSync(path.dirname(options.logFile), { recursive: true });
  const log = createWriteStream(options.logFile, { flags: 'a' });
  // Its own process group: a terminal Ctrl-C reaches the API and worker first, and this server is
  // stopped after them, so the worker can finish its in-flight tasks against a live server.
  const child = spawn(cachedBinPath('temporal'), args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  const address = `127.0.0.1:${options.port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`Temporal dev server exited with code ${code}; see ${options.logFile}`))),
  );
  await Promise.race([waitForTemporal(address, 90_000), exited]);
  return { address, uiUrl: options.uiPort ? `http://127.0.0.1:${options.uiPort}` : undefined, process: child };
}

/** Waits until the frontend answers a real RPC, not merely until its port accepts connections. */
export async function waitForTemporal(address: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: 2_000 });
      try {
        await connection.withDeadline(Date.now() + 2_000, () => connection.workflowService.getSystemInfo({}));
        // The dev server creates the default namespace shortly after its frontend opens.
        await connection.withDeadline(Date.now() + 2_000, () => connection.workflowService.describeNamespace({ namespace: 'default' }));
        return;
      } finally {
        await connection.close();
      }
    } catch (error) {
      lastError = error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  throw new Error(`Temporal at ${address} did not answer within ${timeoutMs} ms: ${String(lastError)}`);
}

/**
 * ensure-deps.sh records the services it had to start (PostgreSQL, Redis) in
 * `<DATA_DIR>/run/started-services`; the command that started them stops them when it stops.
 */
export function takeRecordedServices(dataDir: string): string[] {
  const file = path.join(dataDir, 'run', 'started-services');
  if (!existsSync(file)) return [];
  const lines = readFileSync(file, 'utf8').split('\n').map((line) => line.trim()).filter(Boolean);
  rmSync(file, { force: true });
  return lines;
}

export async function stopRecordedServices(lines: string[], log: (message: string) => void): Promise<void> {
  for (const line of lines.reverse()) {
    const [kind, ...rest] = line.split(/\s+/);
    try {
      if (kind === 'postgres' && rest.length >= 2) {
        await run('pg_ctlcluster', ['--skip-systemctl-redirect', rest[0]!, rest[1]!, 'stop']);
        log(`stopped PostgreSQL ${rest[0]} ${rest[1]}, which this command had started`);
      } else if (kind === 'redis' && rest[0]) {
        await run('redis-cli', ['-p', rest[0], 'shutdown', 'nosave']).catch(() => undefined);
        log(`stopped Redis on port ${rest[0]}, which this command had started`);
      }
    } catch (error) {
      log(`could not stop ${line}: ${String(error)}`);
    }
  }
}

/** Sends SIGTERM and waits for the exit; SIGKILL after the grace period. */
export async function stopChild(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export interface StripeMock {
  /** http://127.0.0.1:<port>, for HIVE_STRIPE_API_BASE. */
  apiBase: string;
  process: ChildProcess;
}

/**
 * Starts stripe-mock (Stripe's official mock of its API, installed by ensure-deps.sh) on `port`,
 * or on a port of the system's choosing when 0, and resolves once it listens. Its HTTPS listener,
 * which it always opens, gets a port of the system's choosing too, so several can run at once.
 */
export async function startStripeMock(options: { port: number; logFile: string }): Promise<StripeMock> {
  mkdirSync(path.dirname(options.logFile), { recursive: true });
  const log = createWriteStream(options.logFile, { flags: 'a' });
  const child = spawn(cachedBinPath('stripe-mock'), ['-http-addr', `127.0.0.1:${options.port || ''}`, '-https-addr', '127.0.0.1:'], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stderr.pipe(log);
  const apiBase = await new Promise<string>((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`stripe-mock did not listen within 30 s; see ${options.logFile}`)), 30_000);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`stripe-mock exited with code ${code}; see ${options.logFile}`)));
    child.stdout.on('data', (chunk: Buffer) => {
      log.write(chunk);
      seen += chunk.toString();
      const match = /Listening for HTTP at address: (\S+)/.exec(seen);
      if (match) {
        clearTimeout(timer);
        resolve(`http://${match[1]}`);
      }
    });
  });
  child.stdout.removeAllListeners('data');
  child.stdout.pipe(log);
  return { apiBase, process: child };
}
