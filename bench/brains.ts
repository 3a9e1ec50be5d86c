/**
 * Brains (issue 26's targets): recall latency at N entries of 1,536 dimensions, top_k 8, explain
 * off and on, in a plaintext brain (HNSW candidates) and a strict one (sealed vectors opened once
 * per process and scored in the CPU pool), with recall@10 of the composite ranking against an
 * exact brute-force scoring of the same formula over every entry; entry write throughput; and
 * what ambient recall adds to a chat completion. Figures are printed, never asserted.
 *
 * Entries are written straight into the tables (the write path is measured on its own below):
 * one-chunk memories and references over the taxonomy's tiers, written over the last 120 days
 * with some use, so recency, tier and usage move the ranking away from plain cosine order. Their
 * vectors are the emulator's embeddings of texts of a few dozen topics (they cluster as real ones
 * do); the queries are other texts of the same topics, embedded by the emulator as recall runs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { toSql } from 'pgvector';
import { createGatewayApp } from '../api/app.js';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import { backgroundCall } from '../shared/billing/background-call.js';
import { brainKeys, createBrain } from '../shared/brains/brains.js';
import { bodyAad, chunkAad, vectorAad } from '../shared/brains/aad.js';
import { putEntry } from '../shared/brains/entries.js';
import { rankingOf } from '../shared/brains/policy.js';
import { recall } from '../shared/brains/recall.js';
import * as repo from '../shared/brains/repository.js';
import { createGatewayServices, type GatewayServices } from '../shared/composition/gateway.js';
import { loadConfig } from '../shared/config.js';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { compositeFactors } from '../shared/scoring/composite.js';
import { sealText, sealVector, type StoreKeys } from '../shared/vector-stores/crypto.js';
import { stopChild } from '../scripts/lib/local-services.js';
import { makeCorpus, mulberry32, quantile, type Corpus } from './support/corpus.js';
import { startEmulatorProcess } from './support/emulator-process.js';
import { goal, table, type Row } from './support/report.js';

const SECTION = 'brains';
const MODEL = 'text-embedding-3-small';
const DIMS = 1536;
const K = 10;
const DAY_MS = 86_400_000;
const LOAD_BATCH = 1_000;
/** One-chunk entries by class and memory type, in these shares. */
const MIX: { class: 'memory' | 'reference'; type: string | null; share: number }[] = [
  { class: 'reference', type: null, share: 0.3 },
  { class: 'memory', type: 'decision', share: 0.1 },
  { class: 'memory', type: 'fact', share: 0.2 },
  { class: 'memory', type: 'procedure', share: 0.1 },
  { class: 'memory', type: 'observation', share: 0.2 },
  { class: 'memory', type: 'status', share: 0.1 },
];

export interface BrainBenchOptions {
  databaseUrl: string;
  /** Entries in each measured brain, smallest first. */
  sizes: number[];
  queries: number;
  warmup: number;
  writes: number;
  writeConcurrency: number;
  ambientCalls: number;
}

/** What the loader wrote for each row: what the exact ranking needs. */
interface Loaded {
  brain: repo.BrainRow;
  entries: number;
  loadSeconds: number;
  indexSeconds: number | null;
  rankings: { weight: number; halfLifeDays: number | null; anchorAt: number; useCount: number }[];
}

export async function runBrainBench(options: BrainBenchOptions): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-brains-'));
  const { child: emulator, providerEnv } = await startEmulatorProcess(0);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    REDIS_KEY_PREFIX: `svc-bench-brains-${process.pid}`,
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
    const call = await backgroundCall(platform.db, { developerId: developer.id, payerAccountId: developer.id, customerId: null, requestId: `bench_brains_${process.pid}` });
    const largest = Math.max(...options.sizes);
    const started = performance.now();
    const corpus = makeCorpus(largest, options.warmup + options.queries, { groupSize: 1_000, model: MODEL, dims: DIMS });
    console.log(`  ${largest} entries and ${corpus.queries.length} queries embedded by the emulator's function in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const now = Date.now();

    const rows: Row[] = [];
    const results = new Map<string, { p95: number; recall: number }>();
    let ambientBrain: string | undefined;
    for (const encryption of ['none', 'strict'] as const) {
      for (const size of options.sizes) {
        const created = await createBrain(platform, developer.id, { name: `bench ${encryption} ${size}`, encryption });
        brainIds.push(created.id);
        const loaded = await loadBrain(platform, developer.id, created.id, corpus, size, now);
        if (encryption === 'none' && size === Math.min(...options.sizes)) ambientBrain = created.id;
        const label = `${encryption}, ${size.toLocaleString('en-US')} entries`;
        console.log(`  ${label}: loaded in ${loaded.loadSeconds.toFixed(1)} s${loaded.indexSeconds === null ? '' : `, HNSW built in ${loaded.indexSeconds.toFixed(1)} s`}`);
        const first = await timed(() => recall(platform, developer.id, call, created.id, { query: corpus.queries[0]!.text, top_k: 8 }));
        // A large strict brain's IVF lists are built in the background after its first recall; measured once they serve.
        const listsStarted = performance.now();
        await platform.strictBrains.listsSettled(created.id);
        const listsSeconds = (performance.now() - listsStarted) / 1000;
        for (let i = 1; i < options.warmup; i++) await recall(platform, developer.id, call, created.id, { query: corpus.queries[i]!.text, top_k: 8 });
        const timedQueries = corpus.queries.slice(options.warmup);
        const plain = await latencies(timedQueries, (text) => recall(platform, developer.id, call, created.id, { query: text, top_k: 8 }));
        const explained = await latencies(timedQueries, (text) => recall(platform, developer.id, call, created.id, { query: text, top_k: 8, explain: true }));
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
          queries: timedQueries.length,
          'p50 ms': plain.p50.toFixed(1),
          'p95 ms': plain.p95.toFixed(1),
          'p99 ms': plain.p99.toFixed(1),
          'explain p50 ms': explained.p50.toFixed(1),
          'explain p95 ms': explained.p95.toFixed(1),
          'recall@10': recallAt10.toFixed(3),
        });
        console.log(`  ${label}: p95 ${plain.p95.toFixed(1)} ms (explain ${explained.p95.toFixed(1)} ms), recall@10 ${recallAt10.toFixed(3)}`);
      }
    }
    table(
      SECTION,
      `recall (the domain call: brain, query embedding by the emulator, candidates, composite in the CPU pool, contents), top_k 8 at scope / over every entry; ${options.warmup} warm-up then ${options.queries} timed one after another, explain off then on; recall@10 (top_k 10) against the exact composite top 10 of every entry`,
      rows,
    );
    const largestNone = results.get(`none:${largest}`)!;
    const largestStrict = results.get(`strict:${largest}`)!;
    const at = `at ${largest.toLocaleString('en-US')} entries`;
    goal(SECTION, { figure: `none-encrypted recall p95 ${at}`, target: '≤ 20 ms', value: `${largestNone.p95.toFixed(1)} ms`, met: largestNone.p95 <= 20 });
    goal(SECTION, { figure: `none-encrypted recall@10 ${at}`, target: '≥ 0.98', value: largestNone.recall.toFixed(3), met: largestNone.recall >= 0.98 });
    goal(SECTION, { figure: `strict recall p95 ${at}`, target: '≤ 60 ms', value: `${largestStrict.p95.toFixed(1)} ms`, met: largestStrict.p95 <= 60 });

    // ---- writes ----
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

    // ---- ambient recall on chat ----
    const { plaintext: key } = await createApiKey(platform.db, developer.id, { name: 'bench brains', scopes: ['api:chat'] });
    server = await listen(createGatewayApp(platform), 0, '127.0.0.1');
    const url = `${serverUrl(server)}/v1/chat/completions`;
    const chat = async (question: string, brain: string | undefined) => {
      const res = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(brain && { brain }) },
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
  } finally {
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    for (const id of brainIds) await repo.markDeleting(platform.db, id).then(() => repo.purgeBrain(platform.db, id)).catch(() => undefined);
    await platform.close();
    await stopChild(emulator);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Writes entries 0..size-1 of the corpus as one-chunk entries of the brain (sealed as the brain
 * says), in batches, then builds the plaintext brain's HNSW index once over them, as a bulk load
 * should.
 */
async function loadBrain(platform: GatewayServices, developerId: string, brainId: string, corpus: Corpus, size: number, now: number): Promise<Loaded> {
  const brain = (await repo.findBrain(platform.db, developerId, brainId))!;
  const keys = await brainKeys(platform, brain);
  const strict = brain.encryption === 'strict';
  const partition = repo.partitionOf(brain.id);
  const space = brain.active_space;
  const rankings: Loaded['rankings'] = [];
  const random = mulberry32(7);
  const started = performance.now();
  if (!strict) await platform.db.query(`DROP INDEX IF EXISTS ${partition}_s${space}_hnsw`);
  for (let from = 0; from < size; from += LOAD_BATCH) {
    const to = Math.min(size, from + LOAD_BATCH);
    const { rows: ids } = await platform.db.query<{ id: string }>(`SELECT nextval('brain_entries_version_id_seq')::text AS id FROM generate_series(1, $1)`, [to - from]);
    const entry = { version: [] as string[], id: [] as string[], cls: [] as string[], type: [] as (string | null)[], body: [] as (string | null)[], sealed: [] as (Buffer | null)[], bytes: [] as number[], uses: [] as number[], lastUsed: [] as (Date | null)[], created: [] as Date[], updated: [] as Date[] };
    const chunk = { content: [] as (string | null)[], sealed: [] as (Buffer | null)[], embedding: [] as (string | null)[], vectorSealed: [] as (Buffer | null)[] };
    for (let row = from; row < to; row++) {
      const entryId = `e${row}`;
      const kind = pick(random());
      const created = now - random() * 120 * DAY_MS;
      const updated = created + random() * (now - created);
      const uses = random() < 0.5 ? 0 : Math.floor(random() * 6);
      const lastUsed = uses > 0 ? updated + random() * (now - updated) : null;
      const text = corpus.texts[row]!;
      const vector = corpus.vectors.subarray(row * DIMS, (row + 1) * DIMS);
      entry.version.push(ids[row - from]!.id);
      entry.id.push(entryId);
      entry.cls.push(kind.class);
      entry.type.push(kind.type);
      entry.body.push(keys ? null : text);
      entry.sealed.push(keys ? sealText(keys, text, bodyAad(brain.id, entryId)) : null);
      entry.bytes.push(Buffer.byteLength(text));
      entry.uses.push(uses);
      entry.lastUsed.push(lastUsed === null ? null : new Date(lastUsed));
      entry.created.push(new Date(created));
      entry.updated.push(new Date(updated));
      chunk.content.push(keys ? null : text);
      chunk.sealed.push(keys ? sealText(keys, text, chunkAad(brain.id, entryId, 0)) : null);
      chunk.embedding.push(strict ? null : toSql(Array.from(vector)));
      chunk.vectorSealed.push(strict ? sealVector(keys as StoreKeys, vector, vectorAad(brain.id, space, entryId, 0)) : null);
      const ranking = rankingOf(brain.memory_policy, kind.class, kind.type);
      const anchor = ranking.anchor === 'created' ? created : ranking.anchor === 'updated' ? updated : (lastUsed ?? updated);
      rankings.push({ weight: ranking.weight, halfLifeDays: ranking.halfLifeDays, anchorAt: anchor, useCount: uses });
    }
    await platform.db.query(
      `INSERT INTO brain_entries (version_id, brain_id, entry_id, scope, class, type, body, body_sealed, body_bytes, use_count, last_used, created_at, updated_at, valid_from, chunks)
       SELECT u.version_id, $1, u.entry_id, '/', u.class, u.type, u.body, u.body_sealed, u.bytes, u.uses, u.last_used, u.created_at, u.updated_at, u.updated_at, 1
       FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::bigint[], $9::int[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[])
         AS u(version_id, entry_id, class, type, body, body_sealed, bytes, uses, last_used, created_at, updated_at)`,
      [brain.id, entry.version, entry.id, entry.cls, entry.type, entry.body, entry.sealed, entry.bytes, entry.uses, entry.lastUsed, entry.created, entry.updated],
    );
    await platform.db.query(
      `INSERT INTO ${partition} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)
       SELECT $1, $2, u.version_id, 0, u.entry_id, '/', u.content, u.content_sealed, u.embedding::vector, u.embedding_sealed, u.valid_from
       FROM unnest($3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::bytea[], $9::timestamptz[]) AS u(version_id, entry_id, content, content_sealed, embedding, embedding_sealed, valid_from)`,
      [brain.id, space, entry.version, entry.id, chunk.content, chunk.sealed, chunk.embedding, chunk.vectorSealed, entry.updated],
    );
  }
  await repo.bumpWriteSeq(platform.db, brain.id);
  const loadSeconds = (performance.now() - started) / 1000;
  let indexSeconds: number | null = null;
  if (!strict) {
    const indexStarted = performance.now();
    await repo.createSpaceIndex(platform.db, brain.id, space, brain.embedding_dims);
    indexSeconds = (performance.now() - indexStarted) / 1000;
  }
  await platform.db.query(`VACUUM (ANALYZE) ${partition}`);
  await platform.db.query(`ANALYZE brain_entries`);
  return { brain, entries: size, loadSeconds, indexSeconds, rankings };
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

async function latencies(queries: { text: string }[], run: (text: string) => Promise<unknown>) {
  const times: number[] = [];
  for (const query of queries) times.push((await timed(() => run(query.text))).ms);
  const sorted = times.sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95), p99: quantile(sorted, 0.99) };
}

async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const started = performance.now();
  const result = await work();
  return { ms: performance.now() - started, result };
}

function pick(r: number): (typeof MIX)[number] {
  let sum = 0;
  for (const kind of MIX) if (r < (sum += kind.share)) return kind;
  return MIX[MIX.length - 1]!;
}
