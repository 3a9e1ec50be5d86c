/**
 * Webhook delivery end to end: events committed to the outbox, relayed, signed and POSTed by the
 * real worker process (its own process, as in production) to a local HTTPS receiver.
 *
 * - burst: 10,000 events committed as fast as the bench can (transactions of 100); deliveries per
 *   second from the first commit to the last receipt.
 * - paced: 10,000 events at a fixed arrival rate (default 500/s, one transaction each, open loop);
 *   first-attempt delay from each event's commit to its receipt, p50/p99.
 * Figures are printed, never asserted.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createDeveloperAccount } from '../shared/accounts/accounts.js';
import type { Config } from '../shared/config.js';
import { createPool, type Db } from '../shared/db/pool.js';
import { recordEvent } from '../shared/events/outbox.js';
import { newId } from '../shared/ids.js';
import { createLogger } from '../shared/logger.js';
import { createEndpoint } from '../shared/webhooks/endpoints.js';
import { freePort, startTemporalDevServer, stopChild, type TemporalDevServer } from '../scripts/lib/local-services.js';
import { profileFlags } from './support/node-flags.js';
import { table } from './support/report.js';
import { processCpuSeconds } from './support/process-cpu.js';

export interface WebhookBenchOptions {
  databaseUrl: string;
  events: number;
  ratePerSecond: number;
  /** Endpoints subscribed to every event: each event fans out to this many deliveries. */
  endpoints: number;
}

interface Receipt {
  at: number;
}

export async function runWebhookBench(base: Config, options: WebhookBenchOptions): Promise<void> {
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-webhooks-'));
  const certFile = path.join(work, 'cert.pem');
  const keyFile = path.join(work, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-addext', 'basicConstraints=critical,CA:TRUE'], { stdio: 'ignore' });

  // Receipts by `<event id> <path>`; the first one counts (a retry would be a later one).
  const receipts = new Map<string, Receipt>();
  let received = 0;
  const server = https.createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
    const at = Date.now();
    const key = `${req.headers['x-svc-event-id']} ${req.url}`;
    req.resume();
    req.on('end', () => {
      if (!receipts.has(key)) {
        receipts.set(key, { at });
        received++;
      }
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  let temporal: TemporalDevServer | undefined;
  let worker: ChildProcess | undefined;
  const db = createPool(options.databaseUrl, 16, createLogger({ LOG_LEVEL: 'silent' }, 'bench'));
  try {
    const temporalAddress = process.env.TEMPORAL_ADDRESS
      ? process.env.TEMPORAL_ADDRESS
      : (temporal = await startTemporalDevServer({ port: await freePort(), logFile: path.join(base.dataDir, 'run', 'temporal-bench.log') })).address;

    // Earlier runs' endpoints and other sections' events are not this section's to deliver.
    await db.query(`DELETE FROM webhook_endpoints WHERE description = 'bench'`);
    await db.query('UPDATE outbox_events SET relayed_at = now() WHERE relayed_at IS NULL');

    const developer = await createDeveloperAccount(db, { email: `webhooks-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 0 });
    for (let i = 0; i < options.endpoints; i++) {
      await createEndpoint({ db, config: { WEBHOOK_ALLOW_PRIVATE_HOSTS: true } }, developer.id, { url: `${origin}/bench-${i}`, events: ['customer.created'], description: 'bench' });
    }

    worker = spawn(process.execPath, [...profileFlags('/tmp/prof-webhooks'), '--import', 'tsx', 'workers/main.ts'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        DATABASE_URL: options.databaseUrl,
        TEMPORAL_ADDRESS: temporalAddress,
        TEMPORAL_TASK_QUEUE: `svc-bench-webhooks-${process.pid}`,
        REDIS_KEY_PREFIX: `svc-bench-webhooks-${process.pid}`,
        LOG_LEVEL: 'info',
        WEBHOOK_ALLOW_PRIVATE_HOSTS: 'true',
        WEBHOOK_EXTRA_CA_FILE: certFile,
      },
    });
    await workerPolling(worker);

    const phase = (count: number) => ({ commits: new Map<string, number>(), started: Date.now(), count });

    console.log(`webhooks: ${options.events} events per phase, ${options.endpoints} endpoint(s), worker in its own process (${os.availableParallelism()} cores)\n`);

    // Warm-up: TLS sessions, JIT, pools.
    const warm = phase(200);
    await commitBatches(db, developer.id, warm.count, 20, warm.commits);
    await waitForReceipts(warm.commits, options.endpoints, receipts, 60_000);

    const rows = [];

    const burst = phase(options.events);
    await commitBatches(db, developer.id, burst.count, 100, burst.commits);
    const burstCommitted = Date.now();
    await waitForReceipts(burst.commits, options.endpoints, receipts, 300_000);
    rows.push(summarize(`burst: ${options.events} events committed at once (tx of 100 rows)`, burst.commits, burst.started, burstCommitted, options.endpoints, receipts));
    table('webhooks', 'burst', rows.slice(-1));

    const paced = phase(options.events);
    await commitPaced(db, developer.id, paced.count, options.ratePerSecond, paced.commits);
    const pacedCommitted = Date.now();
    await waitForReceipts(paced.commits, options.endpoints, receipts, 300_000);
    rows.push(summarize(`paced: ${options.ratePerSecond} events/s, one tx each`, paced.commits, paced.started, pacedCommitted, options.endpoints, receipts));
    table('webhooks', 'paced', rows.slice(-1));
    const { rows: outcome } = await db.query(
      `SELECT status, count(*)::int AS deliveries FROM webhook_deliveries WHERE developer_id = $1 GROUP BY status ORDER BY status`,
      [developer.id],
    );
    console.log(`deliveries by status: ${outcome.map((row) => `${row.status} ${row.deliveries}`).join(', ')}; receipts ${received}`);
    // Independent of what else the machine runs: the worker's own CPU per delivery (start-up included).
    const cpuSeconds = processCpuSeconds(worker.pid, false);
    if (cpuSeconds !== undefined) console.log(`worker CPU: ${cpuSeconds.toFixed(1)} s for ${received} deliveries, ${((cpuSeconds * 1_000) / received).toFixed(2)} ms each; load average ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}`);
  } finally {
    if (worker) await stopChild(worker);
    await db.query(`DELETE FROM webhook_endpoints WHERE description = 'bench'`).catch(() => undefined);
    await db.end();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    if (temporal) await stopChild(temporal.process);
    rmSync(work, { recursive: true, force: true });
  }
}

/** Events committed in transactions of `perTransaction` rows (one multi-row INSERT each), four producers at once. */
async function commitBatches(db: Db, developerId: string, count: number, perTransaction: number, commits: Map<string, number>): Promise<void> {
  const batches: number[] = [];
  for (let start = 0; start < count; start += perTransaction) batches.push(Math.min(perTransaction, count - start));
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < batches.length) {
        const ids = Array.from({ length: batches[next++]! }, () => newId('evt_'));
        await db.query(
          `INSERT INTO outbox_events (id, developer_id, type, data) SELECT id, $2, 'customer.created', jsonb_build_object('bench', true, 'n', n)
           FROM unnest($1::text[]) WITH ORDINALITY AS t (id, n)`,
          [ids, developerId],
        );
        const at = Date.now();
        for (const id of ids) commits.set(id, at);
      }
    }),
  );
}

/** Open loop: event i is due at start + i/rate whatever happened before it. */
async function commitPaced(db: Db, developerId: string, count: number, ratePerSecond: number, commits: Map<string, number>): Promise<void> {
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  let failed = 0;
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1_000) / ratePerSecond;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    inFlight.push(
      recordEvent(db, developerId, 'customer.created', { bench: true, i }).then(
        (event) => void commits.set(event.id, Date.now()),
        () => void failed++,
      ),
    );
  }
  await Promise.all(inFlight);
  // A commit that failed (the database could not keep up) is no event; it is reported, not delivered.
  if (failed > 0) console.log(`paced: ${failed} of ${count} commits failed (the producer could not keep the offered rate)`);
}

async function waitForReceipts(commits: Map<string, number>, endpoints: number, receipts: Map<string, Receipt>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let missing = 0;
    for (const id of commits.keys()) for (let e = 0; e < endpoints; e++) if (!receipts.has(`${id} /bench-${e}`)) missing++;
    if (missing === 0) return;
    if (Date.now() > deadline) throw new Error(`${missing} deliveries did not arrive within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function summarize(label: string, commits: Map<string, number>, started: number, committed: number, endpoints: number, receipts: Map<string, Receipt>) {
  const delays: number[] = [];
  let lastReceipt = 0;
  for (const [id, commitAt] of commits) {
    for (let e = 0; e < endpoints; e++) {
      const receipt = receipts.get(`${id} /bench-${e}`)!;
      delays.push(receipt.at - commitAt);
      lastReceipt = Math.max(lastReceipt, receipt.at);
    }
  }
  delays.sort((a, b) => a - b);
  const firstReceipt = Math.min(...[...commits.keys()].flatMap((id) => Array.from({ length: endpoints }, (_, e) => receipts.get(`${id} /bench-${e}`)!.at)));
  const pick = (q: number) => delays[Math.min(delays.length - 1, Math.floor(q * delays.length))]!;
  return {
    phase: label,
    deliveries: delays.length,
    'commit s': ((committed - started) / 1_000).toFixed(1),
    'deliveries/s': Math.round(delays.length / ((lastReceipt - started) / 1_000)),
    'drain deliveries/s': Math.round(delays.length / ((lastReceipt - firstReceipt) / 1_000)),
    'delay p50 ms': pick(0.5),
    'delay p99 ms': pick(0.99),
    'delay max ms': delays.at(-1),
  };
}

/** Resolves on the worker's 'worker polling' line; later lines are drained, warnings and errors echoed. */
function workerPolling(worker: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let ready = false;
    createInterface({ input: worker.stdout! }).on('line', (line) => {
      if (!ready && line.includes('"worker polling"')) {
        ready = true;
        resolve();
      } else if (/"level":(40|50|60)/.test(line)) {
        console.error(line);
      }
    });
    worker.once('exit', (code) => {
      if (!ready) reject(new Error(`the worker exited (code ${code}) before polling`));
    });
  });
}
