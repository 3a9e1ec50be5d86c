/**
 * `npm start` and `npm test` after scripts/ensure-deps.sh has installed what was missing:
 * runs the Temporal dev server unless TEMPORAL_ADDRESS names one, creates and migrates the
 * database, then starts the API, the worker and the memory hive (start) or runs vitest (test).
 * Ctrl-C (or SIGTERM) stops exactly what this command started.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateClientTokenJwk } from '../shared/client-tokens/keys.js';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { loadConfig, managesTemporalDevServer, type Config } from '../shared/config.js';
import { providerSettingsFromEnv, type ServiceAccountKey } from '../shared/providers/settings.js';
import { createFullEmulator } from '../shared/emulator/emulator.js';
import { emulatorProviderEnv } from '../shared/emulator/provider-env.js';
import { prepareDatabase } from '../shared/db/migrate.js';
import { API_NODE_ARGS, WORKER_NODE_ARGS } from './lib/node-args.js';
import {
  freePort,
  isPortOpen,
  startStripeMock,
  startTemporalDevServer,
  stopChild,
  stopRecordedServices,
  takeRecordedServices,
  waitForTemporal,
} from './lib/local-services.js';
import { Supervised } from './lib/supervisor.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(ROOT);
if (existsSync('.env')) process.loadEnvFile('.env');

const say = (message: string) => process.stderr.write(`platform: ${message}\n`);
/** How long a start waits for every health check to be green (waitForGreenHealth), and when it says what it waits for. */
const GREEN_HEALTH_WAIT_MS = 180_000;
const SAY_WAITING_AFTER_MS = 15_000;
/** What a relay that will not start usually means. */
const RELAY_HINT = "If its output says SealError, the hive's certificate authority in PostgreSQL was sealed under another master key than this one (VECTOR_STORE_MASTER_KEY, or .data/secrets/vector-store-master.key when unset): start with the key that sealed it.";
const mode = process.argv[2];
if (mode !== 'start' && mode !== 'test') {
  say('usage: platform.ts start|test [vitest arguments]');
  process.exit(2);
}

const config = loadConfig();
const recordedServices = takeRecordedServices(config.dataDir);
/** What this command started, in start order: each is stopped in reverse order. */
const children: Array<{ stop(): Promise<void> }> = [];
let stopping: Promise<void> | undefined;

function stopAll(exitCode: number): Promise<void> {
  stopping ??= (async () => {
    // Reverse start order: the hive, API and worker first, Temporal next, then services ensure-deps started.
    for (const child of [...children].reverse()) await child.stop();
    await stopRecordedServices(recordedServices, say);
    process.exit(exitCode);
  })();
  return stopping;
}
process.on('SIGINT', () => void stopAll(130));
process.on('SIGTERM', () => void stopAll(143));

try {
  const temporalAddress = await ensureTemporal(config);
  if (mode === 'start') {
    const { created, applied } = await prepareDatabase(config.DATABASE_URL);
    say(`database ${created ? 'created' : 'present'}; ${applied.length ? `applied ${applied.join(', ')}` : 'migrations up to date'}`);
    await startPlatform(temporalAddress);
  } else {
    // Tests migrate a template database of their own and never touch DATABASE_URL's database.
    await runTests(temporalAddress);
  }
} catch (error) {
  say(`failed: ${error instanceof Error ? error.message : String(error)}`);
  await stopAll(1);
}

async function ensureTemporal(config: Config): Promise<string> {
  if (!managesTemporalDevServer(config)) {
    await waitForTemporal(config.temporalAddress, 30_000);
    say(`using Temporal at ${config.temporalAddress}`);
    return config.temporalAddress;
  }
  if (mode === 'test') {
    // Tests get their own in-memory server on free ports, so a running `npm start` is never touched.
    const server = await startTemporalDevServer({ port: await freePort(), logFile: path.join(config.dataDir, 'run', 'temporal-test.log') });
    children.push({ stop: () => stopChild(server.process) });
    say(`Temporal test server on ${server.address}`);
    return server.address;
  }
  if (await isPortOpen(config.TEMPORAL_DEV_PORT)) {
    await waitForTemporal(config.temporalAddress, 30_000);
    say(`Temporal already running on ${config.temporalAddress}; using it`);
    return config.temporalAddress;
  }
  const address = `127.0.0.1:${config.TEMPORAL_DEV_PORT}`;
  const logFile = path.join(config.dataDir, 'run', 'temporal.log');
  const temporal = supervise('the Temporal dev server', async () =>
    (await startTemporalDevServer({ port: config.TEMPORAL_DEV_PORT, uiPort: config.TEMPORAL_DEV_UI_PORT, dbFile: path.join(config.dataDir, 'temporal', 'temporal.db'), logFile })).process,
  `See ${logFile}.`);
  if (await temporal.run()) say(`Temporal dev server started on ${address} (history kept in ${path.join(config.DATA_DIR, 'temporal', 'temporal.db')})`);
  return address;
}

/**
 * A child of `npm start` kept running by scripts/lib/supervisor.ts: restarted with backoff when
 * it exits, stopped (in reverse start order) with the platform.
 */
function supervise(name: string, start: () => Promise<ChildProcess>, hint?: string): Supervised {
  const supervised = new Supervised(name, start, say, { ...(hint && { hint }) });
  children.push(supervised);
  return supervised;
}

/** A Node process of the platform, supervised; its output is this command's. */
function spawnNode(name: string, script: string, env: NodeJS.ProcessEnv, nodeArgs: string[] = [], hint?: string): Promise<boolean> {
  return supervise(name, async () => spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], { stdio: 'inherit', env }), hint).run();
}


async function startPlatform(temporalAddress: string): Promise<void> {
  const env = { ...process.env, TEMPORAL_ADDRESS: temporalAddress, CLIENT_TOKEN_SIGNING_KEYS: localClientTokenKeys(), ...(await upstreamsOrEmulator()), ...(await stripeOrMock()) };
  await spawnNode('the worker', 'workers/main.ts', env, WORKER_NODE_ARGS);
  await spawnNode('the API', 'api/main.ts', env, API_NODE_ARGS);
  await spawnNode('the memory hive', 'api/hive/main.ts', env);
  await spawnNode('the hive relay', 'api/hive/relay/main.ts', env, [], RELAY_HINT);
  const health = await waitForGreenHealth(`${config.publicBaseUrl}/v1/health`);
  // The hive and its relay serve beside the gateway, not before it: one that does not come up is said, and retried, while the rest serves.
  await waitForHive(`${config.hiveBaseUrl}/v1/health`).catch((error: Error) => say(`${error.message}; it is restarted with backoff while the gateway serves`));
  await waitForRelay(config.HIVE_RELAY_PORT, config.HIVE_RELAY_HOST).catch((error: Error) => say(`${error.message}; it is restarted with backoff while the rest serves. ${RELAY_HINT}`));
  const lines = [
    '',
    health.status === 'ok'
      ? 'The platform is up. Ctrl-C stops everything this command started.'
      : `The platform is up but degraded (${health.failing.join(', ')}); see /v1/health. Ctrl-C stops everything this command started.`,
    `  Gateway API      ${config.publicBaseUrl}/v1`,
    `  Health           ${config.publicBaseUrl}/v1/health`,
    `  Metrics          ${config.publicBaseUrl}/metrics`,
    `  Memory hive      ${config.hiveBaseUrl}/v1`,
    `  Hive health      ${config.hiveBaseUrl}/v1/health`,
    `  Hive relay       ${config.hiveRelayUrl} (mutual TLS, for enrolled machines)`,
    `  Temporal Web UI  ${config.temporalUiUrl}`,
    '  Operator CLI     npm run admin -- help',
    '',
  ];
  process.stderr.write(`${lines.join('\n')}\n`);
}

/**
 * With no provider credentials configured, every provider is pointed at the upstream emulator,
 * served from this process, so a new user can try every endpoint at once. Any configured provider
 * turns this off: then only real providers are used.
 */
async function upstreamsOrEmulator(): Promise<Record<string, string>> {
  const configured = providerSettingsFromEnv(process.env, (file) => JSON.parse(readFileSync(file, 'utf8')) as ServiceAccountKey);
  if (configured.size > 0) {
    say(`upstream providers configured: ${[...configured.keys()].join(', ')}`);
    return {};
  }
  const emulator = createFullEmulator({ latencyMs: 0 });
  const server = await listen(emulator.app, 0, '127.0.0.1');
  const url = serverUrl(server);
  mkdirSync(config.dataDir, { recursive: true });
  say(`no provider key configured: every provider is served by the upstream emulator at ${url} (deterministic answers, not real models)`);
  return emulatorProviderEnv(url, emulator.credentials, config.dataDir);
}

/**
 * With no Stripe configured (neither HIVE_STRIPE_SECRET_KEY nor HIVE_STRIPE_API_BASE), the hive's
 * card top-ups go to stripe-mock on HIVE_STRIPE_MOCK_PORT, run by this command (or one already
 * listening there), with a test key it accepts: a developer can start a checkout on this machine.
 */
async function stripeOrMock(): Promise<Record<string, string>> {
  if (config.HIVE_STRIPE_SECRET_KEY || config.HIVE_STRIPE_API_BASE) return {};
  const port = config.HIVE_STRIPE_MOCK_PORT;
  const apiBase = (await isPortOpen(port))
    ? `http://127.0.0.1:${port}`
    : await supervise('stripe-mock', async () => (await startStripeMock({ port, logFile: path.join(config.dataDir, 'run', 'stripe-mock.log') })).process)
        .run()
        .then(() => `http://127.0.0.1:${port}`);
  say(`no Stripe key configured: the hive's card top-ups go to stripe-mock at ${apiBase} (nothing is charged)`);
  return { HIVE_STRIPE_API_BASE: apiBase, HIVE_STRIPE_SECRET_KEY: 'sk_test_stripeMock' };
}

/**
 * Client tokens must survive a restart of `npm start`: without configured keys, one signing key
 * is made once and kept in the data directory (production configures CLIENT_TOKEN_SIGNING_KEYS).
 */
function localClientTokenKeys(): string {
  if (process.env.CLIENT_TOKEN_SIGNING_KEYS) return process.env.CLIENT_TOKEN_SIGNING_KEYS;
  const file = path.join(config.dataDir, 'client-token-keys.json');
  if (!existsSync(file)) {
    mkdirSync(config.dataDir, { recursive: true });
    writeFileSync(file, JSON.stringify([generateClientTokenJwk('local-1')]), { mode: 0o600 });
    say(`made a client-token signing key for this machine in ${path.join(config.DATA_DIR, 'client-token-keys.json')}`);
  }
  return readFileSync(file, 'utf8');
}

/**
 * Waits until every check is green, at most three minutes. The worker polls once its workflow
 * bundle is built: on a first start, with every process compiling its code at once, that took 70 s
 * on a 2-core machine, and a minute's wait called such a start degraded. A wait past 15 s says
 * what it waits for.
 */
async function waitForGreenHealth(url: string): Promise<{ status: string; failing: string[] }> {
  const started = Date.now();
  let last: { status: string; failing: string[] } | undefined;
  let told = false;
  while (Date.now() - started < GREEN_HEALTH_WAIT_MS && !stopping) {
    // 503 (PostgreSQL or Redis away) carries the same report: read it to say what is waited for.
    const report = (await fetch(url).then((response) => (response.headers.get('content-type')?.includes('json') ? response.json() : undefined), () => undefined)) as
      | { status: string; checks: Record<string, { ok: boolean }> }
      | undefined;
    if (report) {
      last = { status: report.status, failing: Object.entries(report.checks).filter(([, check]) => !check.ok).map(([name]) => name) };
      if (report.status === 'ok') return last;
    }
    if (!told && Date.now() - started > SAY_WAITING_AFTER_MS) {
      told = true;
      const why = last?.failing.includes('worker') ? " (a first start builds the worker's workflow bundle)" : '';
      say(last ? `waiting for ${last.failing.join(', ')}${why}` : `waiting for the API to answer at ${url}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (!last) throw new Error(`the API did not answer at ${url} within ${GREEN_HEALTH_WAIT_MS / 1000} s`);
  return last;
}

/** Waits until the memory hive answers its health with 200 (it serves once the database answers), at most a minute. */
async function waitForHive(url: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && !stopping) {
    if (await fetch(url).then((response) => response.ok, () => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (!stopping) throw new Error(`the memory hive did not answer at ${url} within 60 s`);
}

/** Waits until the hive's relay accepts connections (it serves once it holds its certificate from the hive's CA), at most a minute. */
async function waitForRelay(port: number, host: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  const target = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  while (Date.now() < deadline && !stopping) {
    if (await isPortOpen(port, target)) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (!stopping) throw new Error(`the hive relay did not listen on ${target}:${port} within 60 s`);
}

async function runTests(temporalAddress: string): Promise<void> {
  const summaryFile = path.join(config.dataDir, 'run', 'vitest-summary.json');
  rmSync(summaryFile, { force: true });
  const vitest = spawn(
    process.execPath,
    [
      path.join('node_modules', 'vitest', 'vitest.mjs'),
      'run',
      '--config',
      'test/vitest.config.ts',
      '--reporter=default',
      '--reporter=json',
      `--outputFile.json=${summaryFile}`,
      ...process.argv.slice(3),
    ],
    { stdio: 'inherit', env: { ...process.env, TEMPORAL_ADDRESS: temporalAddress, NODE_ENV: 'test' } },
  );
  const code = await new Promise<number>((resolve) => vitest.once('exit', (exitCode) => resolve(exitCode ?? 1)));
  printClosingLine(summaryFile);
  await stopAll(code);
}

/** One plain `N passed, N failed` line, the closing line any CI can read whatever the runner. */
function printClosingLine(summaryFile: string): void {
  if (!existsSync(summaryFile)) return;
  const summary = JSON.parse(readFileSync(summaryFile, 'utf8')) as { numPassedTests: number; numFailedTests: number; numPendingTests: number; numTodoTests: number };
  process.stdout.write(`\ntests: ${summary.numPassedTests} passed, ${summary.numFailedTests} failed, ${summary.numPendingTests + summary.numTodoTests} skipped\n`);
}
