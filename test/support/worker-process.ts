import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * The real worker process (`node --import tsx workers/main.ts`) for tests that need it whole:
 * its BullMQ consumers, its Temporal worker, and a process that can be killed. Pass a test
 * platform's `env` so the worker joins that platform's database, Redis prefix and task queue.
 *
 *   const worker = await startWorkerProcess(gateway.env);
 *   await worker.kill('SIGKILL');   // dies at once, mid-work
 *   await worker.restart();         // a fresh process, resolved once it polls again
 *   await worker.stop();            // SIGTERM, in-flight work finishes
 */
export interface WorkerProcess {
  /** The current process id (a restart makes a new one). */
  readonly pid: number | undefined;
  /** Sends the signal and resolves once the process has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts a new process (stopping a running one first) and resolves once it logs 'worker polling'. */
  restart(): Promise<void>;
  /** SIGTERM and wait; SIGKILL after the grace period. Safe to call twice. */
  stop(graceMs?: number): Promise<void>;
  /** The last lines the worker wrote (JSON log lines and anything else), for a failing test's message. */
  output(): string[];
}

export interface WorkerProcessOptions {
  /** How long to wait for 'worker polling' (it bundles the workflows first). Default READY_TIMEOUT_MS. */
  readyTimeoutMs?: number;
  /** Log level of the worker; at least info, since readiness is read from its log. Default info. */
  logLevel?: 'info' | 'debug' | 'trace';
}

/**
 * A worker compiles its code and bundles its workflows before it polls: 24 s on a fresh clone in
 * CI, and a restart during the full parallel run on 2 cores once took over 60 s (the old limit).
 * Three minutes, as `npm start` waits for the same thing.
 */
const READY_TIMEOUT_MS = 180_000;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const KEPT_LINES = 300;
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export async function startWorkerProcess(env: Record<string, string>, options: WorkerProcessOptions = {}): Promise<WorkerProcess> {
  const lines: string[] = [];
  let child: ChildProcess | undefined;

  const exited = (proc: ChildProcess) =>
    proc.exitCode !== null || proc.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => proc.once('exit', () => resolve()));

  const start = async (): Promise<void> => {
    const next = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
      cwd: ROOT,
      env: { ...env, LOG_LEVEL: options.logLevel ?? 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = next;
    running.add(next);
    next.once('exit', () => running.delete(next));
    const ready = new Promise<void>((resolve, reject) => {
      const readyTimeoutMs = options.readyTimeoutMs ?? READY_TIMEOUT_MS;
      const timer = setTimeout(() => reject(new Error(`the worker did not log 'worker polling' within ${readyTimeoutMs} ms:\n${lines.slice(-30).join('\n')}`)), readyTimeoutMs);
      const onLine = (line: string) => {
        lines.push(line);
        if (lines.length > KEPT_LINES) lines.shift();
        if (line.includes('"worker polling"')) {
          clearTimeout(timer);
          resolve();
        }
      };
      createInterface({ input: next.stdout! }).on('line', onLine);
      createInterface({ input: next.stderr! }).on('line', onLine);
      next.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the worker exited (code ${code}, signal ${signal}) before polling:\n${lines.slice(-30).join('\n')}`));
      });
    });
    await ready;
  };

  const handle: WorkerProcess = {
    get pid() {
      return child?.pid;
    },
    async kill(signal = 'SIGKILL') {
      if (!child) return;
      const current = child;
      if (current.exitCode === null && current.signalCode === null) current.kill(signal);
      await exited(current);
    },
    async restart() {
      await handle.stop();
      await start();
    },
    async stop(graceMs = 20_000) {
      if (!child) return;
      const current = child;
      if (current.exitCode !== null || current.signalCode !== null) return;
      current.kill('SIGTERM');
      const timer = setTimeout(() => current.kill('SIGKILL'), graceMs);
      await exited(current);
      clearTimeout(timer);
    },
    output: () => [...lines],
  };

  await start();
  return handle;
}
