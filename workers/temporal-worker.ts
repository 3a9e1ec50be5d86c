import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Platform } from '../shared/platform/platform.js';
import { createActivities } from './activities.js';

const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

/** Bundles the workflow code once; every Worker of the process reuses the bundle. */
export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietBundlerLogger });
}

export interface TemporalWorkerOptions {
  taskQueue?: string;
  bundle: WorkflowBundleWithSourceMap;
}

/** A Temporal worker polling the platform's task queue with the platform's activities. */
export async function createTemporalWorker(platform: Platform, options: TemporalWorkerOptions): Promise<{ worker: Worker; connection: NativeConnection }> {
  const connection = await NativeConnection.connect({ address: platform.config.temporalAddress });
  const worker = await Worker.create({
    connection,
    namespace: platform.config.TEMPORAL_NAMESPACE,
    taskQueue: options.taskQueue ?? platform.config.TEMPORAL_TASK_QUEUE,
    workflowBundle: options.bundle,
    activities: createActivities(platform),
  });
  return { worker, connection };
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
