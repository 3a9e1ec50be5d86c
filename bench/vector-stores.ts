/**
 * Vector stores (issue 24's targets): the vector part of search at N chunks of 1,536 dimensions
 * in the three kinds of store (plaintext with pgvector's HNSW, sealed scanned exactly, sealed with
 * IVF lists), each with its recall@10 against an exact search of the same vectors in this
 * process; and ingest end to end (files attached, parsed, chunked, embedded by the emulator and
 * stored by the BullMQ stages) in chunks per second. Figures are printed, never asserted.
 *
 * The chunks of the search stores are written straight into their partitions (the ingest
 * pipeline is measured on its own below), with vectors the emulator's embeddings give synthetic
 * texts of a few dozen topics, so they cluster by topic as real embeddings do; the queries are
 * other texts of the same topics. The gateway's services, the ingest consumers and the search
 * run in this process; the emulator runs in its own, as an upstream would.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Worker } from 'bullmq';
import { toSql } from 'pgvector';
import type pg from 'pg';
import { createDeveloperAccount } from '../shared/accounts/accounts.js';
import { createGatewayServices, type GatewayServices } from '../shared/composition/gateway.js';
import { loadConfig } from '../shared/config.js';
import { newFileId } from '../shared/files/files.js';
import { insertFile } from '../shared/files/repository.js';
import { fileStorageFor } from '../shared/files/storage.js';
import { startConsumers, type ConsumerDefinition } from '../shared/platform/queues.js';
import { createRedis } from '../shared/platform/redis.js';
import { blindTerms, sealText, sealVector, textAad, vectorAad, type StoreKeys } from '../shared/vector-stores/crypto.js';
import { rebuildIvf } from '../shared/vector-stores/ivf.js';
import * as repo from '../shared/vector-stores/repository.js';
import { nearestByVector } from '../shared/vector-stores/search.js';
import { attachFiles } from '../shared/vector-stores/store-files.js';
import { createVectorStore } from '../shared/vector-stores/vector-stores.js';
import type { VectorStoreCaller } from '../shared/vector-stores/common.js';
import type { CreateVectorStoreBody } from '../shared/vector-stores/schemas.js';
import { vectorStoreConsumerDefinitions } from '../workers/vector-store-consumers.js';
import { stopChild } from '../scripts/lib/local-services.js';
import { CHUNK_WORDS, documentText, makeCorpus, mulberry32, quantile, TOPICS, type Corpus } from './support/corpus.js';
import { startEmulatorProcess } from './support/emulator-process.js';
import { startCpuMeter } from './support/process-cpu.js';
import { goal, table, type Row } from './support/report.js';

const SECTION = 'vector-stores';
const MODEL = 'text-embedding-3-small';
const DIMS = 1536;
const K = 10;
/** The exact neighbours whose similarity the corpus table shows. */
const NEIGHBOURS = [1, 5, 10, 11, 20, 50];
/** Files the search stores' chunks are spread over (search joins each chunk to its file's row). */
const FILES = 100;
/** Rows per INSERT while loading a store. */
const LOAD_BATCH = 1000;

export interface VectorStoreBenchOptions {
  /** A database with the migrations applied (bench/run.ts's svc_platform_bench). */
  databaseUrl: string;
  /** Chunks in each search store. */
  chunks: number;
  /** Timed queries per store, after `warmup` untimed ones. */
  queries: number;
  warmup: number;
  /** A store whose queries take longer than this (in total) stops early, and its row says how many ran. */
  storeSeconds: number;
  /** Ingest: this many text files of about `ingestFileBytes` each, attached at once to a plaintext store. */
  ingestFiles: number;
  ingestFileBytes: number;
  ingestRounds: number;
}

interface SearchStore {
  label: string;
  id: string;
  row: repo.VectorStoreRow;
  keys: StoreKeys | null;
  loadSeconds: number;
  /** The GIN indexes (words or blind terms), built after the load. */
  ginSeconds: number;
  /** HNSW index or IVF lists built after the load, if any. */
  build?: { what: string; seconds: number; detail?: string };
}

export async function runVectorStoreBench(options: VectorStoreBenchOptions): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-vs-'));
  const { child: emulator, providerEnv } = await startEmulatorProcess(0);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    REDIS_KEY_PREFIX: `svc-bench-vs-${process.pid}`,
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    ...providerEnv,
  });
  const platform = createGatewayServices(config, 'bench-vector-stores');
  await platform.ready;
  const storeIds: string[] = [];
  let consumers: Worker[] = [];
  const blocking = createRedis(config.REDIS_URL, 'blocking', platform.logger);
  try {
    const developer = await createDeveloperAccount(platform.db, { email: `vs-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 1_000_000_000 });
    const caller: VectorStoreCaller = { developerId: developer.id, payerAccountId: developer.id, customerId: null, passphrase: undefined };

    // ---- the corpus: N chunk texts and their vectors, and the queries with their exact top 10 ----
    const started = performance.now();
    const corpus = makeCorpus(options.chunks, options.warmup + options.queries, { groupSize: Math.ceil(options.chunks / FILES), model: MODEL, dims: DIMS });
    const corpusSeconds = (performance.now() - started) / 1000;
    console.log(`  ${options.chunks} chunks and ${corpus.queries.length} queries embedded by the emulator's function in ${corpusSeconds.toFixed(1)} s`);
    const exactStarted = performance.now();
    const exact = corpus.queries.slice(options.warmup).map((query) => exactTopK(corpus.vectors, query.vector, NEIGHBOURS.at(-1)!));
    console.log(`  exact top ${K} of ${exact.length} queries in ${((performance.now() - exactStarted) / 1000).toFixed(1)} s`);
    // How far apart the nearest chunks are: when the 10th and the 20th are about as near, an approximate index misses more of the exact top 10 while returning chunks as similar.
    table(
      SECTION,
      `the corpus: ${options.chunks} chunks of ${CHUNK_WORDS - 40} to ${CHUNK_WORDS + 40} words on ${TOPICS} topics; mean cosine similarity of the exact n-th nearest chunk to the ${exact.length} timed queries`,
      [Object.fromEntries(NEIGHBOURS.map((n) => [`n = ${n}`, (exact.reduce((sum, e) => sum + e.scores[n - 1]!, 0) / exact.length).toFixed(4)]))],
    );

    const fileIds = Array.from({ length: FILES }, () => newFileId());
    for (const [i, id] of fileIds.entries()) {
      await insertFile(platform.db, developer.id, { id, purpose: 'assistants', filename: `bench-${i}.txt`, bytes: 100_000, sha256: '0'.repeat(64), storageKey: id });
    }
    const perFile = Math.ceil(options.chunks / FILES);
    const placeOf = (row: number) => ({ fileId: fileIds[Math.floor(row / perFile)]!, chunkIndex: row % perFile });
    const rowOf = new Map(fileIds.map((id, i) => [id, i * perFile]));

    // ---- the three search stores ----
    const stores: SearchStore[] = [];
    const make = async (label: string, body: CreateVectorStoreBody) => {
      const created = await createVectorStore(platform, caller, { name: `bench ${label}`, embedding_model: MODEL, ...body });
      storeIds.push(created.id);
      const row = (await repo.findStoreById(platform.db, created.id))!;
      return { id: created.id, row, keys: await platform.vectorStoreKeys.keys(row) };
    };

    const plain = await make('plaintext', {});
    stores.push({ label: 'plaintext (pgvector HNSW)', ...plain, ...(await loadStore(platform, plain, corpus, placeOf, fileIds, perFile)) });

    const flat = await make('sealed flat', { encryption: 'managed', vector_sealing: 'full', vector_index: 'flat' });
    stores.push({ label: 'sealed, flat (exact scan)', ...flat, ...(await loadStore(platform, flat, corpus, placeOf, fileIds, perFile)) });

    const ivf = await make('sealed ivf', { encryption: 'managed', vector_sealing: 'full', vector_index: 'ivf' });
    const loaded = await loadStore(platform, ivf, corpus, placeOf, fileIds, perFile);
    // How much of the build is k-means and the assignment of every chunk (on the CPU pool); the rest is reading, opening and writing the lists back.
    let kMeansSeconds = 0;
    const kMeans = platform.cpu.kMeans.bind(platform.cpu);
    platform.cpu.kMeans = async (input) => {
      const kMeansStarted = performance.now();
      try {
        return await kMeans(input);
      } finally {
        kMeansSeconds += (performance.now() - kMeansStarted) / 1000;
      }
    };
    const buildStarted = performance.now();
    const built = await rebuildIvf(platform, ivf.id);
    platform.cpu.kMeans = kMeans;
    loaded.build = { what: 'rebuildIvf', seconds: (performance.now() - buildStarted) / 1000, detail: `${built.lists} lists, k-means and assignment ${kMeansSeconds.toFixed(1)} s of it` };
    // The build rewrote every chunk row (its list); vacuumed now rather than by autovacuum during the searches.
    await platform.db.query(`VACUUM (ANALYZE) ${repo.partitionOf(ivf.id)}`);
    console.log(`  ivf lists built in ${loaded.build.seconds.toFixed(1)} s: ${built.lists} lists over ${built.chunks} chunks`);
    stores.push({ label: 'sealed, ivf', ...ivf, ...loaded });

    // ---- search: latency of the vector part, and recall@10 against the exact top 10 ----
    const rows: Row[] = [];
    const results = new Map<string, { p95: number; recall: number }>();
    for (const store of stores) {
      const indexScansBefore = store.row.vector_sealing === 'full' ? 0 : await hnswScans(platform.db, store.id);
      const firstStarted = performance.now();
      await nearestByVector(platform, store.row, store.keys, corpus.queries[0]!.vector, K);
      const firstMs = performance.now() - firstStarted;
      for (let i = 1; i < options.warmup; i++) await nearestByVector(platform, store.row, store.keys, corpus.queries[i]!.vector, K);
      const times: number[] = [];
      let recallSum = 0;
      const budgetEnds = performance.now() + options.storeSeconds * 1000;
      for (let q = 0; q < options.queries && performance.now() < budgetEnds; q++) {
        const query = corpus.queries[options.warmup + q]!;
        const queryStarted = performance.now();
        const found = await nearestByVector(platform, store.row, store.keys, query.vector, K);
        times.push(performance.now() - queryStarted);
        recallSum += recallOf(found, exact[q]!, corpus.vectors, query.vector, rowOf);
      }
      const sorted = [...times].sort((a, b) => a - b);
      const p95 = quantile(sorted, 0.95);
      const recall = recallSum / times.length;
      results.set(store.label, { p95, recall });
      // A backend reports its index scans to the statistics when idle, within 10 s.
      if (store.row.vector_sealing !== 'full') await new Promise((resolve) => setTimeout(resolve, 11_000));
      const indexScans = store.row.vector_sealing === 'full' ? undefined : (await hnswScans(platform.db, store.id)) - indexScansBefore;
      rows.push({
        store: store.label,
        chunks: options.chunks,
        'load s': store.loadSeconds.toFixed(1),
        'GIN build s': store.ginSeconds.toFixed(1),
        'vector index build s': store.build ? `${store.build.seconds.toFixed(1)} (${store.build.what}${store.build.detail ? `, ${store.build.detail}` : ''})` : '',
        'first query ms': firstMs.toFixed(1),
        queries: times.length < options.queries ? `${times.length} (${options.storeSeconds} s budget)` : times.length,
        'p50 ms': quantile(sorted, 0.5).toFixed(1),
        'p95 ms': p95.toFixed(1),
        'p99 ms': quantile(sorted, 0.99).toFixed(1),
        'recall@10': recall.toFixed(3),
        ...(indexScans !== undefined && { 'HNSW index scans': `${indexScans} of ${options.warmup + times.length}` }),
      });
      console.log(`  ${store.label}: p95 ${p95.toFixed(1)} ms, recall@10 ${recall.toFixed(3)} over ${times.length} queries`);
    }
    table(SECTION, `search, vector part only (nearestByVector, top ${K}): ${options.chunks} chunks of ${DIMS} dimensions (${MODEL}), ${options.warmup} warm-up queries then ${options.queries} timed one after another; recall@10 against an exact cosine top ${K} of the same vectors`, rows);

    const plainResult = results.get('plaintext (pgvector HNSW)')!;
    const flatResult = results.get('sealed, flat (exact scan)')!;
    const ivfResult = results.get('sealed, ivf')!;
    const at = `at ${options.chunks.toLocaleString('en-US')} chunks`;
    goal(SECTION, { figure: `plaintext search p95 ${at}`, target: '≤ 20 ms', value: `${plainResult.p95.toFixed(1)} ms`, met: plainResult.p95 <= 20 });
    goal(SECTION, { figure: `plaintext recall@10 ${at}`, target: '≥ 0.95', value: plainResult.recall.toFixed(3), met: plainResult.recall >= 0.95 });
    goal(SECTION, { figure: `sealed ivf search p95 ${at}`, target: '≤ 50 ms', value: `${ivfResult.p95.toFixed(1)} ms`, met: ivfResult.p95 <= 50 });
    goal(SECTION, { figure: `sealed ivf recall@10 ${at}`, target: '≥ 0.95', value: ivfResult.recall.toFixed(3), met: ivfResult.recall >= 0.95 });
    goal(SECTION, { figure: `sealed flat search p95 ${at}`, target: '≤ 100 ms', value: `${flatResult.p95.toFixed(1)} ms`, met: flatResult.p95 <= 100 });

    // The search stores' rows are large; dropped before ingest so it runs on a quiet database.
    for (const id of storeIds.splice(0)) await dropStore(platform, id);

    // ---- ingest end to end ----
    consumers = startConsumers(vectorStoreConsumerDefinitions(platform) as ConsumerDefinition[], blocking, platform.queues.prefix, platform.logger);
    await Promise.all(consumers.map((consumer) => consumer.waitUntilReady()));
    // A round lasts a few seconds, so one round's figure moves with whatever else the machine does; the median of the rounds is the figure.
    const rounds = [];
    for (let round = 1; round <= options.ingestRounds; round++) {
      const ingest = await measureIngest(platform, caller, options, storeIds, emulator.pid, round);
      console.log(`  ingest round ${round}: ${ingest.row.chunks} chunks in ${ingest.row['wall s']} s, ${ingest.row['chunks/s']} chunks/s`);
      rounds.push(ingest);
    }
    table(
      SECTION,
      `ingest: ${options.ingestFiles} text files of ${Math.round(options.ingestFileBytes / 1000)} KB attached at once to a new plaintext store, from attach to every file completed (parse, chunk, embed, store on BullMQ; ${config.VECTOR_STORE_INGEST_CONCURRENCY} jobs a stage, ${config.VECTOR_STORE_EMBED_BATCH} chunks an embeddings call; consumers in this process, emulator in its own), ${options.ingestRounds} rounds`,
      rounds.map((ingest) => ingest.row),
    );
    const median = [...rounds].sort((a, b) => a.chunksPerSecond - b.chunksPerSecond)[Math.floor(rounds.length / 2)]!;
    goal(SECTION, { figure: `ingest throughput, median of ${rounds.length} rounds`, target: '≥ 500 chunks/s', value: `${Math.round(median.chunksPerSecond)} chunks/s`, met: median.chunksPerSecond >= 500 });
  } finally {
    await Promise.all(consumers.map((consumer) => consumer.close()));
    for (const id of storeIds) await dropStore(platform, id).catch(() => undefined);
    await deleteRedisKeys(platform, `${config.REDIS_KEY_PREFIX}:*`);
    await blocking.quit();
    await platform.close();
    await stopChild(emulator);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---- loading the search stores ------------------------------------------------------------------


/**
 * Writes every chunk of the corpus into the store's partition (plaintext text and vector, or
 * sealed text, blind terms and sealed vector), its files as completed, and for a plaintext store
 * builds the HNSW index after the load, as a bulk load should.
 */
async function loadStore(
  platform: GatewayServices,
  store: { id: string; row: repo.VectorStoreRow; keys: StoreKeys | null },
  corpus: Corpus,
  placeOf: (row: number) => { fileId: string; chunkIndex: number },
  fileIds: string[],
  perFile: number,
): Promise<{ loadSeconds: number; ginSeconds: number; build?: SearchStore['build'] }> {
  const partition = repo.partitionOf(store.id);
  const space = Number(store.row.active_space);
  const sealed = store.row.vector_sealing === 'full';
  const total = corpus.texts.length;
  const client = await platform.db.connect();
  try {
    // A bulk load writes the rows first and indexes them after: the HNSW index with the
    // repository's own functions, the GIN indexes (words, blind terms) from their definitions.
    if (!sealed) await repo.dropSpaceIndex(client, store.id, space);
    const { rows: ginIndexes } = await client.query<{ name: string; definition: string }>(
      `SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
       WHERE i.indrelid = $1::regclass AND am.amname = 'gin'`,
      [partition],
    );
    for (const index of ginIndexes) await client.query(`DROP INDEX ${index.name}`);
    const started = performance.now();
    let jsSeconds = 0;
    let inFlight: Promise<unknown> = Promise.resolve();
    for (let from = 0; from < total; from += LOAD_BATCH) {
      const jsStarted = performance.now();
      const to = Math.min(total, from + LOAD_BATCH);
      const files: string[] = [];
      const indexes: number[] = [];
      const tokens: number[] = [];
      const texts: (string | null)[] = [];
      const embeddings: string[] = [];
      const textsSealed: Buffer[] = [];
      const terms: string[] = [];
      const vectorsSealed: Buffer[] = [];
      for (let row = from; row < to; row++) {
        const { fileId, chunkIndex } = placeOf(row);
        const text = corpus.texts[row]!;
        const vector = corpus.vectors.subarray(row * DIMS, (row + 1) * DIMS);
        files.push(fileId);
        indexes.push(chunkIndex);
        tokens.push(Math.ceil(text.length / 4));
        if (sealed) {
          textsSealed.push(sealText(store.keys!, text, textAad(store.id, fileId, chunkIndex)));
          terms.push(blindTerms(store.keys!, text).join(' '));
          vectorsSealed.push(sealVector(store.keys!, vector, vectorAad(store.id, space, fileId, chunkIndex)));
        } else {
          texts.push(text);
          embeddings.push(toSql(Array.from(vector)));
        }
      }
      jsSeconds += (performance.now() - jsStarted) / 1000;
      // One statement in flight while the next batch is sealed or formatted.
      await inFlight;
      inFlight = sealed
        ? client.query(
            `INSERT INTO ${partition} (vector_store_id, space, file_id, chunk_index, tokens, text_sealed, terms, embedding_sealed)
             SELECT $1, $2, u.file_id, u.chunk_index, u.tokens, u.text_sealed, string_to_array(u.terms, ' '), u.embedding_sealed
             FROM unnest($3::text[], $4::int[], $5::int[], $6::bytea[], $7::text[], $8::bytea[]) AS u(file_id, chunk_index, tokens, text_sealed, terms, embedding_sealed)`,
            [store.id, space, files, indexes, tokens, textsSealed, terms, vectorsSealed],
          )
        : client.query(
            `INSERT INTO ${partition} (vector_store_id, space, file_id, chunk_index, tokens, text, embedding)
             SELECT $1, $2, u.file_id, u.chunk_index, u.tokens, u.text, u.embedding::vector
             FROM unnest($3::text[], $4::int[], $5::int[], $6::text[], $7::text[]) AS u(file_id, chunk_index, tokens, text, embedding)`,
            [store.id, space, files, indexes, tokens, texts, embeddings],
          );
    }
    await inFlight;
    const chunkCounts = fileIds.map((_, i) => Math.max(0, Math.min(perFile, total - i * perFile)));
    await client.query(
      `INSERT INTO vector_store_files (vector_store_id, file_id, developer_id, payer_account_id, status, attempt, chunking, chunk_count, usage_bytes)
       SELECT $1, u.file_id, $2, $2, 'completed', 1, '{"type":"auto","max_chunk_size_tokens":800,"chunk_overlap_tokens":400}'::jsonb, u.chunks, u.chunks * $3::bigint
       FROM unnest($4::text[], $5::int[]) AS u(file_id, chunks) WHERE u.chunks > 0`,
      [store.id, store.row.developer_id, 1_200 + DIMS * 4, fileIds, chunkCounts],
    );
    const loadSeconds = (performance.now() - started) / 1000;
    await client.query(`SET maintenance_work_mem = '1GB'`);
    const ginStarted = performance.now();
    for (const index of ginIndexes) await client.query(index.definition);
    const ginSeconds = (performance.now() - ginStarted) / 1000;
    let build: SearchStore['build'];
    if (!sealed) {
      const buildStarted = performance.now();
      await repo.createSpaceIndex(client, store.row, space, DIMS);
      build = { what: `HNSW m ${repo.HNSW.m}, ef_construction ${repo.HNSW.efConstruction}, ${store.row.hnsw_precision} precision`, seconds: (performance.now() - buildStarted) / 1000 };
    }
    await client.query('RESET maintenance_work_mem');
    // What autovacuum would do in the next minutes (and would otherwise do during the searches):
    // the visibility map and the planner's statistics.
    await client.query(`VACUUM (ANALYZE) ${partition}`);
    await client.query('VACUUM (ANALYZE) vector_store_files');
    console.log(
      `  ${sealed ? `sealed ${store.row.vector_index}` : 'plaintext'} store loaded in ${loadSeconds.toFixed(1)} s (${jsSeconds.toFixed(1)} s of it ${sealed ? 'sealing' : 'formatting'} in the bench), GIN indexes built in ${ginSeconds.toFixed(1)} s${build ? `, HNSW in ${build.seconds.toFixed(1)} s` : ''}`,
    );
    return { loadSeconds, ginSeconds, ...(build && { build }) };
  } finally {
    client.release();
  }
}

/** Index scans of the store's HNSW index so far: whether the plaintext searches used it. */
async function hnswScans(db: pg.Pool, storeId: string): Promise<number> {
  const { rows } = await db.query<{ scans: string | null }>(
    `SELECT sum(idx_scan)::text AS scans FROM pg_stat_user_indexes WHERE relname = $1 AND indexrelname LIKE '%\\_hnsw'`,
    [repo.partitionOf(storeId)],
  );
  return Number(rows[0]?.scans ?? 0);
}

async function dropStore(platform: GatewayServices, id: string): Promise<void> {
  await repo.dropStoreContent(platform.db, id);
  await platform.db.query(`DELETE FROM vector_stores WHERE id = $1`, [id]);
}

async function deleteRedisKeys(platform: GatewayServices, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await platform.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    if (keys.length) await platform.redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

// ---- ingest -------------------------------------------------------------------------------------

async function measureIngest(
  platform: GatewayServices,
  caller: VectorStoreCaller,
  options: VectorStoreBenchOptions,
  storeIds: string[],
  emulatorPid: number | undefined,
  round: number,
): Promise<{ row: Row; chunksPerSecond: number }> {
  const created = await createVectorStore(platform, caller, { name: `bench ingest ${round}`, embedding_model: MODEL });
  storeIds.push(created.id);
  const store = (await repo.findStoreById(platform.db, created.id))!;
  const storage = fileStorageFor(platform.config);
  const random = mulberry32(24 + round);
  const fileIds: string[] = [];
  let bytes = 0;
  for (let i = 0; i < options.ingestFiles; i++) {
    const id = newFileId();
    const body = Buffer.from(documentText(random, options.ingestFileBytes));
    const stored = await storage.write(id, (async function* () {
      yield body;
    })());
    await insertFile(platform.db, caller.developerId, { id, purpose: 'assistants', filename: `ingest-${i}.txt`, bytes: stored.bytes, sha256: stored.sha256, storageKey: id });
    fileIds.push(id);
    bytes += stored.bytes;
  }

  const meter = startCpuMeter({ gateway: process.pid, emulator: emulatorPid });
  const started = performance.now();
  await attachFiles(platform, caller, store, fileIds.map((id) => ({ file_id: id })), { batchId: null });
  let counts: { pending: number; completed: number; failed: number; chunks: number };
  let lastPrint = started;
  for (;;) {
    const { rows } = await platform.db.query<{ pending: number; completed: number; failed: number; chunks: number }>(
      `SELECT count(*) FILTER (WHERE status IN ('pending', 'in_progress'))::int AS pending, count(*) FILTER (WHERE status = 'completed')::int AS completed,
         count(*) FILTER (WHERE status IN ('failed', 'cancelled'))::int AS failed, coalesce(sum(chunk_count), 0)::int AS chunks
       FROM vector_store_files WHERE vector_store_id = $1`,
      [store.id],
    );
    counts = rows[0]!;
    if (counts.pending === 0) break;
    if (performance.now() - lastPrint > 5_000) {
      lastPrint = performance.now();
      console.log(`  ${((lastPrint - started) / 1000).toFixed(0)} s: ${counts.completed} files completed, ${counts.pending} in progress`);
    }
    if (performance.now() - started > 600_000) throw new Error('ingest did not finish in 10 minutes');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const seconds = (performance.now() - started) / 1000;
  const cpu = meter.stop();
  const chunksPerSecond = counts.chunks / seconds;
  return {
    chunksPerSecond,
    row: {
      round,
      'files completed / failed': `${counts.completed} / ${counts.failed}`,
      'MB in': (bytes / 1e6).toFixed(2),
      chunks: counts.chunks,
      'wall s': seconds.toFixed(2),
      'chunks/s': Math.round(chunksPerSecond),
      'MB/s': (bytes / 1e6 / seconds).toFixed(2),
      'gateway CPU s': cpu.seconds.gateway!.toFixed(1),
      'emulator CPU s': cpu.seconds.emulator!.toFixed(1),
      'PostgreSQL CPU s': cpu.seconds.postgres!.toFixed(1),
      'machine busy': cpu.busy === undefined ? '' : `${Math.round(cpu.busy * 100)} %`,
    },
  };
}


// ---- exact search and recall ------------------------------------------------------------------------

interface Exact {
  /** Similarities of the nearest `keep` rows, best first. */
  scores: Float64Array;
  /** The k-th best similarity: a result at least this similar is as good as the exact one (ties). */
  kth: number;
}

/**
 * The exact nearest `keep` rows by cosine (the vectors are unit length, so a dot product), over
 * the query's non-zero components only (the emulator's vectors are sparse; the sum is the same).
 */
function exactTopK(vectors: Float32Array, query: number[], keep: number): Exact {
  const nonZero: number[] = [];
  for (let i = 0; i < DIMS; i++) if (query[i] !== 0) nonZero.push(i);
  const at = Int32Array.from(nonZero);
  const weights = Float64Array.from(nonZero, (i) => query[i]!);
  const rows = vectors.length / DIMS;
  // Sorted worst first; a better score slides into place.
  const best = new Float64Array(keep).fill(Number.NEGATIVE_INFINITY);
  for (let row = 0; row < rows; row++) {
    const offset = row * DIMS;
    let score = 0;
    for (let j = 0; j < at.length; j++) score += vectors[offset + at[j]!]! * weights[j]!;
    if (score <= best[0]!) continue;
    let slot = 0;
    while (slot + 1 < keep && best[slot + 1]! < score) {
      best[slot] = best[slot + 1]!;
      slot++;
    }
    best[slot] = score;
  }
  const scores = best.reverse();
  return { scores, kth: scores[K - 1]! };
}

/** recall@k: the share of the results at least as similar as the exact k-th (so a tie at the boundary is no miss). */
function recallOf(found: { file_id: string; chunk_index: number }[], exact: Exact, vectors: Float32Array, query: number[], rowOf: Map<string, number>): number {
  let hits = 0;
  for (const result of found.slice(0, K)) {
    const row = rowOf.get(result.file_id)! + result.chunk_index;
    let score = 0;
    for (let i = 0; i < DIMS; i++) score += vectors[row * DIMS + i]! * query[i]!;
    if (score >= exact.kth - 1e-6) hits++;
  }
  return hits / K;
}
