/**
 * Packs (issue 28's targets): publish of a brain of N one-chunk entries (1,536 dimensions) until
 * its version is ready (the gates run in the call; above 1,000 entries packBuildWorkflow copies the
 * brain, then indexes a plaintext version with HNSW); a materialize mount of that version into
 * other brains of the same account, from createMount until the mount is ready (the import is
 * packMaterializeWorkflow), into a plaintext and a sealed (standard) consumer; and recall of a
 * brain of N native entries merged with a reference mount of the version, beside the same brain's
 * recall before the mount; then recall as issue 28 shapes it, one reference and three materialize
 * mounts of M-entry versions on a brain of M native entries (5M rows in all). In the bench's process against a Temporal dev server of its own, with
 * the workflows and the platform's activities on a Temporal worker in this process (as the
 * assistants bench runs its workflows) and the emulator in its own process embedding the queries.
 * Where the time goes: each workflow's steps from its history, the gates timed again alone, the
 * bench database's sessions sampled while publish and each import run, and how a merged recall
 * reads the version (PostgreSQL's scan counters of its partition). Figures are printed, never
 * asserted. BENCH_PACK_ENTRIES, BENCH_PACK_SHAPED_SHARE (M, 0 skips it), BENCH_PACK_QUERIES and
 * BENCH_PACK_CONSUMERS (none,standard) change the sizes.
 *
 * The brains are filled straight through their tables (bench/support/brain-load.ts): the published
 * brain holds corpus rows 0..N-1, the recall brain rows N..2N-1 (other ids and texts, so no native
 * entry is a twin of a pack row and the two sources compete on similarity alone).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createDeveloperAccount } from '../shared/accounts/accounts.js';
import { createBrain } from '../shared/brains/brains.js';
import * as mountRepo from '../shared/brains/mount-repository.js';
import { createMount } from '../shared/brains/mounts.js';
import * as packRepo from '../shared/brains/pack-repository.js';
import { publish } from '../shared/brains/packs.js';
import { recall } from '../shared/brains/recall.js';
import * as repo from '../shared/brains/repository.js';
import { createGatewayServices } from '../shared/composition/gateway.js';
import { loadConfig } from '../shared/config.js';
import type { Db, Queryable } from '../shared/db/pool.js';
import { freePort, startTemporalDevServer, stopChild } from '../scripts/lib/local-services.js';
import { bundleWorkflows, createTemporalWorker } from '../workers/temporal-worker.js';
import { loadBrain } from './support/brain-load.js';
import { makeCorpus } from './support/corpus.js';
import { startEmulatorProcess } from './support/emulator-process.js';
import { keyedCall, meteredWhere, warmUntilGranted } from './support/keyed-call.js';
import { goal, table, type Row } from './support/report.js';
import { sampleStatements, topStatements } from './support/statement-sampler.js';
import { latencies, timed } from './support/timing.js';
import { workflowMarks } from './support/workflow-marks.js';

const SECTION = 'packs';
const MODEL = 'text-embedding-3-small';
const DIMS = 1536;
/** The secret scan's batch in publish (shared/brains/packs.ts SCAN_BATCH), for timing the scan alone. */
const SCAN_BATCH = 256;
const WHERE = 'workflows on a Temporal worker in the bench\'s process, its own dev server';

const CONSUMERS = ['none', 'standard'] as const;
export type PackConsumer = (typeof CONSUMERS)[number];

function consumersFromEnv(): PackConsumer[] {
  const named = (process.env.BENCH_PACK_CONSUMERS ?? CONSUMERS.join(',')).split(',').map((consumer) => consumer.trim());
  const unknown = named.filter((consumer) => !(CONSUMERS as readonly string[]).includes(consumer));
  if (unknown.length > 0) throw new Error(`BENCH_PACK_CONSUMERS: unknown encryption ${unknown.join(', ')} (consumers: ${CONSUMERS.join(', ')})`);
  return named as PackConsumer[];
}

export interface PackBenchOptions {
  databaseUrl: string;
  /** Entries of the published brain, and native entries of the recall brain. */
  entries: number;
  queries: number;
  warmup: number;
  /** Encryptions of the brains the version is materialized into, each its own brain; BENCH_PACK_CONSUMERS (comma-separated) or both by default. */
  consumers?: PackConsumer[];
  /** Entries of each store in issue 28's merged recall (native, three materialize mounts, one reference mount); 0 skips it. */
  shapedShare: number;
}

export async function runPackBench(options: PackBenchOptions): Promise<void> {
  const consumers = options.consumers ?? consumersFromEnv();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-packs-'));
  const temporal = await startTemporalDevServer({ port: await freePort(), logFile: path.join(dataDir, 'temporal.log') });
  const { child: emulator, providerEnv } = await startEmulatorProcess(0);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: `svc-bench-packs-${process.pid}`,
    REDIS_KEY_PREFIX: `svc-bench-packs-${process.pid}`,
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    DEVELOPER_RPM_LIMIT: '100000000',
    DEVELOPER_TPM_LIMIT: '1000000000',
    SVC_BRAIN_PACKS_ENABLED: 'true',
    ...providerEnv,
  });
  const platform = createGatewayServices(config, 'bench-packs');
  await platform.ready;
  const { worker, connection } = await createTemporalWorker(platform, { bundle: await bundleWorkflows() });
  const running = worker.run();
  const client = platform.temporal.client;
  const brainIds: string[] = [];
  const packIds: string[] = [];
  const at = `${options.entries.toLocaleString('en-US')} entries`;
  try {
    const developer = await createDeveloperAccount(platform.db, { email: `packs-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 10_000_000_000 });
    // Recalls and writes are timed as a request with a developer key meters them (its payer's quota grant).
    const call = await keyedCall(platform, developer.id, `bench_packs_${process.pid}`);
    const corpusStarted = performance.now();
    const corpus = makeCorpus(2 * options.entries, options.warmup + options.queries, { groupSize: 1_000, model: MODEL, dims: DIMS });
    console.log(`  ${2 * options.entries} entries and ${corpus.queries.length} queries embedded by the emulator's function in ${((performance.now() - corpusStarted) / 1000).toFixed(1)} s`);
    const now = Date.now();
    const brain = async (name: string, encryption: 'none' | 'standard') => {
      const created = await createBrain(platform, developer.id, { name, encryption });
      brainIds.push(created.id);
      return created.id;
    };

    // ---- publish ----
    const sourceId = await brain('bench packs source', 'none');
    const source = await loadBrain(platform, developer.id, sourceId, corpus, options.entries, now);
    console.log(`  source brain, ${at}: loaded in ${source.loadSeconds.toFixed(1)} s, HNSW built in ${source.indexSeconds!.toFixed(1)} s`);
    const publishLoad = loadAverage();
    const publishSampler = sampleStatements(platform.db);
    const publishStarted = performance.now();
    const published = await publish(platform, developer.id, sourceId, { notes: 'bench' });
    const returnedMs = performance.now() - publishStarted;
    packIds.push(published.pack_id);
    const ready = await versionReady(platform.db, published.id);
    const readyMs = performance.now() - publishStarted;
    const buildWorkflow = `pack-build-${published.id}`;
    const viaWorkflow = published.status === 'building';
    if (viaWorkflow) await client.workflow.getHandle(buildWorkflow).result();
    const indexedMs = performance.now() - publishStarted;
    const publishStatements = await publishSampler.stop();
    console.log(`  publish: returned in ${(returnedMs / 1000).toFixed(2)} s, ready at ${(readyMs / 1000).toFixed(2)} s, index built at ${(indexedMs / 1000).toFixed(2)} s`);

    // The gates again, each alone, to split the call: the size gate's counts, and secretlint over the same texts in the CPU pool.
    const sizeGate = await timed(() => packRepo.snapshotSize(platform.db, sourceId, source.brain.active_space, new Date()));
    const scan = await timed(async () => {
      const texts = corpus.texts.slice(0, options.entries);
      for (let start = 0; start < texts.length; start += SCAN_BATCH) {
        await platform.cpu.scanSecrets({ items: texts.slice(start, start + SCAN_BATCH).map((text, i) => ({ ref: String(start + i), text })) });
      }
    });
    const publishRows: Row[] = [
      { step: 'publish() call: size gate, secret scan of every chunk, version row, workflow start', 's': seconds(returnedMs) },
      { step: '  of which the size gate alone (counts, timed again after)', 's': seconds(sizeGate.ms) },
      { step: `  of which the secret scan alone (secretlint over the ${at}' texts in the CPU pool, ${config.CPU_POOL_THREADS} thread, batches of ${SCAN_BATCH}, timed again after)`, 's': seconds(scan.ms) },
      { step: '  the rest, by difference: the gate\'s read of every page of entries and chunk texts, the version row, the workflow start', 's': seconds(returnedMs - sizeGate.ms - scan.ms) },
    ];
    if (viaWorkflow) {
      const marks = await workflowMarks(client, buildWorkflow);
      publishRows.push(
        { step: 'workflow started to buildPackVersion started (queued)', 's': between(marks, 'workflow started', 'buildPackVersion started') },
        { step: 'buildPackVersion (copy of entries and chunks in one transaction, then ready)', 's': between(marks, 'buildPackVersion started', 'buildPackVersion completed') },
        { step: 'buildPackVersion completed to indexPackVersion started', 's': between(marks, 'buildPackVersion completed', 'indexPackVersion started') },
        { step: `indexPackVersion (HNSW of the version's chunks, m ${repo.BRAIN_HNSW.m}, ef_construction ${repo.BRAIN_HNSW.efConstruction})`, 's': between(marks, 'indexPackVersion started', 'indexPackVersion completed') },
      );
    }
    publishRows.push(
      { step: 'call to version ready', 's': seconds(readyMs) },
      { step: 'call to workflow completed (HNSW index built)', 's': seconds(indexedMs) },
      { step: `database sessions over the whole publish, sampled every 50 ms: ${topStatements(publishStatements, 3)}`, 's': '' },
    );
    table(SECTION, `publish of a brain of ${at} (one chunk each, ${DIMS} dimensions, plaintext), from the call to the version ready, its steps from the workflow's history (${WHERE}); the version holds ${ready.entry_count} entries, ${ready.chunk_count} chunks, ${(Number(ready.byte_size) / 1e6).toFixed(1)} MB of text; load average ${publishLoad} when it began`, publishRows);
    goal(SECTION, { figure: `publish of ${at}, call to version ready`, target: '≤ 20 s', value: `${seconds(readyMs)} s (call ${seconds(returnedMs)} s; HNSW index built at ${seconds(indexedMs)} s)`, met: readyMs <= 20_000 });

    // ---- materialize ----
    const materializeRows: Row[] = [];
    const materializeLoad = loadAverage();
    for (const encryption of consumers) {
      const consumerId = await brain(`bench packs materialize ${encryption}`, encryption);
      const sampler = sampleStatements(platform.db);
      const started = performance.now();
      const mount = await createMount(platform, developer.id, consumerId, { pack_id: published.pack_id, mode: 'materialize' });
      const createMs = performance.now() - started;
      await mountReady(platform.db, mount.id);
      const readyMs = performance.now() - started;
      const workflowId = `pack-materialize-${mount.id}-v${mount.pinned_version}`;
      await client.workflow.getHandle(workflowId).result();
      const statements = await sampler.stop();
      const marks = await workflowMarks(client, workflowId);
      const imported = (await mountRepo.importedEntryIds(platform.db, consumerId, mount.id)).length;
      materializeRows.push({
        consumer: encryption === 'none' ? 'none (plaintext)' : `${encryption} (sealed)`,
        'imported entries': imported,
        'createMount s': seconds(createMs),
        'queued s': between(marks, 'workflow started', 'materializeMount started'),
        'materializeMount s': between(marks, 'materializeMount started', 'materializeMount completed'),
        'to ready s': seconds(readyMs),
        'entries/s': Math.round(imported / (readyMs / 1000)),
        'database sessions, sampled every 50 ms': topStatements(statements),
      });
      console.log(`  materialize into ${encryption}: ready in ${seconds(readyMs)} s`);
      goal(SECTION, { figure: `materialize mount of ${at} into a ${encryption} brain, createMount to ready`, target: '≤ 30 s', value: `${seconds(readyMs)} s`, met: readyMs <= 30_000 });
    }
    table(SECTION, `materialize mount of the ${at} version into an empty brain of the same account, from createMount to the mount ready (the import: packMaterializeWorkflow, one transaction that re-seals rows as the brain seals its own, writes them, and builds the empty brain's HNSW graph over them; ${WHERE}); load average ${materializeLoad} when it began`, materializeRows);

    // ---- recall merged with a reference mount ----
    const recallId = await brain('bench packs recall', 'none');
    const native = await loadBrain(platform, developer.id, recallId, corpus, options.entries, now, options.entries);
    console.log(`  recall brain, ${at}: loaded in ${native.loadSeconds.toFixed(1)} s, HNSW built in ${native.indexSeconds!.toFixed(1)} s`);
    const timedQueries = corpus.queries.slice(options.warmup);
    const recallLoad = loadAverage();
    const measure = async (brainId = recallId) => {
      const warmed = await warmUntilGranted(platform, developer.id, options.warmup, (i) => recall(platform, developer.id, call, brainId, { query: corpus.queries[i % options.warmup]!.text, top_k: 8 }));
      let hits = 0;
      let fromPack = 0;
      const times = await latencies(timedQueries, async (text) => {
        const found = await recall(platform, developer.id, call, brainId, { query: text, top_k: 8 });
        hits += found.data.length;
        fromPack += found.data.filter((hit) => hit.source.store === 'pack').length;
      });
      return { ...times, packShare: fromPack / hits, recalls: warmed.calls + timedQueries.length, metered: meteredWhere(warmed) };
    };
    const alone = await measure();
    await createMount(platform, developer.id, recallId, { pack_id: published.pack_id, mode: 'reference' });
    // How recall reads the mounted version: PostgreSQL's scan counters of its chunk partition around the merged recalls.
    const scansBefore = await packScans(platform.db, published.id);
    const merged = await measure();
    const scans = await packScans(platform.db, published.id);
    const perRecall = (n: number) => (n / merged.recalls).toFixed(2);
    const recallRow = (label: string, figures: typeof alone, mounted = ''): Row => ({
      recall: label, queries: timedQueries.length, 'p50 ms': figures.p50.toFixed(1), 'p95 ms': figures.p95.toFixed(1), 'p99 ms': figures.p99.toFixed(1), 'hits from the pack': `${(figures.packShare * 100).toFixed(0)} %`,
      'scans of the version\'s chunks a recall': mounted,
      'query embedding metered': figures.metered,
    });
    table(SECTION, `recall (the domain call as a request with a developer key makes it: query embedding by the emulator, metered as its column says, native HNSW candidates and the mounted version's nearest chunks, composite, provenance rules, contents), top_k 8 at scope /, of a plaintext brain of ${at} before and after a reference mount of the ${at} version; ${options.warmup} or more warm-up (on until the payer's quota grant serves, where the loop's rate earns one) then the ${timedQueries.length} timed queries one after another (scans of the version's partition counted over the merged ones, warm-up included); load average ${recallLoad} when it began`, [
      recallRow(`${at}, no mount`, alone),
      recallRow(`${at} + reference mount of ${at}`, merged, `${perRecall(scans.seq - scansBefore.seq)} sequential, ${perRecall(scans.hnsw - scansBefore.hnsw)} HNSW`),
    ]);
    goal(SECTION, { figure: `merged recall p95, ${at} native + reference mount of ${at}`, target: '≤ 30 ms', value: `${merged.p95.toFixed(1)} ms (without the mount ${alone.p95.toFixed(1)} ms)`, met: merged.p95 <= 30 });

    // ---- recall merged as issue 28 shapes it: one reference and three materialize mounts ----
    if (options.shapedShare > 0) {
      const share = options.shapedShare;
      const total = `${(5 * share).toLocaleString('en-US')} rows`;
      const shaped = makeCorpus(5 * share, 0, { groupSize: 1_000, model: MODEL, dims: DIMS });
      // Each part of the build is timed: the sources' loads and publishes, the versions' builds, the consumer's load, each import.
      const buildParts: Row[] = [];
      const part = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
        const started = performance.now();
        const result = await work();
        buildParts.push({ part: name, s: ((performance.now() - started) / 1000).toFixed(1) });
        return result;
      };
      // Four packs of `share` entries each (corpus rows share..5*share), published side by side.
      const versions: Awaited<ReturnType<typeof publish>>[] = [];
      for (let k = 1; k <= 4; k++) {
        const id = await brain(`bench packs shaped source ${k}`, 'none');
        await part(`load source ${k} (HNSW built once after the rows)`, () => loadBrain(platform, developer.id, id, shaped, share, now, k * share));
        const version = await part(`publish source ${k} (accepted)`, () => publish(platform, developer.id, id, { notes: 'bench shaped' }));
        packIds.push(version.pack_id);
        versions.push(version);
      }
      await part('the four versions built (side by side)', () => Promise.all(versions.map((version) => versionReady(platform.db, version.id))));
      const consumerId = await brain('bench packs shaped recall', 'none');
      await part('load the consumer brain', () => loadBrain(platform, developer.id, consumerId, shaped, share, now, 0));
      for (const [k, version] of versions.slice(0, 3).entries()) {
        await part(`materialize mount ${k + 1} into a brain of ${((k + 1) * share).toLocaleString('en-US')} rows`, async () => {
          const mount = await createMount(platform, developer.id, consumerId, { pack_id: version.pack_id, mode: 'materialize' });
          await mountReady(platform.db, mount.id);
        });
      }
      await part('reference mount', () => createMount(platform, developer.id, consumerId, { pack_id: versions[3]!.pack_id, mode: 'reference' }));
      table(SECTION, `building the shaped brain below, part by part (${share.toLocaleString('en-US')}-entry stores)`, buildParts);
      const shapedFigures = await measure(consumerId);
      table(SECTION, `recall of a plaintext brain of ${share.toLocaleString('en-US')} native entries with three materialize mounts and one reference mount of ${share.toLocaleString('en-US')}-entry versions (${total} in all; the imported rows sit in the brain's own graph, the reference mount's are read from its version), top_k 8 at scope /, ${options.warmup} or more warm-up (on until the payer's quota grant serves, where the loop's rate earns one) then the ${timedQueries.length} timed queries one after another`, [
        recallRow(`${share.toLocaleString('en-US')} native + 3 materialize + 1 reference`, shapedFigures),
      ]);
      goal(SECTION, { figure: `merged recall p95, one reference and three materialize mounts, ${total} in all`, target: '≤ 30 ms', value: `${shapedFigures.p95.toFixed(1)} ms`, met: shapedFigures.p95 <= 30 });
    }
  } finally {
    worker.shutdown();
    await running.catch(() => undefined);
    await connection.close();
    // Purging a brain takes its mounts with it; packs have no delete (versions outlive their brain), so the bench drops its own.
    for (const id of brainIds) await repo.markDeleting(platform.db, id).then(() => repo.purgeBrain(platform.db, id)).catch(() => undefined);
    for (const id of packIds) {
      for (const version of await packRepo.versionsOf(platform.db, id)) await packRepo.clearVersionContent(platform.db, version.id);
      await platform.db.query(`DELETE FROM brain_packs WHERE id = $1`, [id]);
    }
    await platform.close();
    await stopChild(emulator);
    await stopChild(temporal.process);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Sequential and HNSW index scans of a version's chunk partition so far. A backend reports its
 * counters once idle, up to 10 s later (PostgreSQL 15), so this waits that long first.
 */
async function packScans(db: Db, versionId: string): Promise<{ seq: number; hnsw: number }> {
  await new Promise((resolve) => setTimeout(resolve, 11_000));
  const partition = packRepo.versionPartitionOf(versionId);
  const { rows } = await db.query<{ seq: string; hnsw: string | null }>(
    `SELECT t.seq_scan AS seq, (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = $2) AS hnsw FROM pg_stat_user_tables t WHERE t.relname = $1`,
    [partition, `${partition}_hnsw`],
  );
  return { seq: Number(rows[0]?.seq ?? 0), hnsw: Number(rows[0]?.hnsw ?? 0) };
}

const loadAverage = () => os.loadavg()[0]!.toFixed(1);

/** Polls `read` until it gives a value (every 20 ms, ten minutes at most). */
/** A published version once ready (throws if its build failed). */
const versionReady = (db: Queryable, versionId: string) =>
  until(async () => {
    const row = await packRepo.versionById(db, versionId);
    if (row?.status === 'failed') throw new Error(`version ${versionId} failed: ${row.failure_reason}`);
    return row?.status === 'ready' ? row : undefined;
  });

const mountReady = (db: Queryable, mountId: string) => until(async () => ((await mountRepo.mountById(db, mountId))?.status === 'ready' ? true : undefined));

async function until<T>(read: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + 600_000;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error('gave up waiting after 10 minutes');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const seconds = (ms: number) => (ms / 1000).toFixed(2);

/** Seconds from one mark of a workflow's history to another ('' when either is missing). */
function between(marks: Map<string, number>, from: string, to: string): string {
  const [start, end] = [marks.get(from), marks.get(to)];
  return start === undefined || end === undefined ? '' : seconds(end - start);
}
