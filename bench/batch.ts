/**
 * A 50,000-line chat-completions batch end to end: the emulator (20 ms a call), the API and the
 * worker each in their own process, a Temporal dev server of its own and a fresh database. Prints
 * the upload time, the batch's wall time (create to completed), lines per second, and the peak
 * resident memory (VmHWM) of the API and worker processes. Figures are printed, never asserted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import { prepareDatabase } from '../shared/db/migrate.js';
import { createPool } from '../shared/db/pool.js';
import { createLogger } from '../shared/logger.js';
import { freePort, startTemporalDevServer, stopChild } from '../scripts/lib/local-services.js';
import { API_NODE_ARGS, WORKER_NODE_ARGS } from '../scripts/lib/node-args.js';
import { printedJson } from './support/child-output.js';
import { flagsFrom } from './support/node-flags.js';
import { table } from './support/report.js';

export interface BatchBenchOptions {
  /** A server URL whose database `svc_platform_bench_batch` is dropped and made again. */
  databaseUrl: string;
  lines: number;
  latencyMs: number;
  dataDir: string;
}

async function logLine(child: ChildProcess, message: string): Promise<void> {
  for await (const line of createInterface({ input: child.stdout! })) {
    if (line.includes(`"${message}"`)) {
      child.stdout!.resume();
      return;
    }
  }
  throw new Error(`process exited before logging ${message}`);
}

/** Peak resident set size of a process, in MB (VmHWM of /proc/<pid>/status). */
function peakMb(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)\s+kB/.exec(status)![1]);
  return Math.round(kb / 1024);
}

/** CPU seconds a process has used (user + system, from /proc/<pid>/stat). */
function cpuSeconds(pid: number | undefined): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resident set size now, in MB (VmRSS). */
function currentMb(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)![1]) / 1024);
}

export async function runBatchBench(options: BatchBenchOptions): Promise<void> {
  const database = new URL(options.databaseUrl);
  database.pathname = '/svc_platform_bench_batch';
  const server = new URL(options.databaseUrl);
  server.pathname = '/postgres';
  const maintenance = createPool(server.toString(), 1, createLogger({ LOG_LEVEL: 'silent' }, 'bench'));
  await maintenance.query('DROP DATABASE IF EXISTS svc_platform_bench_batch WITH (FORCE)');
  await maintenance.end();
  await prepareDatabase(database.toString());

  const temporal = await startTemporalDevServer({ port: await freePort(), logFile: path.join(options.dataDir, 'run', 'temporal-bench-batch.log') });
  const emulatorPort = await freePort();
  const emulator = spawn(process.execPath, ['--import', 'tsx', 'shared/emulator/main.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, EMULATOR_PORT: String(emulatorPort), EMULATOR_LATENCY_MS: String(options.latencyMs) },
  });
  const printed = await printedJson(emulator, 'listening');

  const db = createPool(database.toString(), 2, createLogger({ LOG_LEVEL: 'silent' }, 'bench'));
  const developer = await createDeveloperAccount(db, { email: `batch-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 10_000_000_000 });
  const { plaintext: key } = await createApiKey(db, developer.id, { name: 'batch bench', scopes: ['admin'] });

  const apiPort = await freePort();
  const env = {
    ...process.env,
    DATABASE_URL: database.toString(),
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: `svc-bench-batch-${process.pid}`,
    REDIS_KEY_PREFIX: `svc-bench-batch-${process.pid}`,
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-bench-batch-')),
    API_PORT: String(apiPort),
    LOG_LEVEL: 'info',
    // A batch worker keeps BATCH_UPSTREAM_CONCURRENCY lines in flight, each with its reserve and settle statements.
    DATABASE_POOL_MAX: process.env.BENCH_BATCH_POOL_MAX ?? '40',
    ...(process.env.BATCH_UPSTREAM_CONCURRENCY && { BATCH_UPSTREAM_CONCURRENCY: process.env.BATCH_UPSTREAM_CONCURRENCY }),
    DEVELOPER_RPM_LIMIT: '100000000',
    EDGE_RPM_LIMIT: '100000000',
    OPENAI_API_KEY: printed.api_keys.openai as string,
    OPENAI_BASE_URL: `${printed.listening}/openai/v1`,
  };
  const api = spawn(process.execPath, [...API_NODE_ARGS, '--import', 'tsx', 'api/main.ts'], { stdio: ['ignore', 'pipe', 'inherit'], env });
  // BENCH_WORKER_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", profiles the worker.
  // The worker's heap cap is the one `npm start` and `npm run serve:worker` use.
  const workerArgs = flagsFrom(process.env.BENCH_WORKER_NODE_ARGS) ?? WORKER_NODE_ARGS;
  // BENCH_BATCH_WORKERS > 1 runs more worker replicas on the same task queue (they share the chunks).
  const workers = Array.from({ length: Math.max(1, Number(process.env.BENCH_BATCH_WORKERS ?? 1)) }, () =>
    spawn(process.execPath, [...workerArgs, '--import', 'tsx', 'workers/main.ts'], { stdio: ['ignore', 'pipe', 'inherit'], env }),
  );
  const peakOfWorkers = () => Math.max(...workers.map((worker) => peakMb(worker.pid)));
  const base = `http://127.0.0.1:${apiPort}`;
  try {
    await Promise.all([logLine(api, 'gateway API listening'), ...workers.map((worker) => logLine(worker, 'worker polling'))]);
    // The worker's high-water mark before any batch work: what starting it costs.
    const workerStartMb = peakOfWorkers();
    const auth = { Authorization: `Bearer ${key}` };

    const lines: string[] = [];
    for (let i = 0; i < options.lines; i++) {
      lines.push(JSON.stringify({ custom_id: `req-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: `Benchmark question ${i}` }], max_tokens: 24 } }));
    }
    const content = `${lines.join('\n')}\n`;
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([content]), 'bench.jsonl');
    const uploadStarted = performance.now();
    const uploaded = (await (await fetch(`${base}/v1/files`, { method: 'POST', body: form, headers: auth })).json()) as { id: string };
    const uploadSeconds = (performance.now() - uploadStarted) / 1000;

    const cpuBefore = { api: cpuSeconds(api.pid), workers: workers.map((worker) => cpuSeconds(worker.pid)), emulator: cpuSeconds(emulator.pid) };
    const started = performance.now();
    const created = (await (await fetch(`${base}/v1/batches`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ input_file_id: uploaded.id, endpoint: '/v1/chat/completions', completion_window: '24h' }) })).json()) as { id: string };
    let batch: any;
    let lastPrint = 0;
    for (;;) {
      batch = await (await fetch(`${base}/v1/batches/${created.id}`, { headers: auth })).json();
      if (['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) break;
      if (performance.now() - lastPrint > 5_000) {
        lastPrint = performance.now();
        console.log(`  ${((performance.now() - started) / 1000).toFixed(0)} s: ${batch.status}, ${batch.request_counts.completed} completed, ${batch.request_counts.failed} failed`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = {
      api: cpuSeconds(api.pid) - cpuBefore.api,
      workers: workers.reduce((sum, worker, i) => sum + cpuSeconds(worker.pid) - cpuBefore.workers[i]!, 0),
      emulator: cpuSeconds(emulator.pid) - cpuBefore.emulator,
    };
    const output = batch.output_file_id ? await (await fetch(`${base}/v1/files/${batch.output_file_id}/content`, { headers: auth })).text() : '';
    const outputLines = output.split('\n').filter(Boolean).length;

    console.log(`batch: ${options.lines} chat-completions lines, emulator ${options.latencyMs} ms a call; API, ${workers.length} worker process(es) and emulator each their own process`);
    // Where the machine's time went during the batch (PostgreSQL is the rest of the load).
    console.log(
      `  CPU during the batch: worker ${cpu.workers.toFixed(1)} s (${((cpu.workers * 1000) / options.lines).toFixed(2)} ms a line), emulator ${cpu.emulator.toFixed(1)} s, API ${cpu.api.toFixed(1)} s, over ${seconds.toFixed(1)} s of wall time on ${os.availableParallelism()} cores`,
    );
    table('batch', `batch: ${options.lines} chat-completions lines, emulator ${options.latencyMs} ms a call`, [
      {
        status: batch.status,
        'lines completed / failed': `${batch.request_counts.completed} / ${batch.request_counts.failed}`,
        'output lines': outputLines,
        'upload s': uploadSeconds.toFixed(2),
        'batch wall s (create to completed)': seconds.toFixed(1),
        'lines/s': Math.round(options.lines / seconds),
        'API peak RSS MB': peakMb(api.pid),
        'worker peak RSS MB': peakOfWorkers(),
        'worker peak at start MB': workerStartMb,
        'worker RSS at end MB': Math.max(...workers.map((worker) => currentMb(worker.pid))),
      },
    ]);
  } finally {
    await db.end();
    await stopChild(api);
    await Promise.all(workers.map((worker) => stopChild(worker, 30_000)));
    await stopChild(emulator);
    await stopChild(temporal.process);
  }
}
