/**
 * What the gateway adds to a chat completion: the same non-streaming requests at fixed arrival
 * rates (open loop), once directly against the emulator and once through the gateway with
 * authentication, the rate-limit layers and metering on; and the time to the first streamed byte
 * both ways. Emulator and gateway each run as their own process. A bare reverse proxy (the floor,
 * bench/support/floor-proxy.ts) carries the same load in front of the same emulator: what one more
 * Node hop costs this machine before the gateway does anything.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Pool } from 'undici';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import { createPool } from '../shared/db/pool.js';
import { createLogger } from '../shared/logger.js';
import { freePort, stopChild } from '../scripts/lib/local-services.js';
import { API_NODE_ARGS } from '../scripts/lib/node-args.js';
import { printedJson } from './support/child-output.js';
import { benchApiNodeArgs } from './support/node-flags.js';
import { watchApiMetrics } from './support/api-metrics.js';
import { openLoopLoad, quantile, type LoadTarget } from './support/load.js';
import { printTailBreakdown, tailBreakdown } from './support/tail.js';
import { goal, table } from './support/report.js';

export interface OverheadOptions {
  databaseUrl: string;
  rates: number[];
  seconds: number;
  /** Rates probed, lowest first, for the highest one with p99 added under 5 ms. */
  sweepRates: number[];
  sweepSeconds: number;
  /** Rounds of the streaming first-byte measurement, one request at a time. */
  firstByteRounds: number;
  /** The same first byte under open-loop load: streams a second, and for how long, per target. */
  firstByteRate: number;
  firstByteSeconds: number;
  /** Also trace the gateway's runs at `rates` and print where their slowest 1 % spent their time (bench/support/tail.ts). */
  tail: boolean;
  /** The bench/README.md section the figures go to. */
  section: string;
  /**
   * Measure the gateway as `npm start` runs it (scripts/platform.ts: API, worker, hive, a Temporal
   * dev server and the in-process emulator, default log level) rather than the bench's own gateway
   * process; only the rate limits are raised.
   */
  asStarted?: boolean;
}

const FIRST_BYTE_WARMUP_ROUNDS = 20;


export async function runGatewayOverheadBench(options: OverheadOptions): Promise<void> {
  const db = createPool(options.databaseUrl, 2, createLogger({ LOG_LEVEL: 'silent' }, 'bench'));
  const developer = await createDeveloperAccount(db, { email: `overhead-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 1_000_000_000 });
  const { plaintext: key } = await createApiKey(db, developer.id, { name: 'overhead', scopes: ['api:chat'] });
  await db.end();

  const traceDirectory = options.tail ? mkdtempSync(path.join(tmpdir(), 'gateway-tail-')) : undefined;
  const apiTrace = traceDirectory && path.join(traceDirectory, 'api.txt');
  const { emulator, emulatorUrl, emulatorKey, gateway, gatewayUrl, stopTargets } = options.asStarted
    ? await startLikeNpmStart(options.databaseUrl)
    : await startForBench(options.databaseUrl, apiTrace);
  const floorProxy = spawn(process.execPath, ['--import', 'tsx', 'bench/support/floor-proxy.ts'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, FLOOR_UPSTREAM: emulatorUrl } });
  const floorUrl = (await printedJson(floorProxy, 'listening')).listening as string;

  const direct = new Pool(emulatorUrl, { connections: 256 });
  const proxied = new Pool(floorUrl, { connections: 256 });
  const through = new Pool(gatewayUrl, { connections: 256 });
  const chat = (origin: string, path: string, authorization: string, model: string): LoadTarget => ({
    origin,
    path,
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Measure the gateway' }], max_tokens: 16 }),
  });
  const directCall = chat(emulatorUrl, '/openai/v1/chat/completions', `Bearer ${emulatorKey}`, 'gpt-4o-mini');
  const floorCall = chat(floorUrl, '/openai/v1/chat/completions', `Bearer ${emulatorKey}`, 'gpt-4o-mini');
  const gatewayCall = chat(gatewayUrl, '/v1/chat/completions', `Bearer ${key}`, 'svc:openai/gpt-4o-mini');

  // The generator's side of the trace of each rate's gateway run (BENCH_TAIL=1).
  const generatorTraces = new Map<number, string>();
  try {
    // Warm-up: V8 optimizes a process's hot code only after some thousands of calls. With a few
    // hundred, the first rate measured a gateway still compiling (2.06 ms of CPU a request at
    // 200/s against 0.65 ms at 500/s right after).
    for (const call of [directCall, floorCall, gatewayCall]) await openLoopLoad(call, 500, 4);
    let gatewayRequests = 0;
    let generator = '';
    /**
     * One rate through the targets: what the gateway added to the direct call at the median and
     * at p99, and (with `withFloor`) what the bare proxy added under the same load.
     */
    const measure = async (rate: number, seconds: number, withFloor: boolean, traceFile?: string) => {
      const base = await openLoopLoad(directCall, rate, seconds);
      const floor = withFloor ? await openLoopLoad(floorCall, rate, seconds, floorProxy.pid) : undefined;
      // The gateway sat idle through the runs above, so its payer's quota grant ended: a second at
      // this rate first, as a busy payer would have had (an idle payer's first calls reserve in PostgreSQL).
      await openLoopLoad(gatewayCall, rate, 1);
      const apiFigures = await watchApiMetrics(gatewayUrl);
      const via = await openLoopLoad(gatewayCall, rate, seconds, gateway.pid, traceFile);
      const inside = await apiFigures();
      gatewayRequests += via.requests;
      generator = via.generator;
      const addedP99 = via.p99 - base.p99;
      return {
        sustainedUnder5ms: via.failures === 0 && via.sustainedPerSecond >= rate * 0.98 && addedP99 < 5,
        row: {
          'offered req/s': rate,
          'gateway sustained': Math.round(via.sustainedPerSecond),
          'gateway non-2xx': via.failures,
          'direct p50 ms': base.p50.toFixed(2),
          'direct p99 ms': base.p99.toFixed(2),
          ...(floor && { 'floor added p50 ms': (floor.p50 - base.p50).toFixed(2), 'floor added p99 ms': (floor.p99 - base.p99).toFixed(2) }),
          'added p50 ms': (via.p50 - base.p50).toFixed(2),
          'added p99 ms': addedP99.toFixed(2),
          ...(floor && { 'floor cpu ms/req': floor.serverCpuMsPerRequest?.toFixed(3) ?? 'n/a' }),
          'gateway cpu ms/req': via.serverCpuMsPerRequest?.toFixed(3) ?? 'n/a',
          // Where the gateway's own time went: its event loop running late, and the PostgreSQL steps.
          'loop late p99 ms': inside?.loopDelayP99Ms.toFixed(1) ?? 'n/a',
          // Collections pause the loop: every request arriving or in flight meanwhile waits them out.
          collections: inside?.gcCount ?? 'n/a',
          'gc pause ms': inside?.gcPauseMs.toFixed(0) ?? 'n/a',
          // The whole request inside the gateway, and the part of it spent on the upstream call.
          'request mean ms': inside?.steps.request?.meanMs.toFixed(2) ?? 'n/a',
          'upstream mean ms': inside?.steps.upstream?.meanMs.toFixed(2) ?? 'n/a',
          'reserve mean ms': inside?.steps.reserve?.meanMs.toFixed(2) ?? 'n/a',
          'settle mean ms': inside?.steps.settle?.meanMs.toFixed(2) ?? 'n/a',
          'cpu steal %': via.stealPercent?.toFixed(0) ?? 'n/a',
        },
      };
    };
    const before = await databaseWork(options.databaseUrl);
    const rows = [];
    for (const rate of options.rates) {
      if (traceDirectory) generatorTraces.set(rate, path.join(traceDirectory, `generator-${rate}.txt`));
      rows.push((await measure(rate, options.seconds, true, generatorTraces.get(rate))).row);
    }
    table(options.section, `gateway overhead: non-streaming chat completions, open loop (${generator} load generator), ${options.seconds} s per rate and target`, rows);
    const at500 = rows.find((row) => row['offered req/s'] === 500);
    if (at500) goal(options.section, { figure: 'gateway added p99 at 500 req/s', target: '< 2 ms', value: `${at500['added p99 ms']} ms`, met: Number(at500['added p99 ms']) < 2 });
    const after = await databaseWork(options.databaseUrl);
    console.log(
      `PostgreSQL work per gateway request: ${((after.commits - before.commits) / gatewayRequests).toFixed(2)} commits, ${((after.rowsWritten - before.rowsWritten) / gatewayRequests).toFixed(2)} rows written`,
    );

    // The highest rate the gateway sustains with p99 added under 5 ms, among the sweep's rates.
    const sweep = [];
    let highest: number | undefined;
    for (const rate of options.sweepRates) {
      const measured = await measure(rate, options.sweepSeconds, false);
      sweep.push(measured.row);
      if (measured.sustainedUnder5ms) highest = rate;
    }
    table(options.section, `sweep for the highest rate with p99 added under 5 ms, ${options.sweepSeconds} s per rate and target`, sweep);
    console.log(`highest rate sustained with p99 added under 5 ms: ${highest === undefined ? `none of ${options.sweepRates.join(', ')} req/s` : `${highest} req/s`}`);

    // The same three calls as above, streamed, and timed to their first body byte.
    const streamed = (call: LoadTarget, prompt?: string): LoadTarget => ({
      ...call,
      body: JSON.stringify({ ...JSON.parse(call.body), ...(prompt && { messages: [{ role: 'user', content: prompt }] }), stream: true }),
      firstByte: true,
    });
    const firstByteTargets = [
      { name: 'direct', call: directCall, pool: direct, pid: emulator.pid, times: [] as number[] },
      { name: 'bare proxy (floor)', call: floorCall, pool: proxied, pid: floorProxy.pid, times: [] as number[] },
      { name: 'gateway', call: gatewayCall, pool: through, pid: gateway.pid, times: [] as number[] },
    ];
    const firstByte = async ({ call, pool }: (typeof firstByteTargets)[number], round: number) => {
      const { path, headers, body } = streamed(call, `first byte ${round}`);
      const started = performance.now();
      const response = await pool.request({ method: 'POST', path, headers, body });
      // Read to the end, as a client of the stream does: leaving at the first chunk closed the
      // connection, so every round paid for a new one and the gateway for a cancelled call too.
      let elapsed = Number.NaN;
      for await (const _chunk of response.body) if (Number.isNaN(elapsed)) elapsed = performance.now() - started;
      return elapsed;
    };
    // Time to the first streamed byte, one request at a time. Each round asks the three targets in
    // turn, so whatever the machine does meanwhile falls on all three alike, and the first rounds
    // (a cold payer reserves in PostgreSQL until its quota grant opens) are not counted.
    for (let round = -FIRST_BYTE_WARMUP_ROUNDS; round < options.firstByteRounds; round++) {
      for (const target of firstByteTargets) {
        const elapsed = await firstByte(target, round);
        if (round >= 0) target.times.push(elapsed);
      }
    }
    for (const target of firstByteTargets) target.times.sort((x, y) => x - y);
    const directTimes = firstByteTargets[0]!.times;
    const added = (times: number[], q: number) => (times === directTimes ? '' : (quantile(times, q) - quantile(directTimes, q)).toFixed(2));
    table(
      options.section,
      `streaming time to first byte: ${options.firstByteRounds} rounds of one request to each target in turn`,
      firstByteTargets.map(({ name, times }) => ({
        target: name,
        'p50 ms': quantile(times, 0.5).toFixed(2),
        'p99 ms': quantile(times, 0.99).toFixed(2),
        'added p50 ms': added(times, 0.5),
        'added p99 ms': added(times, 0.99),
      })),
    );
    const firstByteAdded = Number(added(firstByteTargets[2]!.times, 0.5));
    goal(options.section, { figure: 'streamed first byte, added p50', target: '< 1 ms', value: `${firstByteAdded.toFixed(2)} ms`, met: firstByteAdded < 1 });

    // The same first byte under a steady arrival of streams. One request at a time, every process
    // sleeps between calls, and on this VM a process's wake-up costs more the longer it slept
    // (bench/support/wake-latency.ts); the gateway's path has two more of them than the direct
    // call. Under load the processes stay awake, as a gateway with traffic does.
    const underLoad = [];
    for (const { name, call, pid } of firstByteTargets) {
      await openLoopLoad(streamed(call), options.firstByteRate, 2); // warm, and the payer's quota grant open again
      underLoad.push({ name, result: await openLoopLoad(streamed(call), options.firstByteRate, options.firstByteSeconds, pid) });
    }
    const base = underLoad[0]!.result;
    table(
      options.section,
      `streaming time to first byte under load: ${options.firstByteRate} streams a second for ${options.firstByteSeconds} s to each target (open loop, ${base.generator} load generator)`,
      underLoad.map(({ name, result }) => ({
        target: name,
        'sustained req/s': Math.round(result.sustainedPerSecond),
        'non-2xx': result.failures,
        'p50 ms': result.p50.toFixed(2),
        'p99 ms': result.p99.toFixed(2),
        'added p50 ms': result === base ? '' : (result.p50 - base.p50).toFixed(2),
        'added p99 ms': result === base ? '' : (result.p99 - base.p99).toFixed(2),
        'server cpu ms/stream': result.serverCpuMsPerRequest?.toFixed(3) ?? 'n/a',
        'cpu steal %': result.stealPercent?.toFixed(0) ?? 'n/a',
      })),
    );
  } finally {
    await direct.close();
    await proxied.close();
    await through.close();
    await stopChild(floorProxy);
    await stopTargets();
  }
  // The gateway writes its side of the trace as it stops.
  if (traceDirectory) {
    for (const [rate, generatorTrace] of generatorTraces) {
      console.log(`\n${rate} req/s:`);
      printTailBreakdown(tailBreakdown(generatorTrace, apiTrace!, 0.99), 'gateway calls');
    }
    rmSync(traceDirectory, { recursive: true, force: true });
  }
}

/** Commits and rows written in the bench database so far (PostgreSQL's cumulative statistics, flushed first). */
async function databaseWork(databaseUrl: string): Promise<{ commits: number; rowsWritten: number }> {
  await new Promise((resolve) => setTimeout(resolve, 1_500)); // backends flush their statistics about once a second
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ commits: string; written: string }>(
      'SELECT xact_commit AS commits, tup_inserted + tup_updated + tup_deleted AS written FROM pg_stat_database WHERE datname = current_database()',
    );
    return { commits: Number(rows[0]!.commits), rowsWritten: Number(rows[0]!.written) };
  } finally {
    await client.end();
  }
}

/** Limits a load test must not hit: the bench measures the gateway, not its refusals. */
const RAISED_LIMITS = { EDGE_RPM_LIMIT: '100000000', DEVELOPER_RPM_LIMIT: '100000000', DEVELOPER_TPM_LIMIT: '2000000000' };

interface Targets {
  emulator: ChildProcess;
  emulatorUrl: string;
  emulatorKey: string;
  gateway: { pid?: number };
  gatewayUrl: string;
  stopTargets(): Promise<void>;
}

/** The bench's own configuration: the emulator and the gateway each their own process, the gateway at LOG_LEVEL warn with no worker beside it. */
async function startForBench(databaseUrl: string, apiTrace: string | undefined): Promise<Targets> {
  const emulatorPort = await freePort();
  // The emulator stands in for a provider across the network. It runs with the API's V8 flags, so
  // its own full collections (a 20-30 ms stall each, in the direct and the gateway runs alike) add
  // less noise to the difference between them.
  const emulator = spawn(process.execPath, [...API_NODE_ARGS, '--import', 'tsx', 'shared/emulator/main.ts'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, EMULATOR_PORT: String(emulatorPort) } });
  const printed = await printedJson(emulator, 'listening');
  const emulatorKey = printed.api_keys.openai as string;
  const gatewayPort = await freePort();
  // BENCH_PROFILE=1 writes the gateway's CPU profile to /tmp/prof (open it in Chrome DevTools).
  const gateway = spawn(process.execPath, [...benchApiNodeArgs(), '--import', 'tsx', 'bench/support/bench-server.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      API_PORT: String(gatewayPort),
      LOG_LEVEL: 'warn',
      REDIS_KEY_PREFIX: `svc-bench-${process.pid}`,
      ...RAISED_LIMITS,
      OPENAI_API_KEY: emulatorKey,
      OPENAI_BASE_URL: `${printed.listening}/openai/v1`,
      ...(apiTrace && { BENCH_TRACE_FILE: apiTrace }),
    },
  });
  // BENCH_API_STDOUT names a file that gets what the gateway prints (a trace flag's output, say).
  if (process.env.BENCH_API_STDOUT) gateway.stdout!.pipe(createWriteStream(process.env.BENCH_API_STDOUT));
  else gateway.stdout!.resume();
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  await answering(`${gatewayUrl}/v1/compatibility`);
  return {
    emulator,
    emulatorUrl: printed.listening as string,
    emulatorKey,
    gateway,
    gatewayUrl,
    async stopTargets() {
      await stopChild(gateway);
      await stopChild(emulator);
    },
  };
}

/**
 * The platform exactly as `npm start` starts it (scripts/platform.ts start, after the install
 * step): the API with its node flags and the default log level, the worker, the memory hive, a
 * Temporal dev server, and the upstream emulator served from the orchestrator's own process.
 * Only the rate limits are raised, and its ports, data directory, Redis prefix and task queue
 * are its own.
 */
async function startLikeNpmStart(databaseUrl: string): Promise<Targets> {
  const [apiPort, hivePort, temporalPort, temporalUiPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-bench-started-'));
  const { TEMPORAL_ADDRESS: _useOwnServer, ...environment } = process.env;
  const platform = spawn(process.execPath, ['--import', 'tsx', 'scripts/platform.ts', 'start'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      ...environment,
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      API_PORT: String(apiPort),
      HIVE_PORT: String(hivePort),
      TEMPORAL_DEV_PORT: String(temporalPort),
      TEMPORAL_DEV_UI_PORT: String(temporalUiPort),
      REDIS_KEY_PREFIX: `svc-bench-started-${process.pid}`,
      TEMPORAL_TASK_QUEUE: `svc-bench-started-${process.pid}`,
      ...RAISED_LIMITS,
    },
  });
  let printed = '';
  const up = new Promise<void>((resolve, reject) => {
    platform.stderr!.on('data', (chunk: Buffer) => {
      printed += chunk.toString();
      if (printed.includes('The platform is up')) resolve();
    });
    platform.once('exit', (code) => reject(new Error(`npm start's orchestrator exited (${code}) before the platform was up:\n${printed.slice(-2000)}`)));
  });
  await up;
  const emulatorUrl = /upstream emulator at (http:\/\/\S+)/.exec(printed)?.[1];
  if (!emulatorUrl) throw new Error(`npm start served no emulator (a provider key is configured?):\n${printed.slice(-2000)}`);
  const apiPid = childPid(platform.pid!, 'api/main.ts');
  return {
    // The emulator runs in the orchestrator's process, as with npm start.
    emulator: platform,
    emulatorUrl,
    emulatorKey: 'emu-openai-key',
    gateway: { pid: apiPid },
    gatewayUrl: `http://127.0.0.1:${apiPort}`,
    async stopTargets() {
      await stopChild(platform, 60_000);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The pid of `parent`'s child process whose command line names `script`. */
function childPid(parent: number, script: string): number | undefined {
  const children = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return children.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(script));
}

async function answering(url: string): Promise<void> {
  for (let attempt = 0; attempt < 150 && !(await fetch(url).then((r) => r.ok, () => false)); attempt++) await new Promise((resolve) => setTimeout(resolve, 200));
}
