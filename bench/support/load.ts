import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { cachedBinPath } from '../../scripts/lib/local-services.js';
import { commandCpuSeconds, machineCpuTicks, processCpuSeconds } from './process-cpu.js';

const run = promisify(execFile);

/** One HTTP request the load repeats. */
export interface LoadTarget {
  origin: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** A stream: each latency counts to its body's first byte (its first event), not to its end. */
  firstByte?: boolean;
}

/** What an open-loop run measured, in milliseconds from each scheduled send. */
export interface LoadResult {
  /** Which generator sent the load, and for the Go one whether it ran in the real-time class (bench/loadgen/pace_linux.go). */
  generator: 'go' | 'go (real-time class)' | 'node';
  sustainedPerSecond: number;
  requests: number;
  failures: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  /**
   * How late the generator itself sent, p50 and p99 (Go generator only). It is part of every
   * latency above, which counts from the schedule: on a busy 2-core machine the generator's own
   * wake-ups wait for a core too.
   */
  sendLagP50: number | undefined;
  sendLagP99: number | undefined;
  /** CPU time the load generator itself used per request, in milliseconds (Go generator on Linux). */
  generatorCpuMsPerRequest: number | undefined;
  /** The share of the machine's CPU time its hypervisor took during the run (Linux's "steal"); undefined off Linux. */
  stealPercent: number | undefined;
  /**
   * CPU time the server process used per completed request, in milliseconds (with `serverPid`;
   * undefined off Linux). Unlike a latency it barely moves with steal or with what else runs.
   */
  serverCpuMsPerRequest: number | undefined;
  /**
   * CPU time all PostgreSQL and all Redis server processes used per completed request (undefined
   * off Linux): the share of each request's cost the API hands to them. A backend that exits
   * during the run takes its time with it, so these can only read low.
   */
  postgresCpuMsPerRequest: number | undefined;
  redisCpuMsPerRequest: number | undefined;
}

/**
 * Open-loop load at a fixed rate. By default bench/loadgen (Go, built once into the cache):
 * a generator in Node would share the Node runtime's costs on this 2-core machine and add its
 * own event-loop and GC pauses to every latency (a bare node:http server measured p99 7-13 ms
 * at 1,000/s with it, 2.3 ms with the Go one). BENCH_LOADGEN=node, or a machine without Go,
 * uses the in-process generator instead. With `traceFile` (Go generator only), each request's id,
 * send lag and latency go to that file (bench/support/tail.ts).
 */
export async function openLoopLoad(target: LoadTarget, ratePerSecond: number, seconds: number, serverPid?: number, traceFile?: string): Promise<LoadResult> {
  const cpuMs = () => ({ server: msOf(processCpuSeconds(serverPid, false)), postgres: msOf(commandCpuSeconds('postgres')), redis: msOf(commandCpuSeconds('redis-server')) });
  const before = machineCpuTicks();
  const usedBefore = cpuMs();
  const result = await generate(target, ratePerSecond, seconds, traceFile);
  const usedAfter = cpuMs();
  const after = machineCpuTicks();
  const stealPercent = before && after ? (100 * (after.steal - before.steal)) / Math.max(1, after.total - before.total) : undefined;
  const perRequest = (key: keyof typeof usedBefore) => {
    const [start, end] = [usedBefore[key], usedAfter[key]];
    return start !== undefined && end !== undefined ? (end - start) / Math.max(1, result.requests) : undefined;
  };
  return { ...result, stealPercent, serverCpuMsPerRequest: perRequest('server'), postgresCpuMsPerRequest: perRequest('postgres'), redisCpuMsPerRequest: perRequest('redis') };
}

const msOf = (seconds: number | undefined) => (seconds === undefined ? undefined : seconds * 1000);

/** The value at quantile `q` (0.99 for p99) of ascending `sorted`; NaN when it is empty. */
export const quantile = (sorted: readonly number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;

async function generate(target: LoadTarget, ratePerSecond: number, seconds: number, traceFile?: string): Promise<Omit<LoadResult, 'stealPercent' | 'serverCpuMsPerRequest' | 'postgresCpuMsPerRequest' | 'redisCpuMsPerRequest'>> {
  const binary = process.env.BENCH_LOADGEN === 'node' ? undefined : await goLoadgen();
  if (binary) {
    const args = ['-url', `${target.origin}${target.path}`, '-method', 'POST', '-body', target.body, '-rate', String(ratePerSecond), '-seconds', String(seconds)];
    for (const [name, value] of Object.entries(target.headers)) args.push('-header', `${name}: ${value}`);
    if (traceFile) args.push('-trace', traceFile);
    if (target.firstByte) args.push('-first-byte');
    const { stdout } = await run(binary, args, { maxBuffer: 1 << 20 });
    const summary = JSON.parse(stdout) as Record<string, number> & { realtime?: boolean };
    return {
      generator: summary.realtime ? 'go (real-time class)' : 'go',
      sustainedPerSecond: summary.sustained_per_second!,
      requests: summary.requests!,
      failures: summary.failures!,
      p50: summary.p50_ms!,
      p90: summary.p90_ms!,
      p99: summary.p99_ms!,
      p999: summary['p99_9_ms']!,
      max: summary.max_ms!,
      sendLagP50: summary.send_lag_p50_ms,
      sendLagP99: summary.send_lag_p99_ms,
      generatorCpuMsPerRequest: summary.cpu_ms_per_request! >= 0 ? summary.cpu_ms_per_request : undefined,
    };
  }
  const pool = new Pool(target.origin, { connections: 256, pipelining: 1, keepAliveTimeout: 30_000 });
  try {
    const result = await openLoop(async () => {
      const response = await pool.request({ method: 'POST', path: target.path, headers: target.headers, body: target.body });
      if (!target.firstByte) {
        await response.body.dump();
        return response.statusCode;
      }
      // Answered at the first chunk; the rest is read meanwhile, as the stream's caller would.
      const chunks = response.body[Symbol.asyncIterator]();
      await chunks.next();
      void (async () => {
        for (let next = await chunks.next(); !next.done; next = await chunks.next());
      })().catch(() => undefined);
      return response.statusCode;
    }, ratePerSecond, seconds);
    const sorted = result.latenciesMs.sort((a, b) => a - b);
    const at = (q: number) => quantile(sorted, q);
    return {
      generator: 'node',
      sustainedPerSecond: result.completed / result.elapsedSeconds,
      requests: result.completed,
      failures: result.failures,
      p50: at(0.5),
      p90: at(0.9),
      p99: at(0.99),
      p999: at(0.999),
      max: sorted.at(-1) ?? Number.NaN,
      sendLagP50: undefined,
      sendLagP99: undefined,
      generatorCpuMsPerRequest: undefined,
    };
  } finally {
    await pool.close();
  }
}

let built: Promise<string | undefined> | undefined;

/** Builds bench/loadgen once per source version into the cache outside the repository; undefined without Go. */
function goLoadgen(): Promise<string | undefined> {
  built ??= (async () => {
    const source = path.join(import.meta.dirname, '..', 'loadgen');
    const hash = createHash('sha256');
    for (const file of readdirSync(source).filter((name) => name.endsWith('.go') || name === 'go.mod').sort()) hash.update(file).update(readFileSync(path.join(source, file)));
    const binary = cachedBinPath(`loadgen-${hash.digest('hex').slice(0, 12)}`);
    if (existsSync(binary)) return binary;
    try {
      mkdirSync(path.dirname(binary), { recursive: true });
      await run('go', ['build', '-o', binary, '.'], { cwd: source, env: { ...process.env, GOFLAGS: '-mod=mod' } });
      return binary;
    } catch (error) {
      console.log(`bench: the Go load generator could not be built (${error instanceof Error ? error.message.split('\n')[0] : String(error)}); using the Node one`);
      return undefined;
    }
  })();
  return built;
}

/**
 * Sends on a fixed schedule, whatever the responses do, so a slow server cannot hide its queueing
 * (no coordinated omission). The loop wakes on a 1 ms timer and
 * sends every request that has come due, rather than spinning until each due time: on a 2-core
 * machine a spinning generator would take a whole core from the server it measures.
 */
export async function openLoop(send: () => Promise<number>, ratePerSecond: number, seconds: number) {
  const intervalNs = 1e9 / ratePerSecond;
  const total = Math.round(ratePerSecond * seconds);
  const start = process.hrtime.bigint();
  const latenciesMs: number[] = [];
  let failures = 0;
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; ) {
    const elapsedNs = Number(process.hrtime.bigint() - start);
    const dueNow = Math.min(total, Math.floor(elapsedNs / intervalNs) + 1);
    for (; i < dueNow; i++) {
      // Latency counts from the actual send; the sender never waits for a response, so a slow
      // server's queueing still shows, and the timer's own slack (under 1 ms) does not.
      const sent = process.hrtime.bigint();
      inFlight.push(
        send().then(
          (status) => {
            latenciesMs.push(Number(process.hrtime.bigint() - sent) / 1e6);
            if (status !== 200) failures++;
          },
          () => {
            failures++;
          },
        ),
      );
    }
    if (i < total) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(inFlight);
  return { latenciesMs, failures, completed: latenciesMs.length, elapsedSeconds: Number(process.hrtime.bigint() - start) / 1e9 };
}
