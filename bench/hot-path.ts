/**
 * The governance hot path at a fixed arrival rate: one request authenticates a ko_ key, attributes
 * a customer, runs the rate-limit layers in Redis, reserves and settles on the wallet in PostgreSQL.
 * The load is open-loop: requests leave on a fixed schedule and latency counts from the scheduled
 * time, so a slow server cannot hide its queueing (no coordinated omission).
 */
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import { createCustomer } from '../shared/customers/customers.js';
import type { Config } from '../shared/config.js';
import { createPool } from '../shared/db/pool.js';
import { createLogger } from '../shared/logger.js';
import { freePort, stopChild } from '../scripts/lib/local-services.js';
import { printedJson } from './support/child-output.js';
import { benchApiNodeArgs } from './support/node-flags.js';
import { watchApiMetrics } from './support/api-metrics.js';
import { openLoopLoad } from './support/load.js';
import { printTailBreakdown, tailBreakdown } from './support/tail.js';
import { goal, table } from './support/report.js';

export interface HotPathOptions {
  databaseUrl: string;
  ratePerSecond: number;
  seconds: number;
  warmupSeconds: number;
  /** Also trace the metered run and print where its slowest 1 % of calls spent their time (bench/support/tail.ts). */
  tail: boolean;
}

export async function runHotPathBench(base: Config, options: HotPathOptions): Promise<void> {
  const db = createPool(options.databaseUrl, 2, createLogger({ LOG_LEVEL: 'silent' }, 'bench'));
  const developer = await createDeveloperAccount(db, { email: `hot-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 1_000_000_000 });
  const { plaintext: key } = await createApiKey(db, developer.id, { name: 'hot path', scopes: ['api:chat'] });
  const customer = await createCustomer(db, developer.id, { external_id: 'bench-customer', rpm_limit: 10_000_000, tpm_limit: 2_000_000_000 });
  await db.end();

  const port = await freePort();
  const traceDirectory = options.tail ? mkdtempSync(path.join(tmpdir(), 'hot-path-tail-')) : undefined;
  const trace = traceDirectory === undefined ? undefined : { generator: path.join(traceDirectory, 'generator.txt'), api: path.join(traceDirectory, 'api.txt') };
  // BENCH_API_STDOUT names a file that gets what the API prints (a trace flag's output, say).
  const api = spawn(process.execPath, [...benchApiNodeArgs(), '--import', 'tsx', 'bench/support/bench-server.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      API_PORT: String(port),
      LOG_LEVEL: 'warn',
      REDIS_KEY_PREFIX: `svc-bench-${process.pid}`,
      ...(trace && { BENCH_TRACE_FILE: trace.api }),
      EDGE_RPM_LIMIT: '100000000',
      DEVELOPER_RPM_LIMIT: '100000000',
      DEVELOPER_TPM_LIMIT: '2000000000',
    },
  });
  const origin = (await printedJson(api, 'listening')).listening as string;
  if (process.env.BENCH_API_STDOUT) api.stdout!.pipe(createWriteStream(process.env.BENCH_API_STDOUT));
  const target = {
    origin,
    path: '/v1/_probe/metered',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'svc-customer': customer.id },
    body: JSON.stringify({ max_cost_micros: 2_000, cost_micros: 1_000, tokens_in: 12, tokens_out: 6 }),
  };

  const floorServer = spawn(process.execPath, ['--import', 'tsx', 'bench/support/floor-server.ts'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const floorTarget = { ...target, origin: (await printedJson(floorServer, 'listening')).listening as string };
  const roundTripFloor = spawn(process.execPath, ['--import', 'tsx', 'bench/support/round-trip-floor.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, DATABASE_URL: options.databaseUrl },
  });
  const roundTripTarget = { ...target, origin: (await printedJson(roundTripFloor, 'listening')).listening as string };

  try {
    await openLoopLoad(target, options.ratePerSecond, options.warmupSeconds);
    const apiFigures = await watchApiMetrics(origin);
    const result = await openLoopLoad(target, options.ratePerSecond, options.seconds, api.pid, trace?.generator);
    const inside = await apiFigures();
    // The same load against a bare node:http server: the part of each figure the machine itself takes.
    const floor = await openLoopLoad(floorTarget, options.ratePerSecond, Math.min(options.seconds, 10), floorServer.pid);
    // And against one that also makes the three round trips of a call reserved in PostgreSQL, doing nothing in them,
    // then only the Redis one, as a call on a quota grant does.
    await openLoopLoad(roundTripTarget, options.ratePerSecond, options.warmupSeconds);
    const roundTrips = await openLoopLoad(roundTripTarget, options.ratePerSecond, Math.min(options.seconds, 10), roundTripFloor.pid);
    const redisOnly = await openLoopLoad({ ...roundTripTarget, path: '/redis-only' }, options.ratePerSecond, Math.min(options.seconds, 10), roundTripFloor.pid);
    const row = (name: string, measured: typeof result) => ({
      target: name,
      'offered req/s': options.ratePerSecond,
      'sustained req/s': Math.round(measured.sustainedPerSecond),
      requests: measured.requests,
      'non-200': measured.failures,
      'p50 ms': measured.p50.toFixed(2),
      'p90 ms': measured.p90.toFixed(2),
      'p99 ms': measured.p99.toFixed(2),
      'p99.9 ms': measured.p999.toFixed(2),
      'max ms': measured.max.toFixed(2),
      'cpu steal %': measured.stealPercent?.toFixed(0) ?? 'n/a',
      'server cpu ms/req': measured.serverCpuMsPerRequest?.toFixed(3) ?? 'n/a',
      'postgres cpu ms/req': measured.postgresCpuMsPerRequest?.toFixed(3) ?? 'n/a',
      'redis cpu ms/req': measured.redisCpuMsPerRequest?.toFixed(3) ?? 'n/a',
      'send lag p99 ms': measured.sendLagP99?.toFixed(2) ?? 'n/a',
      'generator cpu ms/req': measured.generatorCpuMsPerRequest?.toFixed(3) ?? 'n/a',
    });
    table('hot-path', `hot path: ${options.ratePerSecond} req/s offered for ${options.seconds} s, API in its own process, ${result.generator} load generator`, [
      row('metered call', result),
      row('bare node:http (floor)', floor),
      row('floor + Redis + 2 PostgreSQL round trips', roundTrips),
      row('floor + Redis round trip', redisOnly),
    ]);
    goal('hot-path', { figure: `metered call p99 at ${options.ratePerSecond} req/s`, target: '< 2 ms at 1,000 req/s', value: `${result.p99.toFixed(2)} ms`, met: result.p99 < 2 });
    if (inside) {
      console.log(
        `inside the API during the metered run: event loop late by p99 ${inside.loopDelayP99Ms.toFixed(2)} ms (max ${inside.loopDelayMaxMs.toFixed(2)} ms); ` +
          `${inside.gcCount} collections pausing ${inside.gcPauseMs.toFixed(0)} ms in all`,
      );
      table('hot-path', 'steps inside the API during the metered run', Object.entries(inside.steps).map(([step, time]) => ({ step, 'mean ms': time.meanMs.toFixed(2), 'p99 at most ms': time.p99AtMostMs })));
    }
  } finally {
    await stopChild(floorServer);
    await stopChild(roundTripFloor);
    await stopChild(api);
  }
  // The API writes its side of the trace as it stops.
  if (trace) {
    const breakdown = tailBreakdown(trace.generator, trace.api, 0.99);
    rmSync(traceDirectory!, { recursive: true, force: true });
    printTailBreakdown(breakdown, 'metered calls');
  }
}
