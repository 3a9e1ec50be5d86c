import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Runtime, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from '../shared/logger.js';
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
 * keeps its own peak to what its work needs.
 */
export async function bundleWorkflowsInChildProcess(): Promise<WorkflowBundleWithSourceMap> {
  const directory = await mkdtemp(path.join(os.tmpdir(), 'svc-workflow-bundle-'));
  const target = path.join(directory, 'bundle.json');
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [...process.execArgv, BUNDLER_PATH, target], { stdio: ['ignore', 'inherit', 'inherit'] });
      child.once('error', reject);
      child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`the workflow bundler exited with code ${code}, signal ${signal}`))));
    });
    return JSON.parse(await readFile(target, 'utf8')) as WorkflowBundleWithSourceMap;
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
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

// The bundler reports each webpack step at info level; only problems are worth a log line.
const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string, meta?: Record<string, unknown>) => console.warn(message, meta ?? ''),
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};
