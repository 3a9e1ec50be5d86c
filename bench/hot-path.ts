/**
 * The governance hot path at a fixed arrival rate: one request authenticates a ko_ key, attributes
 * a customer, runs the rate-limit layers in Redis, reserves and settles on the wallet in PostgreSQL.
 * The load is open-loop: requests leave on a fixed schedule and latency counts from the scheduled
 * time, so a slow server cannot hide its queueing (no coordinated omission).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import { createCustomer } from '../shared/customers/customers.js';
import type { Config } from '../shared/config.js';
import { createPool } from '../shared/db/pool.js';
import { createLogger } from '../shared/logger.js';
import { freePort, stopChild } from '../scripts/lib/local-services.js';

export interface HotPathOptions {
  databaseUrl: string;
  ratePerSecond: number;
  seconds: number;
  warmupSeconds: number;
}

export async function runHotPathBench(base: Config, options: HotPathOptions): Promise<void> {
  const db = createPool(options.databaseUrl, 2, createLogger({ LOG_LEVEL: 'silent' }, 'bench'));
  const developer = await createDeveloperAccount(db, { email: `hot-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 1_000_000_000 });
  const { plaintext: key } = await createApiKey(db, developer.id, { name: 'hot path', scopes: ['api:chat'] });
  const customer = await createCustomer(db, developer.id, { external_id: 'bench-customer', rpm_limit: 10_000_000, tpm_limit: 2_000_000_000 });
  await db.end();

  const port = await freePort();
  const api = spawn(process.execPath, [...(process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=/tmp/prof'] : []), '--import', 'tsx', 'bench/support/bench-server.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      API_PORT: String(port),
      LOG_LEVEL: 'warn',
      REDIS_KEY_PREFIX: `svc-bench-${process.pid}`,
      EDGE_RPM_LIMIT: '100000000',
      DEVELOPER_RPM_LIMIT: '100000000',
      DEVELOPER_TPM_LIMIT: '2000000000',
    },
  });
  const origin = await listeningOrigin(api.stdout!);
  const pool = new Pool(origin, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });
  const body = JSON.stringify({ max_cost_micros: 2_000, cost_micros: 1_000, tokens_in: 12, tokens_out: 6 });
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'svc-customer': customer.id };

  const send = async (): Promise<number> => {
    const response = await pool.request({ method: 'POST', path: '/v1/_probe/metered', headers, body });
    await response.body.dump();
    return response.statusCode;
  };

  try {
    for (const [label, seconds, record] of [
      ['warm-up', options.warmupSeconds, false],
      ['measured', options.seconds, true],
    ] as const) {
      const result = await openLoop(send, options.ratePerSecond, seconds);
      if (!record) continue;
      const sorted = result.latenciesMs.sort((a, b) => a - b);
      const pick = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(2);
      console.log(`hot path (${label}): ${options.ratePerSecond} req/s offered for ${seconds} s, API in its own process`);
      console.table([
        {
          'offered req/s': options.ratePerSecond,
          'sustained req/s': Math.round(result.completed / result.elapsedSeconds),
          requests: result.completed,
          'non-200': result.failures,
          'p50 ms': pick(0.5),
          'p90 ms': pick(0.9),
          'p99 ms': pick(0.99),
          'p99.9 ms': pick(0.999),
          'max ms': sorted.at(-1)!.toFixed(2),
        },
      ]);
    }
  } finally {
    await pool.close();
    await stopChild(api);
  }
}

/** The server prints `{"listening": url}` once ready; its JSON log lines may come first. */
async function listeningOrigin(stdout: NodeJS.ReadableStream): Promise<string> {
  for await (const line of createInterface({ input: stdout })) {
    const parsed = JSON.parse(line) as { listening?: string };
    if (parsed.listening) {
      stdout.resume(); // keep draining later log lines
      return parsed.listening;
    }
  }
  throw new Error('the bench server exited before listening');
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
