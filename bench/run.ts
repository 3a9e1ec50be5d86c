/**
 * `npm run bench`: the front door's speed, the governance hot path at a fixed arrival rate, and the
 * CPU pool, against the real PostgreSQL and Redis (BENCH_ONLY=front-door|hot-path|gateway|webhooks|batch|cpu|vector-stores runs one).
 * The API runs as its own process (as in production) on a bench database; autocannon loads it
 * from this process over loopback. Figures are printed, never asserted.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import { loadConfig } from '../shared/config.js';
import { prepareDatabase } from '../shared/db/migrate.js';
import { createPool } from '../shared/db/pool.js';
import { createLogger } from '../shared/logger.js';
import { CpuPool } from '../shared/platform/cpu-pool.js';
import { cosineTopK } from '../shared/scoring/cosine.js';
import { freePort, stopChild } from '../scripts/lib/local-services.js';
import { API_NODE_ARGS } from '../scripts/lib/node-args.js';
import { runGatewayOverheadBench } from './gateway-overhead.js';
import { runHotPathBench } from './hot-path.js';
import { runBatchBench } from './batch.js';
import { runWebhookBench } from './webhooks.js';
import { runEmulatorEmbeddingsBench } from './emulator-embeddings.js';
import { runVectorStoreBench } from './vector-stores.js';
import { runAssistantBench } from './assistants.js';
import { runBrainBench } from './brains.js';
import { runPackBench } from './packs.js';
import { runHiveBench } from './hive.js';
import { runFaultBench } from './faults.js';
import { goal, section, SECTION_ORDER, table, writeReport } from './support/report.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(ROOT);
if (existsSync('.env')) process.loadEnvFile('.env');

const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
/** BENCH_ONLY=front-door|hot-path|gateway|webhooks|batch|cpu|vector-stores|assistants|brains|packs|hive|faults runs one section. */
const ONLY = process.env.BENCH_ONLY;
const runs = (section: string) => !ONLY || ONLY === section;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

const base = loadConfig();
const benchDatabase = new URL(base.DATABASE_URL);
benchDatabase.pathname = '/svc_platform_bench';
await prepareDatabase(benchDatabase.toString());

if (runs('front-door')) {
  const db = createPool(benchDatabase.toString(), 2, createLogger({ LOG_LEVEL: 'silent' }, 'bench'));
  const account = await createDeveloperAccount(db, { email: `bench-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 1_000_000 });
  const { plaintext: key } = await createApiKey(db, account.id, { name: 'bench', scopes: ['api:read'] });
  await db.end();

  const port = await freePort();
  const api = spawn(process.execPath, [...API_NODE_ARGS, '--import', 'tsx', 'api/main.ts'], {
    stdio: 'ignore',
    env: {
      ...process.env,
      DATABASE_URL: benchDatabase.toString(),
      API_PORT: String(port),
      LOG_LEVEL: 'warn',
      REDIS_KEY_PREFIX: `svc-bench-${process.pid}`,
      // This section measures the front door, not the limiter: no layer may refuse.
      EDGE_RPM_LIMIT: '100000000',
      DEVELOPER_RPM_LIMIT: '100000000',
    },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/v1/compatibility`);

  section('front-door', 'Front door', 'Requests that end before any metering: what Express, authentication and the error envelope cost.');
  const rows = [];
  rows.push(await load('GET /v1/compatibility (public, no database)', `${url}/v1/compatibility`, {}));
  rows.push(await load('GET /v1/balance (ko_ key verified in PostgreSQL)', `${url}/v1/balance`, { Authorization: `Bearer ${key}` }));
  rows.push(await load('GET /v1/balance, unknown key (401 envelope)', `${url}/v1/balance`, { Authorization: `Bearer ko_${'0'.repeat(64)}` }));
  rows.push(await load('GET /v1/nowhere (404 envelope)', `${url}/v1/nowhere`, {}));
  table('front-door', `front door: ${DURATION_SECONDS} s each, ${CONNECTIONS} connections (autocannon, closed loop), API in its own process`, rows);
  await stopChild(api);
}

if (runs('hot-path')) {
  console.log('');
  section('hot-path', 'Governance hot path', 'A metered call against an upstream that answers at once, at a fixed arrival rate: authentication, attribution, the four rate-limit layers, reservation and settlement. The floors are the same load on bare servers that do only the round trips.');
  await runHotPathBench(base, {
    databaseUrl: benchDatabase.toString(),
    ratePerSecond: Number(process.env.BENCH_RATE ?? 1000),
    seconds: Number(process.env.BENCH_HOT_SECONDS ?? 20),
    warmupSeconds: 5,
    tail: process.env.BENCH_TAIL === '1',
  });
}

/** The load of both gateway-overhead sections (BENCH_GATEWAY_* and BENCH_FIRST_BYTE_* change it). */
const gatewayLoad = {
    databaseUrl: benchDatabase.toString(),
    rates: (process.env.BENCH_GATEWAY_RATES ?? '200,500,1000').split(',').map(Number),
    sweepRates: (process.env.BENCH_GATEWAY_SWEEP ?? '100,200,300,400,500,700,1000').split(',').map(Number),
    sweepSeconds: Number(process.env.BENCH_GATEWAY_SWEEP_SECONDS ?? 5),
    seconds: Number(process.env.BENCH_GATEWAY_SECONDS ?? 10),
    firstByteRounds: Number(process.env.BENCH_FIRST_BYTE_ROUNDS ?? 1000),
    firstByteRate: Number(process.env.BENCH_FIRST_BYTE_RATE ?? 200),
    firstByteSeconds: Number(process.env.BENCH_FIRST_BYTE_SECONDS ?? 10),
};

if (runs('gateway')) {
  console.log('');
  section('gateway', 'Gateway overhead (bench configuration)', 'Non-streaming chat completions straight to the emulator and through the gateway at the same open-loop rates; "added" is the difference. The gateway runs alone with the bench\'s V8 flags and no worker. A 10 s run\'s p99 rests on its slowest 1 % (50 requests at 500 req/s), so on a 2-core VM it moves by a few milliseconds between runs; the sweep\'s rows are a second reading of the same rates.');
  await runGatewayOverheadBench({
    section: 'gateway',
    ...gatewayLoad,
    tail: process.env.BENCH_TAIL === '1',
  });
}

// The same measurement on the platform as `npm start` runs it (its processes and settings, rate
// limits raised): what a user's own deployment adds, next to the bench's own configuration.
if (runs('gateway-as-started')) {
  console.log('');
  section(
    'gateway-as-started',
    'Gateway overhead (as `npm start` runs it)',
    'The same measurement on the platform started by scripts/platform.ts exactly as `npm start` does: the API with its node flags at the default log level, the worker, the memory hive and a Temporal dev server on the same cores, and the emulator served from the orchestrator\'s own process. Only the rate limits are raised. Why it differs from the bench configuration above: (1) CPU per request is higher mostly because of the access log: at the default `info` level the API serializes one JSON line per request on its event loop, and the bench\'s gateway runs at `warn` (`LOG_LEVEL=warn BENCH_ONLY=gateway-as-started npm run bench` brings the CPU per request back to within about a tenth of the bench\'s); (2) the p99 tail at 1,000 req/s is far longer because four more processes (worker, hive, Temporal dev server, and the orchestrator serving the emulator) share the two cores with the API and the load generator, so the API waits for a core; that part does not go away with the log level. Run a production gateway on its own cores with `LOG_LEVEL=warn` or a sampled access log to get the bench configuration\'s figures.',
  );
  await runGatewayOverheadBench({
    section: 'gateway-as-started',
    asStarted: true,
    ...gatewayLoad,
    tail: false,
  });
}

if (runs('webhooks')) {
  console.log('');
  section('webhooks', 'Webhook delivery', 'Events committed to the outbox, relayed by the worker and delivered signed to a local receiver; delay is commit to receipt.');
  await runWebhookBench(base, {
    databaseUrl: benchDatabase.toString(),
    events: Number(process.env.BENCH_WEBHOOK_EVENTS ?? 10_000),
    ratePerSecond: Number(process.env.BENCH_WEBHOOK_RATE ?? 500),
    endpoints: Number(process.env.BENCH_WEBHOOK_ENDPOINTS ?? 1),
  });
}

if (runs('batch')) {
  // Its own Temporal dev server, database and processes (bench/batch.ts).
  console.log('');
  section('batch', 'Batches', 'One batch of chat-completion lines through Temporal, the worker and the emulator, from create to completed.');
  await runBatchBench({
    databaseUrl: base.DATABASE_URL,
    lines: Number(process.env.BENCH_BATCH_LINES ?? 50_000),
    latencyMs: Number(process.env.BENCH_BATCH_LATENCY_MS ?? 20),
    dataDir: base.dataDir,
  });
}

if (runs('cpu')) {
  section('cpu', 'CPU pool', 'Cosine top-10 of one query over 20,000 candidates of 768 dimensions, on the main thread and in the piscina pool.');
  const dims = 768;
  const count = 20_000;
  const candidates = Float32Array.from({ length: dims * count }, (_, i) => Math.sin(i * 12.9898) * 43758.5453 % 1);
  const query = Float32Array.from({ length: dims }, (_, i) => Math.cos(i));
  const mainThread = timeIt(() => cosineTopK({ query, candidates, dims, k: 10 }), 5);
  const pool = new CpuPool(Math.max(1, base.CPU_POOL_THREADS));
  await pool.cosineTopK({ query: query.slice(), candidates: candidates.slice(0, dims), dims, k: 1 }); // thread warm-up
  const poolRuns: number[] = [];
  for (let i = 0; i < 5; i++) {
    const copy = candidates.slice();
    const started = performance.now();
    await pool.cosineTopK({ query: query.slice(), candidates: copy, dims, k: 10 });
    poolRuns.push(performance.now() - started);
  }
  table('cpu', 'cosine top-10 of one query over 20,000 candidates x 768 dimensions', [
    { where: 'main thread', median_ms: median(mainThread).toFixed(1), candidates_per_second: Math.round(count / (median(mainThread) / 1000)) },
    { where: `CPU pool (${pool.threads} thread), array transferred`, median_ms: median(poolRuns).toFixed(1), candidates_per_second: Math.round(count / (median(poolRuns) / 1000)) },
  ]);
  await pool.close();
}

if (runs('emulator-embeddings')) {
  section('emulator-embeddings', 'Emulator embeddings', 'The upstream emulator\'s feature-hashed embeddings (shared/emulator/embeddings.ts), computed in this process: the largest embeddings call, 2,048 inputs of 1,000 characters.');
  const { rows, slowestMs } = runEmulatorEmbeddingsBench({ inputs: 2_048, characters: 1_000, rounds: 5 });
  table('emulator-embeddings', '2,048 inputs of 1,000 characters, median of 5 rounds', rows);
  goal('emulator-embeddings', { figure: 'slowest model, median', target: 'well under 1 s', value: `${slowestMs.toFixed(0)} ms`, met: slowestMs < 500 });
}

if (runs('vector-stores')) {
  console.log('');
  section(
    'vector-stores',
    'Vector stores',
    'Search and ingest of vector stores (issue 24). Search: the vector part of a search (nearestByVector, without the query\'s embedding call) in a plaintext store (pgvector HNSW, searched with the hnsw.ef_search that search.ts sets from VECTOR_STORE_HNSW_EF_SEARCH, 300 by default), a sealed store scanned exactly (flat) and a sealed store with IVF lists, all holding the same chunks. Their vectors are the emulator\'s embeddings of synthetic texts on 48 topics, written straight into the stores\' partitions (indexes built after the load, then VACUUM ANALYZE, as autovacuum would); queries are other texts of the same topics, run one at a time. Recall@10 is measured against an exact cosine top 10 computed in the bench; the corpus table shows how close the exact neighbours lie (at 100,000 chunks the 10th and the 20th nearest are within 0.01 of cosine), so the chunks an approximate index returns in place of those it misses are nearly as similar. HNSW index scans counts the searches PostgreSQL ran through the index rather than by an exact scan of the table. A sealed store\'s first query includes opening its vectors, which the process then keeps; its scans run on the CPU pool (CPU_POOL_THREADS, one thread a core by default), a scan of 20,000 rows or more split across the threads. Ingest: text files attached to a new plaintext store and taken through the BullMQ stages (consumers in the bench\'s process, the emulator in its own), three rounds and their median. BENCH_VS_CHUNKS (default 100000), BENCH_VS_QUERIES, BENCH_VS_INGEST_FILES, BENCH_VS_INGEST_KB and BENCH_VS_INGEST_ROUNDS change the sizes.',
  );
  await runVectorStoreBench({
    databaseUrl: benchDatabase.toString(),
    chunks: Number(process.env.BENCH_VS_CHUNKS ?? 100_000),
    queries: Number(process.env.BENCH_VS_QUERIES ?? 200),
    warmup: 20,
    storeSeconds: Number(process.env.BENCH_VS_STORE_SECONDS ?? 120),
    ingestFiles: Number(process.env.BENCH_VS_INGEST_FILES ?? 20),
    ingestFileBytes: Number(process.env.BENCH_VS_INGEST_KB ?? 100) * 1000,
    ingestRounds: Number(process.env.BENCH_VS_INGEST_ROUNDS ?? 3),
  });
}

if (runs('assistants')) {
  console.log('');
  section(
    'assistants',
    'Assistant runs and conversation turns',
    'Issue 25. In the bench\'s process against a Temporal dev server of its own (the run workflows and their activities on an in-process worker) and the upstream emulator answering every chat call after 20 ms. Runs: created many at a time for throughput, then one at a time for what a run itself adds, each followed on its event stream to thread.run.completed; added latency is that time less the 20 ms upstream. Turns: each conversation turn (lock, history, chat call, reply) beside a plain chat completion of the same history through the same metering. BENCH_RUNS, BENCH_RUN_CONCURRENCY, BENCH_RUNS_ALONE and BENCH_TURNS change the sizes.',
  );
  await runAssistantBench({
    databaseUrl: benchDatabase.toString(),
    runs: Number(process.env.BENCH_RUNS ?? 1_000),
    concurrency: Number(process.env.BENCH_RUN_CONCURRENCY ?? 16),
    aloneRuns: Number(process.env.BENCH_RUNS_ALONE ?? 200),
    turns: Number(process.env.BENCH_TURNS ?? 1_000),
    latencyMs: 20,
  });
}

if (runs('brains')) {
  console.log('');
  section('brains', 'Brains', 'Recall over a brain of one-chunk entries (1,536 dimensions): latency of the whole recall call with and without explain, plaintext (HNSW candidates) and strict (sealed vectors opened once per process, scored in the CPU pool), with recall@10 of the composite ranking against exact scoring of every entry; entry writes; and what ambient recall adds to a chat completion.');
  await runBrainBench({
    databaseUrl: benchDatabase.toString(),
    sizes: (process.env.BENCH_BRAIN_SIZES ?? '10000,100000').split(',').map(Number),
    queries: Number(process.env.BENCH_BRAIN_QUERIES ?? 200),
    warmup: 20,
    writes: Number(process.env.BENCH_BRAIN_WRITES ?? 500),
    writeConcurrency: 8,
    ambientCalls: Number(process.env.BENCH_BRAIN_AMBIENT_CALLS ?? 200),
  });
}

if (runs('packs')) {
  console.log('');
  section(
    'packs',
    'Packs',
    'Issue 28. Publish of a brain of one-chunk entries (1,536 dimensions, the emulator\'s embeddings of the corpus the brains bench uses, written straight into the tables) until its version is ready, with its steps; a materialize mount of that version into an empty plaintext and an empty standard (sealed) brain of the same account until the mount is ready; and recall (top_k 8) of a plaintext brain of as many native entries with a reference mount of the version, beside the same brain\'s recall before the mount; then recall merged as the issue shapes it: a plaintext brain of BENCH_PACK_SHAPED_SHARE (20,000) native entries with three materialize mounts and one reference mount of versions of as many entries, 100,000 rows in all (four more source brains published, their versions imported into the brain one after another, so its graph takes them by insertion). In the bench\'s process against a Temporal dev server of its own, the workflows and the platform\'s activities on a Temporal worker in this process, the emulator in its own process. On a 2-core VM shared with whatever else runs, figures move between runs. BENCH_PACK_ENTRIES, BENCH_PACK_SHAPED_SHARE (0 skips the shaped recall), BENCH_PACK_QUERIES and BENCH_PACK_CONSUMERS change the sizes.',
  );
  await runPackBench({
    databaseUrl: benchDatabase.toString(),
    entries: Number(process.env.BENCH_PACK_ENTRIES ?? 10_000),
    shapedShare: Number(process.env.BENCH_PACK_SHAPED_SHARE ?? 20_000),
    queries: Number(process.env.BENCH_PACK_QUERIES ?? 200),
    warmup: 20,
  });
}

if (runs('hive')) {
  console.log('');
  section(
    'hive',
    'Memory hive',
    'Issue 29. Recall over HTTP by a person whose grant reaches a tenth of an organisation\'s memories and nodes (ten projects, the person a member of one), with its SQL alone (rankedHits, its text and meaning statements side by side, in the bench\'s process, the query\'s vector given) beside it; and remember through the API, several at a time. The hive runs as its own process (api/hive/main.ts) on the bench database, the emulator in another embedding the queries. The organisation, nodes and person are made through the API; the memories are written straight into hive.memories with the vectors the worker would store (the emulator\'s embeddings of title and body), short notes on a few dozen made-up topics, each node keeping mostly to one topic; queries are two to four words of a memory the person reaches (seven in ten) or of a topic. Everything a run made is deleted after it. BENCH_HIVE_MEMORIES, BENCH_HIVE_NODES, BENCH_HIVE_QUERIES, BENCH_HIVE_WRITES and BENCH_HIVE_CONCURRENCY change the sizes.',
  );
  await runHiveBench({
    databaseUrl: benchDatabase.toString(),
    memories: Number(process.env.BENCH_HIVE_MEMORIES ?? 100_000),
    nodes: Number(process.env.BENCH_HIVE_NODES ?? 1_000),
    queries: Number(process.env.BENCH_HIVE_QUERIES ?? 200),
    warmup: 20,
    writes: Number(process.env.BENCH_HIVE_WRITES ?? 5_000),
    writeConcurrency: Number(process.env.BENCH_HIVE_CONCURRENCY ?? 16),
  });
}

// Only a whole run or one named section rewrites the page; figures of the sections that did not run stay.
if (runs('faults')) {
  console.log('');
  section(
    'faults',
    'Faults survived',
    'Issue 56. The fault suite\'s scenario (test/faults/) measured: the platform as `npm start` runs it (scripts/platform.ts supervising worker, API, hive and relay) on a PostgreSQL, Redis and Temporal dev server of its own, the emulator as every provider; a caller sends a chat call every 100 ms throughout; before each fault a vector-store ingest of 20 files, an assistant run, a learn pass, a pack mount and a hive erasure are started. PostgreSQL and Redis stay away 8 s; Redis comes back empty.',
  );
  await runFaultBench();
}

writeReport(path.join(ROOT, 'bench/README.md'), SECTION_ORDER);

async function load(name: string, target: string, headers: Record<string, string>) {
  const result = await autocannon({ url: target, headers, connections: CONNECTIONS, duration: DURATION_SECONDS });
  return {
    case: name,
    'req/s (mean)': Math.round(result.requests.average),
    'p50 ms': result.latency.p50,
    'p99 ms': result.latency.p99,
    errors: result.errors + result.timeouts,
    statuses: Object.entries(result.statusCodeStats ?? {}).map(([status, { count }]) => `${status}:${count}`).join(' '),
  };
}

async function waitFor(target: string): Promise<void> {
  for (let attempt = 0; attempt < 150; attempt++) {
    if (await fetch(target).then((response) => response.ok, () => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${target} did not answer`);
}

function timeIt(work: () => unknown, runs: number): number[] {
  work();
  return Array.from({ length: runs }, () => {
    const started = performance.now();
    work();
    return performance.now() - started;
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
