import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Runtime, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from '../shared/logger.js';
import { awayDependency } from '../shared/platform/dependency-errors.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { createActivities } from './activities.js';

const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));
const BUNDLER_PATH = fileURLToPath(new URL('./bundle-workflows.ts', import.meta.url));

/**
 * Routes the Temporal SDK's own log lines (worker state, task failures) into the process's JSON
 * logger. The SDK runtime is a per-process singleton, so only the first call takes effect.
 */
export function installTemporalLogging(logger: Logger): void {
  if (temporalLoggingInstalled) return;
  temporalLoggingInstalled = true;
  const sdk = logger.child({ component: 'temporal-sdk' });
  const write = (level: 'trace' | 'debug' | 'info' | 'warn' | 'error', message: string, meta?: Record<string, unknown>) => sdk[level](meta ?? {}, message);
  Runtime.install({
    logger: {
      log: (level, message, meta) => write(level.toLowerCase() as 'info', message, meta),
      trace: (message, meta) => write('trace', message, meta),
      debug: (message, meta) => write('debug', message, meta),
      info: (message, meta) => write('info', message, meta),
      warn: (message, meta) => write('warn', message, meta),
      error: (message, meta) => write('error', message, meta),
    },
  });
}
let temporalLoggingInstalled = false;

/** Bundles the workflow code once; every Worker of the process reuses the bundle. */
export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietBundlerLogger });
}

/**
 * The same bundle, made by a child process (workers/bundle-workflows.ts): webpack peaks at a few
 * hundred MB, and a resident high-water mark never comes down, so the long-running worker process
 * keeps its own peak to what its work needs. The bundle is kept in node_modules/.cache under a
 * hash of what goes into it, so a worker restarted after a crash polls again seconds sooner.
 */
export async function bundleWorkflowsInChildProcess(): Promise<WorkflowBundleWithSourceMap> {
  const cached = path.join(BUNDLE_CACHE_DIR, `${await bundleInputsHash()}.json`);
  const hit = await readFile(cached, 'utf8').catch(() => undefined);
  if (hit) return JSON.parse(hit) as WorkflowBundleWithSourceMap;
  await mkdir(BUNDLE_CACHE_DIR, { recursive: true });
  // Written under a name of its own and renamed: replicas starting together never read half a file.
  const target = `${cached}.${process.pid}.tmp`;
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [...process.execArgv, BUNDLER_PATH, target], { stdio: ['ignore', 'inherit', 'inherit'] });
      child.once('error', reject);
      child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`the workflow bundler exited with code ${code}, signal ${signal}`))));
    });
    const bundle = await readFile(target, 'utf8');
    await rename(target, cached);
    await pruneBundleCache();
    return JSON.parse(bundle) as WorkflowBundleWithSourceMap;
  } finally {
    await rm(target, { force: true });
  }
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUNDLE_CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'svc-workflow-bundle');

/** Keeps the newest few bundles (a checkout switching between branches reuses them), 1.8 MB each. */
async function pruneBundleCache(keep = 4): Promise<void> {
  const names = (await readdir(BUNDLE_CACHE_DIR)).filter((name) => name.endsWith('.json'));
  const aged = await Promise.all(names.map(async (name) => ({ name, modified: (await stat(path.join(BUNDLE_CACHE_DIR, name))).mtimeMs })));
  for (const { name } of aged.sort((a, b) => b.modified - a.modified).slice(keep)) await rm(path.join(BUNDLE_CACHE_DIR, name), { force: true });
}

/**
 * What a bundle is made of: every source file under workflows/ and shared/ (workflows import
 * shared/ for types and constants), the installed packages (package-lock.json) and the Node
 * version. Any change makes a new bundle; reading the files costs milliseconds.
 */
async function bundleInputsHash(): Promise<string> {
  const hash = createHash('sha256').update(process.version);
  const files = [path.join(ROOT, 'package-lock.json')];
  for (const folder of ['workflows', 'shared']) {
    for (const entry of await readdir(path.join(ROOT, folder), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith('.ts')) files.push(path.join(entry.parentPath, entry.name));
    }
  }
  for (const file of files.sort()) hash.update(file).update(await readFile(file));
  return hash.digest('hex').slice(0, 32);
}

export interface TemporalWorkerOptions {
  taskQueue?: string;
  bundle: WorkflowBundleWithSourceMap;
}

/** A Temporal worker polling the platform's task queue with the platform's activities. */
export async function createTemporalWorker(platform: GatewayServices, options: TemporalWorkerOptions): Promise<{ worker: Worker; connection: NativeConnection }> {
  const connection = await connectUntilReachable(platform.config.temporalAddress, platform.logger);
  const worker = await Worker.create({
    connection,
    namespace: platform.config.TEMPORAL_NAMESPACE,
    taskQueue: options.taskQueue ?? platform.config.TEMPORAL_TASK_QUEUE,
    workflowBundle: options.bundle,
    activities: createActivities(platform),
  });
  return { worker, connection };
}

/** A worker may start before its Temporal server (a fresh cluster, a restart); it waits rather than dies. */
async function connectUntilReachable(address: string, logger: Logger): Promise<NativeConnection> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await NativeConnection.connect({ address });
    } catch (error) {
      if (attempt === 0) logger.warn({ address, err: error }, 'Temporal not reachable yet; retrying every 2 s');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
  }
}

/**
 * A step of the worker's start that needs Temporal (its schedules, the queue upkeep's recovery):
 * tried again every 2 s while Temporal is away or slower than a request's deadline (a loaded
 * machine's first calls took over 5 s), rather than ending the process before it ever polls.
 */
export async function untilTemporalAnswers<T>(step: () => Promise<T>, what: string, logger: Logger): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await step();
    } catch (error) {
      if (awayDependency(error) !== 'Temporal') throw error;
      if (attempt === 0) logger.warn({ err: error }, `${what}: Temporal did not answer; retrying every 2 s`);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
  }
}

// The bundler reports each webpack step at info level; only problems are worth a log line.
const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string, meta?: Record<string, unknown>) => console.warn(message, meta ?? ''),
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};
