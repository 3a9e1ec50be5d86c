/**
 * Brains (issue 26's targets): recall latency at N entries of 1,536 dimensions, top_k 8, explain
 * off and on, in a plaintext brain (HNSW candidates) and a strict one (sealed vectors opened once
 * per process and scored in the CPU pool), with recall@10 of the composite ranking against an
 * exact brute-force scoring of the same formula over every entry; entry write throughput; and
 * what ambient recall adds to a chat completion; and learning (issue 27): observe passes per second
 * through the API and the worker, each in its own process, and recall's latency while passes run.
 * Figures are printed, never asserted. BENCH_BRAINS_PARTS (recall,writes,ambient,learning; all by
 * default) runs some of these parts; BENCH_LEARN_PASSES and BENCH_LEARN_CONCURRENCY size learning.
 *
 * Entries are written straight into the tables (the write path is measured on its own below):
 * one-chunk memories and references over the taxonomy's tiers, written over the last 120 days
 * with some use, so recency, tier and usage move the ranking away from plain cosine order. Their
 * vectors are the emulator's embeddings of texts of a few dozen topics (they cluster as real ones
 * do); the queries are other texts of the same topics, embedded by the emulator as recall runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { createGatewayApp } from '../api/app.js';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import type { MeteredCall } from '../shared/billing/metered-call.js';
import { brainOf, createBrain } from '../shared/brains/brains.js';
import { embedQuery, putEntry } from '../shared/brains/entries.js';
import { MAX_DRAW, recall, scopeFilter } from '../shared/brains/recall.js';
import * as repo from '../shared/brains/repository.js';
import { createGatewayServices, type GatewayServices } from '../shared/composition/gateway.js';
import { loadConfig } from '../shared/config.js';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { compositeFactors } from '../shared/scoring/composite.js';
import { freePort, startTemporalDevServer, stopChild } from '../scripts/lib/local-services.js';
import { API_NODE_ARGS, WORKER_NODE_ARGS } from '../scripts/lib/node-args.js';
import { profileFlags } from './support/node-flags.js';
import { loadBrain, type Loaded } from './support/brain-load.js';
import { makeCorpus, quantile, type Corpus } from './support/corpus.js';
import { startEmulatorProcess } from './support/emulator-process.js';
import { keyedCall, meteredWhere, warmUntilGranted } from './support/keyed-call.js';
import { commandCpuSeconds, machineCpuTicks, processCpuSeconds } from './support/process-cpu.js';
import { goal, table, type Row } from './support/report.js';
import { latencies, timed } from './support/timing.js';
import { workflowMarks } from './support/workflow-marks.js';

const SECTION = 'brains';
const MODEL = 'text-embedding-3-small';
const DIMS = 1536;
const K = 10;

export interface BrainBenchOptions {
  databaseUrl: string;
  /** Entries in each measured brain, smallest first. */
  sizes: number[];
  queries: number;
  warmup: number;
  writes: number;
  writeConcurrency: number;
  ambientCalls: number;
  /** The parts to run; BENCH_BRAINS_PARTS (comma-separated) or all of them by default. */
  parts?: BrainBenchPart[];
  /** Observe passes of the learning throughput; BENCH_LEARN_PASSES or 600. */
  learnPasses?: number;
  /** Observe calls in flight while learning; BENCH_LEARN_CONCURRENCY or 32. */
  learnConcurrency?: number;
}

const PARTS = ['recall', 'writes', 'ambient', 'learning'] as const;
export type BrainBenchPart = (typeof PARTS)[number];

function partsFromEnv(): BrainBenchPart[] {
  const named = (process.env.BENCH_BRAINS_PARTS ?? PARTS.join(',')).split(',').map((part) => part.trim());
  const unknown = named.filter((part) => !(PARTS as readonly string[]).includes(part));
  if (unknown.length > 0) throw new Error(`BENCH_BRAINS_PARTS: unknown part ${unknown.join(', ')} (parts: ${PARTS.join(', ')})`);
  return named as BrainBenchPart[];
}

export async function runBrainBench(options: BrainBenchOptions): Promise<void> {
  const parts = new Set(options.parts ?? partsFromEnv());
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-brains-'));
  const { child: emulator, providerEnv } = await startEmulatorProcess(0);
  const redisKeyPrefix = `svc-bench-brains-${process.pid}`;
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    REDIS_KEY_PREFIX: redisKeyPrefix,
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    DEVELOPER_RPM_LIMIT: '100000000',
    DEVELOPER_TPM_LIMIT: '1000000000',
    ...providerEnv,
  });
  const platform = createGatewayServices(config, 'bench-brains');
  await platform.ready;
  const brainIds: string[] = [];
  let server: Server | undefined;
  try {
    const developer = await createDeveloperAccount(platform.db, { email: `brains-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 10_000_000_000 });
    // Recalls and writes are timed as a request with a developer key meters them (its payer's quota grant).
    const call = await keyedCall(platform, developer.id, `bench_brains_${process.pid}`);
    const largest = Math.max(...options.sizes);
    const started = performance.now();
    const corpus = makeCorpus(largest, options.warmup + options.queries, { groupSize: 1_000, model: MODEL, dims: DIMS });
    console.log(`  ${largest} entries and ${corpus.queries.length} queries embedded by the emulator's function in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const now = Date.now();
    const timedQueries = corpus.queries.slice(options.warmup);
    /** Loaded plaintext brains by size: the recall part loads them, and a part that runs without it loads the one it needs. */
    const plaintext = new Map<number, string>();
    const plaintextBrain = async (size: number) => {
      const known = plaintext.get(size);
      if (known) return known;
      const created = await createBrain(platform, developer.id, { name: `bench none ${size}`, encryption: 'none' });
      brainIds.push(created.id);
      const loaded = await loadBrain(platform, developer.id, created.id, corpus, size, now);
      console.log(`  none, ${size.toLocaleString('en-US')} entries: loaded in ${loaded.loadSeconds.toFixed(1)} s, HNSW built in ${loaded.indexSeconds!.toFixed(1)} s`);
      await warmUntilGranted(platform, developer.id, options.warmup, (i) => recall(platform, developer.id, call, created.id, { query: corpus.queries[i % options.warmup]!.text, top_k: 8 }));
      plaintext.set(size, created.id);
      return created.id;
    };

    if (parts.has('recall')) {
      const rows: Row[] = [];
      const results = new Map<string, { p95: number; recall: number }>();
      for (const encryption of ['none', 'strict'] as const) {
        for (const size of options.sizes) {
          const created = await createBrain(platform, developer.id, { name: `bench ${encryption} ${size}`, encryption });
          brainIds.push(created.id);
          const loaded = await loadBrain(platform, developer.id, created.id, corpus, size, now);
          if (encryption === 'none') plaintext.set(size, created.id);
          const label = `${encryption}, ${size.toLocaleString('en-US')} entries`;
          console.log(`  ${label}: loaded in ${loaded.loadSeconds.toFixed(1)} s${loaded.indexSeconds === null ? '' : `, HNSW built in ${loaded.indexSeconds.toFixed(1)} s`}`);
          const first = await timed(() => recall(platform, developer.id, call, created.id, { query: corpus.queries[0]!.text, top_k: 8 }));
          const firstAnswered = performance.now();
          const versionsKept = platform.rankedVersions.filled(created.id).then(() => (performance.now() - firstAnswered) / 1000);
          // A large strict brain's IVF lists are built in the background after its first recall; measured once they serve.
          const listsStarted = performance.now();
          await platform.strictBrains.listsSettled(created.id);
          const listsSeconds = (performance.now() - listsStarted) / 1000;
          // So are its entry versions, read whole into the process's cache from its first recall on (row-cache.ts).
          const versionsSeconds = await versionsKept;
          const warmed = await warmUntilGranted(platform, developer.id, options.warmup - 1, (i) => recall(platform, developer.id, call, created.id, { query: corpus.queries[1 + (i % (options.warmup - 1))]!.text, top_k: 8 }));
          const plain = await latencies(timedQueries, (text) => recall(platform, developer.id, call, created.id, { query: text, top_k: 8 }));
          const explained = await latencies(timedQueries, (text) => recall(platform, developer.id, call, created.id, { query: text, top_k: 8, explain: true }));
          const floors = await recallFloors(platform, developer.id, call, created.id, timedQueries);
          let recallSum = 0;
          for (const query of timedQueries) {
            const found = await recall(platform, developer.id, call, created.id, { query: query.text, top_k: K });
            recallSum += recallAtK(found.data.map((hit) => Number(hit.entry_id.slice(1))), exactComposite(corpus, loaded, query.vector, now));
          }
          const recallAt10 = recallSum / timedQueries.length;
          results.set(`${encryption}:${size}`, { p95: plain.p95, recall: recallAt10 });
          rows.push({
            brain: label,
            'load s': loaded.loadSeconds.toFixed(1),
            'HNSW build s': loaded.indexSeconds?.toFixed(1) ?? '(none: sealed vectors)',
            'first recall ms': first.ms.toFixed(1),
            'IVF lists s': encryption === 'strict' ? (listsSeconds < 0.05 ? '(exact pass)' : listsSeconds.toFixed(1)) : '',
            'versions kept s': versionsSeconds.toFixed(2),
            queries: timedQueries.length,
            'p50 ms': plain.p50.toFixed(1),
            'p95 ms': plain.p95.toFixed(1),
            'p99 ms': plain.p99.toFixed(1),
            'explain p50 ms': explained.p50.toFixed(1),
            'explain p95 ms': explained.p95.toFixed(1),
            'embedding alone p50 / p95 ms': `${floors.embedding.p50.toFixed(1)} / ${floors.embedding.p95.toFixed(1)}`,
            'search alone p50 / p95 ms': floors.search ? `${floors.search.p50.toFixed(1)} / ${floors.search.p95.toFixed(1)}` : '',
            'recall@10': recallAt10.toFixed(3),
            'query embedding metered': meteredWhere(warmed),
          });
          console.log(`  ${label}: p95 ${plain.p95.toFixed(1)} ms (explain ${explained.p95.toFixed(1)} ms), recall@10 ${recallAt10.toFixed(3)}`);
        }
      }
      table(
        SECTION,
        `recall (the domain call as a request with a developer key makes it: brain, query embedding by the emulator, metered as its column says, candidates, composite (the CPU pool's for strict brains), contents), top_k 8 at scope / over every entry; ${options.warmup} or more warm-up (on until the payer's quota grant serves, where the loop's rate earns one) then ${options.queries} timed one after another, explain off then on, both once the brain's entry versions are kept in the process (read whole from its first recall on: 'versions kept s' after that recall answered); the floors under it, the same queries one after another: the query's embedding alone (metered, charge recorded) and a plaintext brain's search alone (its HNSW cursor opened with its first draw, then closed: no versions, composite or contents); recall@10 (top_k 10) against the exact composite top 10 of every entry`,
        rows,
      );
      const largestNone = results.get(`none:${largest}`)!;
      const largestStrict = results.get(`strict:${largest}`)!;
      const at = `at ${largest.toLocaleString('en-US')} entries`;
      goal(SECTION, { figure: `none-encrypted recall p95 ${at}`, target: '≤ 20 ms', value: `${largestNone.p95.toFixed(1)} ms`, met: largestNone.p95 <= 20 });
      goal(SECTION, { figure: `none-encrypted recall@10 ${at}`, target: '≥ 0.98', value: largestNone.recall.toFixed(3), met: largestNone.recall >= 0.98 });
      goal(SECTION, { figure: `strict recall p95 ${at}`, target: '≤ 60 ms', value: `${largestStrict.p95.toFixed(1)} ms`, met: largestStrict.p95 <= 60 });
    }

    // ---- writes ----
    if (parts.has('writes')) {
      const writeRows: Row[] = [];
      for (const encryption of ['none', 'strict'] as const) {
        const brain = await createBrain(platform, developer.id, { name: `bench writes ${encryption}`, encryption });
        brainIds.push(brain.id);
        const writeStarted = performance.now();
        let next = 0;
        await Promise.all(
          Array.from({ length: options.writeConcurrency }, async () => {
            for (let i = next++; i < options.writes; i = next++) {
              await putEntry(platform, developer.id, call, brain.id, { class: 'memory', type: 'fact', body: corpus.texts[i % corpus.texts.length]!, scope: `/team${i % 10}` });
            }
          }),
        );
        const seconds = (performance.now() - writeStarted) / 1000;
        writeRows.push({ brain: encryption, entries: options.writes, concurrency: options.writeConcurrency, 'wall s': seconds.toFixed(1), 'entries/s': (options.writes / seconds).toFixed(0) });
        console.log(`  writes (${encryption}): ${(options.writes / seconds).toFixed(0)} entries/s`);
      }
      table(SECTION, `entry writes: PUT's domain call (embedding by the emulator, one transaction a version), memories of about 1,200 characters, ${options.writeConcurrency} at a time`, writeRows);
    }

    // ---- ambient recall on chat ----
    if (parts.has('ambient')) {
      const ambientBrain = await plaintextBrain(Math.min(...options.sizes));
      const { plaintext: key } = await createApiKey(platform.db, developer.id, { name: 'bench brains', scopes: ['api:chat'] });
      server = await listen(createGatewayApp(platform), 0, '127.0.0.1');
      const url = `${serverUrl(server)}/v1/chat/completions`;
      const chat = async (question: string, brain: string | undefined) => {
        const res = await fetch(url, {
          method: 'POST',
          // Learning is measured on its own below: here only what recall adds before the answer (a pass starts after it).
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(brain && { brain, 'brain-learn': 'false' }) },
          body: JSON.stringify({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: question }], max_tokens: 16 }),
        });
        await res.arrayBuffer();
        if (res.status !== 200 || (brain && res.headers.get('brain-status') !== 'attached')) throw new Error(`chat answered ${res.status} ${res.headers.get('brain-status')}`);
      };
      for (let i = 0; i < 20; i++) await chat(corpus.queries[i]!.text, i % 2 ? ambientBrain : undefined);
      const bare: number[] = [];
      const attached: number[] = [];
      for (let i = 0; i < options.ambientCalls; i++) {
        const question = corpus.queries[i % corpus.queries.length]!.text;
        // Interleaved, so both see the same machine.
        bare.push((await timed(() => chat(question, undefined))).ms);
        attached.push((await timed(() => chat(question, ambientBrain))).ms);
      }
      const bareSorted = [...bare].sort((a, b) => a - b);
      const attachedSorted = [...attached].sort((a, b) => a - b);
      const added = quantile(attachedSorted, 0.95) - quantile(bareSorted, 0.95);
      table(SECTION, `ambient recall: ${options.ambientCalls} chat completions without and ${options.ambientCalls} with a Brain header (the ${Math.min(...options.sizes).toLocaleString('en-US')}-entry plaintext brain), interleaved, one at a time over HTTP; emulator answering at once`, [
        { call: 'chat completion', 'p50 ms': quantile(bareSorted, 0.5).toFixed(1), 'p95 ms': quantile(bareSorted, 0.95).toFixed(1), 'p99 ms': quantile(bareSorted, 0.99).toFixed(1) },
        { call: 'chat completion with Brain', 'p50 ms': quantile(attachedSorted, 0.5).toFixed(1), 'p95 ms': quantile(attachedSorted, 0.95).toFixed(1), 'p99 ms': quantile(attachedSorted, 0.99).toFixed(1) },
      ]);
      goal(SECTION, { figure: 'what ambient recall adds to a chat completion, p95', target: '≤ 25 ms', value: `${added.toFixed(1)} ms`, met: added <= 25 });
    }

    // ---- learning ----
    if (parts.has('learning')) {
      await measureLearning(platform, {
        developerId: developer.id,
        call,
        largestBrain: await plaintextBrain(largest),
        largest,
        queries: timedQueries,
        passes: options.learnPasses ?? Number(process.env.BENCH_LEARN_PASSES ?? 600),
        concurrency: options.learnConcurrency ?? Number(process.env.BENCH_LEARN_CONCURRENCY ?? 32),
        env: { DATABASE_URL: options.databaseUrl, REDIS_KEY_PREFIX: redisKeyPrefix, DATA_DIR: dataDir, ...providerEnv },
        emulatorPid: emulator.pid,
        brainIds,
      });
    }
  } finally {
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    for (const id of brainIds) await repo.markDeleting(platform.db, id).then(() => repo.purgeBrain(platform.db, id)).catch(() => undefined);
    await platform.close();
    await stopChild(emulator);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Scopes a learning run fills side by side, and the memories each gets: fewer than the default consolidate_at of 12, so no consolidation runs. */
const LEARN_SCOPES = 64;
const LEARN_SCOPE_MEMORIES = 10;
/** Passes observed one at a time before the throughput run: the worker is polling, its code is warm, and they show what a pass takes alone. */
const LEARN_ALONE = 20;

interface LearningOptions {
  developerId: string;
  call: MeteredCall;
  /** The largest plaintext brain, loaded: recall is timed on it without and with passes running into it. */
  largestBrain: string;
  largest: number;
  queries: { text: string }[];
  passes: number;
  concurrency: number;
  /** What the API and the worker share with this process: database, Redis prefix, data directory (its secrets) and the emulator. */
  env: Record<string, string>;
  emulatorPid: number | undefined;
  /** Brains to purge at the end; the fresh brain joins them. */
  brainIds: string[];
}

/** One observed turn of a learning run. */
interface ObservedTurn {
  transcript: string;
  scope: string;
}

/**
 * The i-th turn: the user states one fact of its own (one fact memory, with an entity no other
 * memory has, so no judgement call), and every other turn also asks after the fact of turn
 * i - LEARN_SCOPES, which an assistant line answers: the pass recalls it into the turn and counts
 * its use. Turn i goes to the scope of turn i - LEARN_SCOPES, LEARN_SCOPE_MEMORIES turns a scope.
 */
function observedTurn(i: number, prefix: string): ObservedTurn {
  const block = Math.floor(i / (LEARN_SCOPES * LEARN_SCOPE_MEMORIES));
  const fact = (n: number) => `The retention period of dataset Ds${n} is ${7 + (n % 90)} days.`;
  const asked = i - LEARN_SCOPES;
  const asks = i % 2 === 1 && asked >= block * LEARN_SCOPES * LEARN_SCOPE_MEMORIES;
  return {
    transcript: asks ? `user: ${fact(i)} What is the retention period of dataset Ds${asked}?\nassistant: ${fact(asked)}` : `user: ${fact(i)}`,
    scope: `${prefix}/s${block * LEARN_SCOPES + (i % LEARN_SCOPES)}`,
  };
}

/**
 * Learning (issue 27's targets): observe passes per second sustained, and recall's latency while
 * passes run. The API and the worker run in their own processes, as `npm start` runs them, with a
 * Temporal dev server of this section's own; observe calls go over HTTP.
 */
async function measureLearning(platform: GatewayServices, options: LearningOptions): Promise<void> {
  const learning = await startLearningPlatform(options.env);
  try {
    await measureLearnFloor(learning, options);
    const { plaintext: key } = await createApiKey(platform.db, options.developerId, { name: 'bench learning', scopes: ['api:write'] });
    const observe = observer(learning.baseUrl, key);
    const fresh = await createBrain(platform, options.developerId, { name: 'bench learning', encryption: 'none' });
    options.brainIds.push(fresh.id);

    const alone: string[] = [];
    for (let i = 0; i < LEARN_ALONE; i++) alone.push((await observe(fresh.id, observedTurn(i, '/alone'), true)).id);

    // Throughput: every pass submitted (202, no wait), `concurrency` calls in flight, then the rows watched until each pass ended.
    const cpuBefore = cpuOf(learning, options.emulatorPid);
    const machineBefore = machineCpuTicks();
    const started = performance.now();
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        for (let i = next++; i < options.passes; i = next++) ids[i] = (await observe(fresh.id, observedTurn(i, '/learning'), false)).id;
      }),
    );
    const submitSeconds = (performance.now() - started) / 1000;
    await passesEnded(platform, ids, started);
    const wallSeconds = (performance.now() - started) / 1000;
    const cpuAfter = cpuOf(learning, options.emulatorPid);
    const machineAfter = machineCpuTicks();
    const rate = options.passes / wallSeconds;
    const rows = await passRows(platform, ids);
    const latency = rows.map((row) => row.completed_ms - row.created_ms).sort((a, b) => a - b);
    const statuses = (status: string) => rows.filter((row) => row.status === status).length;
    console.log(`  learning: ${options.passes} passes in ${wallSeconds.toFixed(1)} s, ${rate.toFixed(1)} passes/s`);
    table(
      SECTION,
      `observe throughput: ${options.passes} observe calls (no wait: 202) into a fresh plaintext brain, ${options.concurrency} calls in flight, over HTTP to the API; the worker runs each pass (brainLearnWorkflow: recall into the turn, extraction by the emulator, embedding, one transaction); each turn states one fact (every other one also asks after an earlier fact, answered by an assistant line), ${LEARN_SCOPE_MEMORIES} memories a scope (no consolidation); wall is first submit to last pass ended, a pass's latency its row's created_at to completed_at`,
      [
        {
          passes: options.passes,
          'completed / failed / skipped': `${statuses('completed')} / ${statuses('failed')} / ${statuses('skipped')}`,
          'calls in flight': options.concurrency,
          'submit s': submitSeconds.toFixed(1),
          'wall s': wallSeconds.toFixed(1),
          'passes/s': rate.toFixed(1),
          'pass p50 ms': quantile(latency, 0.5).toFixed(0),
          'pass p95 ms': quantile(latency, 0.95).toFixed(0),
          'pass p99 ms': quantile(latency, 0.99).toFixed(0),
          'memories written': rows.reduce((sum, row) => sum + row.changed, 0),
          'uses counted': rows.reduce((sum, row) => sum + row.used, 0),
        },
      ],
    );
    goal(SECTION, { figure: 'observe passes per second sustained (fresh plaintext brain, emulator)', target: '≥ 50/s', value: `${rate.toFixed(1)}/s`, met: rate >= 50 });

    // Where a pass's time goes: its workflow's history, alone and in the throughput run; and the CPU each process spent.
    const aloneSteps = await passSteps(learning.client, await passRows(platform, alone));
    const loadedSteps = await passSteps(learning.client, rows);
    table(
      SECTION,
      `where a pass's time goes: from each pass's workflow history (its row's created_at to the workflow's end), ${LEARN_ALONE} passes one at a time (observe with wait) and the ${options.passes} above`,
      PASS_STEPS.map(([step]) => ({
        step,
        'alone p50 ms': quantile(aloneSteps.get(step)!, 0.5).toFixed(1),
        [`${options.passes} at once p50 ms`]: quantile(loadedSteps.get(step)!, 0.5).toFixed(1),
        [`${options.passes} at once p95 ms`]: quantile(loadedSteps.get(step)!, 0.95).toFixed(1),
      })),
    );
    const cores = os.availableParallelism();
    const machine = machineBefore && machineAfter && { busy: (100 * (machineAfter.busy - machineBefore.busy)) / (machineAfter.total - machineBefore.total), steal: (100 * (machineAfter.steal - machineBefore.steal)) / (machineAfter.total - machineBefore.total) };
    table(
      SECTION,
      `CPU during the ${options.passes} passes: ${wallSeconds.toFixed(1)} s of wall time on ${cores} cores${machine ? `, the machine ${machine.busy.toFixed(0)} % busy, ${machine.steal.toFixed(0)} % stolen by the hypervisor` : ''}`,
      Object.entries(cpuAfter).map(([process, seconds]) => {
        const used = seconds === undefined || cpuBefore[process] === undefined ? undefined : seconds - cpuBefore[process]!;
        return {
          process,
          'CPU s': used?.toFixed(1) ?? 'n/a',
          'CPU ms a pass': used === undefined ? 'n/a' : ((used * 1000) / options.passes).toFixed(1),
          'share of the machine %': used === undefined ? 'n/a' : ((100 * used) / (wallSeconds * cores)).toFixed(0),
        };
      }),
    );

    // Recall on the largest plaintext brain: idle, then while passes run into it (scopes under /learning) with a few, then `concurrency`, in flight.
    const recallOf = (text: string) => recall(platform, options.developerId, options.call, options.largestBrain, { query: text, top_k: 8 });
    await warmUntilGranted(platform, options.developerId, 1, (i) => recallOf(options.queries[i % options.queries.length]!.text));
    const idle = await latencies(options.queries, recallOf);
    // A loop slower than the grant's rate reserves and settles each recall's embedding in PostgreSQL: say which it was.
    const metered = () => meteredWhere({ granted: platform.grants.servingFor(options.developerId) > 0 });
    const recallRows: Row[] = [{ recall: 'idle', 'passes in flight': 0, 'passes/s': '', 'p50 ms': idle.p50.toFixed(1), 'p95 ms': idle.p95.toFixed(1), 'p99 ms': idle.p99.toFixed(1), 'query embedding metered': metered() }];
    let busy = idle;
    for (const inFlight of [Math.max(1, Math.floor(options.concurrency / 8)), options.concurrency]) {
      const load = learnContinuously(observe, options.largestBrain, inFlight, `/learning/at${inFlight}`);
      while (load.ended() < inFlight) await sleep(50);
      const windowStarted = performance.now();
      const endedBefore = load.ended();
      busy = await latencies(options.queries, recallOf);
      const passesPerSecond = (load.ended() - endedBefore) / ((performance.now() - windowStarted) / 1000);
      const outcome = await load.stop();
      if (outcome.other > 0) console.log(`  ${outcome.other} passes did not complete while recall was timed`);
      recallRows.push({ recall: 'while learning', 'passes in flight': inFlight, 'passes/s': passesPerSecond.toFixed(1), 'p50 ms': busy.p50.toFixed(1), 'p95 ms': busy.p95.toFixed(1), 'p99 ms': busy.p99.toFixed(1), 'query embedding metered': metered() });
    }
    const at = `${options.largest.toLocaleString('en-US')} entries`;
    table(
      SECTION,
      `recall while learning: the ${at} plaintext brain, top_k 8 at scope /, explain off, the ${options.queries.length} timed queries one after another, first with no pass running, then while observe calls with wait keep passes in flight into its scopes under /learning (each pass recalls from the whole brain into its turn); how the query embeddings were metered as each run ended`,
      recallRows,
    );
    console.log(`  recall at ${at}: p95 ${idle.p95.toFixed(1)} ms idle, ${busy.p95.toFixed(1)} ms with ${options.concurrency} passes in flight`);
    goal(SECTION, { figure: `none-encrypted recall p95 at ${at} while observe passes run (${options.concurrency} in flight)`, target: '≤ 20 ms', value: `${busy.p95.toFixed(1)} ms (idle ${idle.p95.toFixed(1)} ms)`, met: busy.p95 <= 20 });
  } finally {
    await learning.stop();
  }
}

/**
 * The floor under the throughput: workflows of a learn pass's shape whose two local activities do
 * nothing, on the same Temporal server, by a worker in this process, started and awaited the way
 * the passes are; a warm-up round first (a fresh dev server is slower on its first workflows).
 */
async function measureLearnFloor(learning: LearningPlatform, options: LearningOptions): Promise<void> {
  const taskQueue = `svc-bench-learn-floor-${process.pid}`;
  const connection = await NativeConnection.connect({ address: learning.temporalAddress });
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle: await bundleWorkflowCode({ workflowsPath: fileURLToPath(new URL('./support/learn-floor-workflows.ts', import.meta.url)), logger: quietLogger }),
    activities: { step: async () => undefined },
  });
  const running = worker.run();
  try {
    const round = async (workflows: number, label: string) => {
      const temporalBefore = processCpuSeconds(learning.temporal.pid);
      const started = performance.now();
      const handles: Promise<unknown>[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: options.concurrency }, async () => {
          for (let i = next++; i < workflows; i = next++) handles.push((await learning.client.workflow.start('learnShapedWorkflow', { taskQueue, workflowId: `learn-floor-${process.pid}-${label}-${i}` })).result());
        }),
      );
      await Promise.all(handles);
      const seconds = (performance.now() - started) / 1000;
      const temporalCpu = (processCpuSeconds(learning.temporal.pid) ?? Number.NaN) - (temporalBefore ?? Number.NaN);
      return { seconds, temporalMsEach: (temporalCpu * 1000) / workflows };
    };
    await round(Math.min(200, options.passes), 'warmup');
    const floor = await round(options.passes, 'timed');
    table(SECTION, `floor: ${options.passes} workflows of a learn pass's shape (two local activities one after the other) that do nothing, on the same Temporal dev server, by a worker in this process, started ${options.concurrency} at a time and awaited`, [
      { workflows: options.passes, 'wall s': floor.seconds.toFixed(1), 'workflows/s': (options.passes / floor.seconds).toFixed(1), 'Temporal server CPU ms a workflow': floor.temporalMsEach.toFixed(1) },
    ]);
  } finally {
    worker.shutdown();
    await running.catch(() => undefined);
    await connection.close();
  }
}

const quietLogger = { trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined, log: () => undefined };

interface LearningPlatform {
  baseUrl: string;
  api: ChildProcess;
  worker: ChildProcess;
  temporal: ChildProcess;
  temporalAddress: string;
  /** For the passes' workflow histories and the floor's workflows. */
  client: Client;
  stop(): Promise<void>;
}

/** A Temporal dev server, the API and the worker, each its own process as `npm start` runs them (node flags, worker defaults), the limits raised. */
async function startLearningPlatform(shared: Record<string, string>): Promise<LearningPlatform> {
  const temporal = await startTemporalDevServer({ port: await freePort(), logFile: path.join(shared.DATA_DIR!, 'temporal.log') });
  const apiPort = await freePort();
  const env = {
    ...process.env,
    ...shared,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: `svc-bench-brains-${process.pid}`,
    API_PORT: String(apiPort),
    EDGE_RPM_LIMIT: '100000000',
    DEVELOPER_RPM_LIMIT: '100000000',
    DEVELOPER_TPM_LIMIT: '1000000000',
  };
  // The API at warn prints only its problems; the worker at info, to say when it polls (its problems are passed on).
  const api = spawn(process.execPath, [...API_NODE_ARGS, '--import', 'tsx', 'api/main.ts'], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...env, LOG_LEVEL: 'warn' } });
  const worker = spawn(process.execPath, [...WORKER_NODE_ARGS, ...profileFlags('/tmp/prof-brains-worker'), '--import', 'tsx', 'workers/main.ts'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...env, LOG_LEVEL: 'info' } });
  const client = new Client({ connection: await Connection.connect({ address: temporal.address }) });
  const baseUrl = `http://127.0.0.1:${apiPort}`;
  const stop = async () => {
    await stopChild(api);
    await stopChild(worker, 30_000);
    await client.connection.close();
    await stopChild(temporal.process);
  };
  try {
    await Promise.all([untilAnswers(`${baseUrl}/v1/compatibility`, api), untilLogged(worker, 'worker polling')]);
  } catch (error) {
    await stop();
    throw error;
  }
  return { baseUrl, api, worker, temporal: temporal.process, temporalAddress: temporal.address, client, stop };
}

async function untilAnswers(url: string, child: ChildProcess): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) throw new Error(`the process serving ${url} exited with code ${child.exitCode}`);
    if (await fetch(url).then((response) => response.ok, () => false)) return;
    await sleep(200);
  }
  throw new Error(`${url} did not answer`);
}

/** Resolves once the child logs `message`; its warnings and errors are printed meanwhile and after. */
function untilLogged(child: ChildProcess, message: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let logged = false;
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      if (!logged && line.includes(`"${message}"`)) {
        logged = true;
        resolve();
      } else if (/"level":[456]0\b/.test(line)) console.error(`  worker: ${line}`);
    });
    lines.on('close', () => logged || reject(new Error(`the process ended before logging ${message}`)));
  });
}

/** POST /v1/brains/{id}/observe: the pass's id and status (202 learning, or its end with wait). */
function observer(baseUrl: string, key: string) {
  return async (brainId: string, turn: ObservedTurn, wait: boolean): Promise<{ id: string; status: string }> => {
    const res = await fetch(`${baseUrl}/v1/brains/${brainId}/observe`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...turn, ...(wait && { wait: true }) }),
    });
    const body = (await res.json()) as { id: string; status: string };
    if (res.status !== 200 && res.status !== 202) throw new Error(`observe answered ${res.status}: ${JSON.stringify(body)}`);
    return body;
  };
}

/** Waits until no pass of `ids` is learning any more, printing progress. */
async function passesEnded(platform: GatewayServices, ids: string[], started: number): Promise<void> {
  let printed = performance.now();
  for (;;) {
    const { rows } = await platform.db.query<{ learning: number }>(`SELECT count(*)::int AS learning FROM brain_learn_passes WHERE id = ANY($1) AND status = 'learning'`, [ids]);
    const learning = rows[0]!.learning;
    if (learning === 0) return;
    const elapsed = (performance.now() - started) / 1000;
    if (elapsed > 900) throw new Error(`${learning} of ${ids.length} learn passes still learning after ${elapsed.toFixed(0)} s`);
    if (performance.now() - printed > 5_000) {
      printed = performance.now();
      console.log(`  ${elapsed.toFixed(0)} s: ${ids.length - learning} of ${ids.length} passes ended`);
    }
    await sleep(100);
  }
}

interface PassRow {
  id: string;
  status: string;
  created_ms: number;
  completed_ms: number;
  changed: number;
  used: number;
}

async function passRows(platform: GatewayServices, ids: string[]): Promise<PassRow[]> {
  const { rows } = await platform.db.query<PassRow>(
    `SELECT id, status, extract(epoch FROM created_at) * 1000 AS created_ms, extract(epoch FROM completed_at) * 1000 AS completed_ms,
            coalesce(jsonb_array_length(result -> 'changed'), 0) AS changed, cardinality(used) AS used
     FROM brain_learn_passes WHERE id = ANY($1)`,
    [ids],
  );
  return rows.map((row) => ({ ...row, created_ms: Number(row.created_ms), completed_ms: Number(row.completed_ms) }));
}

/**
 * A pass's steps, each from one mark to the next: its row's insert (created), then the events of
 * its workflow's history. Its steps are local activities, run one after the other inside the
 * workflow task, so each is timed from the end of what came before it.
 */
const PASS_STEPS = [
  ['API: row inserted to workflow started', 'created', 'workflow started'],
  ['first workflow task queued', 'workflow started', 'first workflow task started'],
  ['extractMemories (recall, extraction call)', 'first workflow task started', 'extractMemories completed'],
  ['commitLearnPass (embedding, transaction)', 'extractMemories completed', 'commitLearnPass completed'],
  ['workflow task to the end', 'commitLearnPass completed', 'workflow completed'],
  ['whole pass', 'created', 'workflow completed'],
] as const;

/** Each step's durations (ms) over the passes that completed. */
async function passSteps(client: Client, rows: PassRow[]): Promise<Map<string, number[]>> {
  const steps = new Map<string, number[]>(PASS_STEPS.map(([step]) => [step, []]));
  let next = 0;
  const completed = rows.filter((row) => row.status === 'completed');
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let i = next++; i < completed.length; i = next++) {
        const marks = await passMarks(client, completed[i]!);
        for (const [step, from, to] of PASS_STEPS) {
          const [start, end] = [marks.get(from), marks.get(to)];
          if (start !== undefined && end !== undefined) steps.get(step)!.push(end - start);
        }
      }
    }),
  );
  for (const durations of steps.values()) durations.sort((a, b) => a - b);
  return steps;
}

async function passMarks(client: Client, row: PassRow): Promise<Map<string, number>> {
  const marks = await workflowMarks(client, row.id);
  marks.set('created', row.created_ms);
  return marks;
}

/** CPU seconds used so far by each process of the learning platform. */
function cpuOf(learning: LearningPlatform, emulatorPid: number | undefined): Record<string, number | undefined> {
  return {
    worker: processCpuSeconds(learning.worker.pid),
    API: processCpuSeconds(learning.api.pid),
    'Temporal dev server': processCpuSeconds(learning.temporal.pid),
    PostgreSQL: commandCpuSeconds('postgres'),
    Redis: commandCpuSeconds('redis-server'),
    emulator: processCpuSeconds(emulatorPid),
    'this process (submitting, polling)': processCpuSeconds(process.pid),
  };
}

/**
 * Observe calls with wait, `concurrency` at a time, each followed by the next as soon as its pass
 * ended: passes run into the brain steadily until stop().
 */
function learnContinuously(observe: ReturnType<typeof observer>, brainId: string, concurrency: number, scopePrefix: string) {
  let stopping = false;
  let next = 0;
  let completed = 0;
  let other = 0;
  const loops = Array.from({ length: concurrency }, async () => {
    while (!stopping) {
      const { status } = await observe(brainId, observedTurn(next++, scopePrefix), true);
      if (status === 'completed') completed++;
      else other++;
    }
  });
  return {
    ended: () => completed + other,
    stop: async () => {
      stopping = true;
      await Promise.all(loops);
      return { completed, other };
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What a recall cannot go below, measured apart: its query's embedding (the emulator's answer
 * and the metering around it) and, for a plaintext brain, its native search's first draw
 * (pgvector's HNSW walk at the brain's beam, through the cursor recall opens).
 */
async function recallFloors(platform: GatewayServices, developerId: string, call: MeteredCall, brainId: string, queries: Corpus['queries']) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const embedding = await latencies(queries, async (text) => (await embedQuery(platform, call, brain, text)).charged);
  if (brain.encryption === 'strict') return { embedding, search: null };
  const vectors = new Map(queries.map((query) => [query.text, query.vector]));
  const search = await latencies(queries, async (text) => {
    const cursor = await repo.openNearestChunks(platform.db, brain, brain.active_space, new repo.VectorLiteral(vectors.get(text)!), scopeFilter('/', true, false), null, MAX_DRAW);
    await cursor.close();
  });
  return { embedding, search };
}

/** The exact composite top K over every loaded entry (entries are one chunk each): entry numbers and the K-th score. */
function exactComposite(corpus: Corpus, loaded: Loaded, query: number[], now: number): { scoreOf: (row: number) => number; kth: number } {
  const nonZero: number[] = [];
  for (let i = 0; i < DIMS; i++) if (query[i] !== 0) nonZero.push(i);
  const scores = new Float64Array(loaded.entries);
  for (let row = 0; row < loaded.entries; row++) {
    let cosine = 0;
    for (const i of nonZero) cosine += corpus.vectors[row * DIMS + i]! * query[i]!;
    const ranking = loaded.rankings[row]!;
    scores[row] = compositeFactors({ cosine, tierWeight: ranking.weight, halfLifeDays: ranking.halfLifeDays, anchorAt: ranking.anchorAt, useCount: ranking.useCount }, now).score;
  }
  const kth = [...scores].sort((a, b) => b - a)[K - 1]!;
  return { scoreOf: (row) => scores[row]!, kth };
}

/** The share of the top K found that score at least the exact K-th (a tie at the boundary is no miss). */
function recallAtK(found: number[], exact: { scoreOf: (row: number) => number; kth: number }): number {
  return found.slice(0, K).filter((row) => exact.scoreOf(row) >= exact.kth - 1e-6).length / K;
}
