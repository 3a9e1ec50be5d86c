import { UnrecoverableError, type Job } from 'bullmq';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { backgroundCall } from '../billing/background-call.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import * as filesRepo from '../files/repository.js';
import { fileStorageFor } from '../files/storage.js';
import { createEmbeddings, planEmbeddings } from '../inference/embeddings.js';
import { blindTerms, open, textAad, vectorAad, seal, sealText, sealVector, storeKeys, type StoreKeys } from './crypto.js';
import { chunkText } from './chunking.js';
import { extractFacts } from './facts.js';
import { queueIvfBuild } from './ivf.js';
import { extractText, FileParseError } from './parsing.js';
import * as repo from './repository.js';
import type { VectorStoreServices } from './common.js';

/**
 * File ingest as a pipeline of BullMQ stages: parse (extract the file's text) -> chunk (token
 * windows, sealed when the store is encrypted) -> embed (metered embedding calls, a batch of
 * chunks at a time) -> facts (graphrag stores only: triples through the chat path) -> store (the
 * file completes and becomes searchable). Each stage is a job
 * with retries; each acts only for the attempt it was queued for and only while the file is
 * still pending or in progress, and each writes what it makes idempotently, so a worker killed
 * mid-stage loses nothing when the job runs again and doubles nothing (chunks are keyed by their
 * index; an embedding batch's charge is keyed by its first chunk).
 */
export const INGEST_STAGES = ['parse', 'chunk', 'embed', 'facts', 'store'] as const;
export type IngestStage = (typeof INGEST_STAGES)[number];
export const ingestQueue = (stage: IngestStage) => `vector-store-${stage}`;

export interface IngestJob {
  storeId: string;
  fileId: string;
  attempt: number;
  /** byok stores only: the data key, wrapped by the master key (the stages outlive the request's lease). */
  wrappedKey?: string;
  /** The embedding space the chunk stage wrote into (a migration may flip the store's space meanwhile). */
  space?: number;
}

const JOB_OPTIONS = {
  attempts: 6,
  backoff: { type: 'exponential', delay: 1_000 },
  removeOnComplete: true,
  removeOnFail: { age: 86_400 },
} as const;

export async function enqueueIngest(platform: Pick<VectorStoreServices, 'queues' | 'vectorStoreKeys'>, store: repo.VectorStoreRow, files: repo.StoreFileRow[], dataKey: Buffer | null): Promise<void> {
  const wrappedKey = store.encryption === 'byok' && dataKey ? platform.vectorStoreKeys.wrapForJob(store.id, dataKey) : undefined;
  await platform.queues.queue<IngestJob>(ingestQueue('parse')).addBulk(
    files.map((file) => {
      const data: IngestJob = { storeId: store.id, fileId: file.file_id, attempt: file.attempt, ...(wrappedKey && { wrappedKey }) };
      return { name: 'parse', data, opts: { ...JOB_OPTIONS, jobId: jobIdOf('parse', data) } };
    }),
  );
}

/** The sweep's restart of an ingest whose queued job was lost: parse again, under a job id of its own. */
export async function restartIngest(platform: Pick<VectorStoreServices, 'queues'>, job: IngestJob): Promise<void> {
  await platform.queues.queue<IngestJob>(ingestQueue('parse')).add('parse', job, { ...JOB_OPTIONS, jobId: `${jobIdOf('parse', job)}-restart-${Date.now()}` });
}

/** One job per stage, file and attempt: queuing a stage twice (a retried stage, a recovery sweep) runs it once. */
const jobIdOf = (stage: IngestStage, job: IngestJob) => `${stage}-${job.storeId}-${job.fileId}-${job.attempt}${job.space ? `-s${job.space}` : ''}`;

async function enqueueNext(platform: GatewayServices, stage: IngestStage, job: IngestJob): Promise<void> {
  await platform.queues.queue<IngestJob>(ingestQueue(stage)).add(stage, job, { ...JOB_OPTIONS, jobId: jobIdOf(stage, job) });
}

/** The BullMQ processor of a stage: permanent failures end the file as failed at once; others retry, and fail it on the last try. */
export function ingestProcessor(platform: GatewayServices, stage: IngestStage) {
  const run = STAGES[stage];
  return async (job: Job<IngestJob>) => {
    try {
      return await run(platform, job.data);
    } catch (error) {
      const permanent = error instanceof FileParseError || (error instanceof ServiceError && error.status < 500 && error.status !== 429);
      const lastTry = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      if (permanent || lastTry) {
        await failFile(platform, job.data, lastErrorOf(error));
        if (permanent) throw new UnrecoverableError((error as Error).message);
      }
      throw error;
    }
  };
}

function lastErrorOf(error: unknown): { code: string; message: string } {
  if (error instanceof FileParseError) return { code: error.code, message: error.message };
  if (error instanceof ServiceError) return { code: error.code, message: error.message };
  return { code: 'server_error', message: 'The file could not be processed; retry it.' };
}

interface IngestContext {
  store: repo.VectorStoreRow;
  file: repo.StoreFileRow;
  keys: StoreKeys | null;
  space: number;
}

/** The store and file of a job, or null when the job is stale: the file was cancelled, detached, retried again, or the store deleted. */
async function contextOf(platform: GatewayServices, job: IngestJob, claim: boolean): Promise<IngestContext | null> {
  const store = await repo.findStoreById(platform.db, job.storeId);
  if (!store || store.state !== 'active') return null;
  const file = claim
    ? await repo.moveFile(platform.db, job.storeId, job.fileId, ['pending', 'in_progress'], 'in_progress', { attempt: job.attempt })
    : await repo.findStoreFile(platform.db, job.storeId, job.fileId);
  if (!file || file.attempt !== job.attempt || (file.status !== 'pending' && file.status !== 'in_progress')) return null;
  if (!claim) await repo.touchFile(platform.db, job.storeId, job.fileId, job.attempt);
  return { store, file, keys: await keysOf(platform, store, job), space: store.active_space };
}

async function keysOf(platform: GatewayServices, store: repo.VectorStoreRow, job: IngestJob): Promise<StoreKeys | null> {
  if (store.encryption === 'none') return null;
  if (store.encryption === 'managed') return platform.vectorStoreKeys.keys(store);
  if (!job.wrappedKey) throw new UnrecoverableError('a byok ingest job without its key');
  return storeKeys(platform.vectorStoreKeys.unwrapForJob(store.id, job.wrappedKey));
}

const extractedKey = (job: IngestJob) => `vsx_${job.storeId}_${job.fileId}_${job.attempt}`;
const chunkedKey = (job: IngestJob) => `vsc_${job.storeId}_${job.fileId}_${job.attempt}`;

/** A chunk as the chunk stage plans it for the embed stage (text sealed for an encrypted store). */
interface PlannedChunk {
  chunkIndex: number;
  tokens: number;
  text: string | null;
  textSealed: string | null;
  terms: string[] | null;
}

const STAGES: Record<IngestStage, (platform: GatewayServices, job: IngestJob) => Promise<unknown>> = {
  /** parse: the file's bytes to text, kept (sealed for an encrypted store) for the chunk stage. */
  async parse(platform, job) {
    const context = await contextOf(platform, job, true);
    if (!context) return { stale: true };
    const source = await filesRepo.findFile(platform.db, context.store.developer_id, job.fileId);
    if (!source) throw new FileParseError('invalid_file', 'The file was deleted before it could be read.');
    const storage = fileStorageFor(platform.config);
    const bytes = await readAll(storage.read(source.storage_key));
    const text = await extractText(bytes, source.filename);
    const body = context.keys ? seal(context.keys.text, Buffer.from(text), extractedKey(job)) : Buffer.from(text);
    await storage.write(extractedKey(job), (async function* () {
      yield body;
    })());
    await enqueueNext(platform, 'chunk', job);
    return { characters: text.length };
  },

  /**
   * chunk: token windows of the file's strategy, sealed and blind-indexed for an encrypted store,
   * kept for the embed stage (any chunks a killed earlier run wrote are removed).
   */
  async chunk(platform, job) {
    const context = await contextOf(platform, job, false);
    if (!context) return { stale: true };
    const storage = fileStorageFor(platform.config);
    const body = await readAll(storage.read(extractedKey(job)));
    const text = (context.keys ? open(context.keys.text, body, extractedKey(job)) : body).toString('utf8');
    const chunks = chunkText(text, context.file.chunking);
    const { store, keys, space } = context;
    const planned: PlannedChunk[] = chunks.map((chunk) => ({
      chunkIndex: chunk.index,
      tokens: chunk.tokens,
      text: keys ? null : chunk.text,
      textSealed: keys ? sealText(keys, chunk.text, textAad(store.id, job.fileId, chunk.index)).toString('base64') : null,
      terms: keys ? blindTerms(keys, chunk.text) : null,
    }));
    await storage.write(chunkedKey(job), (async function* () {
      yield JSON.stringify(planned);
    })());
    const current = await withTransaction(platform.db, async (client) => {
      // Under the file's row lock: a cancel or retry that commits first leaves this write out.
      const file = await repo.findStoreFile(client, job.storeId, job.fileId, true);
      if (!file || file.attempt !== job.attempt || file.status !== 'in_progress') return false;
      await repo.replaceChunks(client, store.id, space, job.fileId, []);
      await repo.setChunkCount(client, store.id, job.fileId, planned.length);
      return true;
    });
    if (!current) return { stale: true };
    await enqueueNext(platform, 'embed', { ...job, space });
    await storage.delete(extractedKey(job));
    return { chunks: chunks.length };
  },

  /**
   * embed: the planned chunks not written yet, a batch at a time, each batch one metered call
   * billed once, written whole with its vectors (so each row enters the partition's full-text and
   * vector indexes once, not once for its text and again for its vector).
   */
  async embed(platform, job) {
    const context = await contextOf(platform, job, false);
    if (!context) return { stale: true };
    const { store, file, keys } = context;
    const space = job.space ?? context.space;
    const call = await meteredCallOf(platform, file);
    const planned = JSON.parse((await readAll(fileStorageFor(platform.config).read(chunkedKey(job)))).toString('utf8')) as PlannedChunk[];
    const written = await repo.writtenChunkIndexes(platform.db, store.id, space, job.fileId);
    const missing = planned.filter((chunk) => !written.has(chunk.chunkIndex));
    const batchSize = platform.config.VECTOR_STORE_EMBED_BATCH;
    const sealed = store.vector_sealing === 'full';
    for (let from = 0; from < missing.length; from += batchSize) {
      const batch = missing.slice(from, from + batchSize);
      const texts = batch.map((chunk) => chunk.text ?? open(keys!.text, Buffer.from(chunk.textSealed!, 'base64'), textAad(store.id, job.fileId, chunk.chunkIndex)).toString('utf8'));
      const vectors = await embedTexts(platform, call, store, texts, `vs:${store.id}:${space}:${job.fileId}:${job.attempt}:${batch[0]!.chunkIndex}`);
      const current = await withTransaction(platform.db, async (client) => {
        const locked = await repo.findStoreFile(client, job.storeId, job.fileId, true);
        if (!locked || locked.attempt !== job.attempt || locked.status !== 'in_progress') return false;
        await repo.insertEmbeddedChunks(
          client,
          store.id,
          space,
          job.fileId,
          batch.map((chunk, i) => ({
            chunkIndex: chunk.chunkIndex,
            tokens: chunk.tokens,
            text: chunk.text,
            textSealed: chunk.textSealed === null ? null : Buffer.from(chunk.textSealed, 'base64'),
            terms: chunk.terms,
            embedding: sealed ? null : vectors[i]!,
            embeddingSealed: sealed ? sealVector(keys!, vectors[i]!, vectorAad(store.id, space, job.fileId, chunk.chunkIndex)) : null,
          })),
        );
        await repo.touchFile(client, store.id, job.fileId, job.attempt);
        return true;
      });
      if (!current) return { stale: true };
    }
    await enqueueNext(platform, store.graphrag_enabled ? 'facts' : 'store', job);
    return { embedded: missing.length };
  },

  /** facts (graphrag stores): subject-predicate-object triples of each chunk, through the chat path. */
  async facts(platform, job) {
    const context = await contextOf(platform, job, false);
    if (!context) return { stale: true };
    const { store, file, keys } = context;
    const space = job.space ?? context.space;
    const call = await meteredCallOf(platform, file);
    const chunks = await repo.fileChunks(platform.db, store.id, space, job.fileId);
    const facts: { chunkIndex: number; subject: string; predicate: string; object: string }[] = [];
    for (const chunk of chunks) {
      const text = chunk.text ?? open(keys!.text, chunk.text_sealed!, textAad(store.id, job.fileId, chunk.chunk_index)).toString('utf8');
      const found = await extractFacts(platform, call, platform.config.VECTOR_STORE_FACTS_MODEL, text, `vsfacts:${store.id}:${job.fileId}:${job.attempt}:${chunk.chunk_index}`);
      facts.push(...found.map((fact) => ({ chunkIndex: chunk.chunk_index, ...fact })));
    }
    await repo.insertFacts(platform.db, store.id, job.fileId, facts);
    await enqueueNext(platform, 'store', job);
    return { facts: facts.length };
  },

  /** store: every chunk has its vector; the file completes and its chunks become searchable. */
  async store(platform, job) {
    const context = await contextOf(platform, job, false);
    if (!context) return { stale: true };
    const { store } = context;
    const space = job.space ?? context.space;
    if (space !== store.active_space) {
      // A migration flipped the store to a new space while this file was ingesting: ingest it again there.
      await enqueueNext(platform, 'parse', { ...job, space: store.active_space });
      return { rechunked: store.active_space };
    }
    const totals = await repo.chunkTotals(platform.db, store.id, space, job.fileId);
    if (totals.embedded < context.file.chunk_count) {
      // Chunks are missing (removed by a concurrent re-chunk): embed again.
      await platform.queues.queue<IngestJob>(ingestQueue('embed')).add('embed', job, { ...JOB_OPTIONS, jobId: `${jobIdOf('embed', job)}-again-${Date.now()}` });
      return { waiting: context.file.chunk_count - totals.embedded };
    }
    const usageBytes = totals.text_bytes + totals.chunks * store.dimensions * 4;
    const completed = await withTransaction(platform.db, async (client) => {
      await repo.lockBatchOfFile(client, store.id, job.fileId);
      const moved = await repo.moveFile(client, store.id, job.fileId, ['in_progress'], 'completed', { attempt: job.attempt, chunkCount: totals.chunks, usageBytes });
      if (!moved) return undefined;
      await recordEvent(client, store.developer_id, 'vector_store.file.completed', { vector_store_id: store.id, file_id: job.fileId, chunks: totals.chunks });
      await finishBatchIn(client, moved);
      return moved;
    });
    if (completed) await repo.touchStore(platform.db, store.id);
    await fileStorageFor(platform.config).delete(chunkedKey(job));
    if (completed && store.vector_index === 'ivf') await queueIvfBuild(platform, { storeId: store.id, ...(job.wrappedKey && { wrappedKey: job.wrappedKey }) });
    return { chunks: totals.chunks, completed: Boolean(completed) };
  },
};

/**
 * The last file of a batch to finish (completed, failed or cancelled) finishes the batch, once, in
 * the transaction that finishes the file: the batch's status (read from its files' counts) and its
 * completed event commit together, and no crash between two commits can leave a batch that never
 * finishes. The transaction took the batch's lock before the file's (repo.lockBatchOfFile).
 */
export async function finishBatchIn(client: Queryable, file: Pick<repo.StoreFileRow, 'batch_id' | 'developer_id'>): Promise<void> {
  if (!file.batch_id) return;
  const finished = await repo.finishFileBatch(client, file.batch_id);
  if (finished) await recordEvent(client, file.developer_id, 'vector_store.file_batch.completed', { id: finished.id, vector_store_id: finished.vector_store_id });
}

async function failFile(platform: GatewayServices, job: IngestJob, error: { code: string; message: string }): Promise<void> {
  await withTransaction(platform.db, async (client) => {
    if (error.code === 'wallet_empty') await repo.lockStoreForSuspension(client, job.storeId);
    await repo.lockBatchOfFile(client, job.storeId, job.fileId);
    const failed = await repo.moveFile(client, job.storeId, job.fileId, ['pending', 'in_progress'], 'failed', { attempt: job.attempt, error });
    if (!failed) return;
    await repo.deleteFileChunks(client, job.storeId, job.fileId);
    await recordEvent(client, failed.developer_id, 'vector_store.file.failed', { vector_store_id: job.storeId, file_id: job.fileId, last_error: error });
    // The developer's wallet could not pay: the store is suspended until it can (a customer's empty wallet fails only its file).
    if (error.code === 'wallet_empty' && (await repo.setSuspended(client, job.storeId, true))) {
      await recordEvent(client, failed.developer_id, 'vector_store.suspended', { id: job.storeId, reason: 'wallet_empty' });
    }
    await finishBatchIn(client, failed);
  });
  await fileStorageFor(platform.config).delete(extractedKey(job));
  await fileStorageFor(platform.config).delete(chunkedKey(job));
}

/** The metered call an ingest's embeddings bill to: the attach's payer, or the customer it named. */
function meteredCallOf(platform: GatewayServices, file: repo.StoreFileRow): Promise<MeteredCall> {
  return backgroundCall(platform.db, { developerId: file.developer_id, payerAccountId: file.payer_account_id, customerId: file.customer_id, requestId: `ingest_${file.vector_store_id}_${file.file_id}_${file.attempt}` });
}

/** Embeds texts with the store's model through the gateway's metering; `billingKey` makes the charge once-only. */
export async function embedTexts(
  platform: GatewayServices,
  call: MeteredCall,
  store: Pick<repo.VectorStoreRow, 'embedding_model' | 'dimensions'>,
  texts: string[],
  billingKey: string | undefined,
  /** `spent` adds up what the calls charged, for work that reports its cost (a learn pass). */
  options: { signal?: AbortSignal; spent?: { micros: number } } = {},
): Promise<number[][]> {
  const plan = planEmbeddings({ model: store.embedding_model, input: texts, dimensions: store.dimensions }, platform.providers);
  const created = await createEmbeddings(platform, call, plan, { signal: options.signal ?? new AbortController().signal, ...(billingKey && { billingKey }) });
  if (options.spent) options.spent.micros += created.deductedMicros;
  return created.body.data.map((entry) => entry.embedding as number[]);
}

async function readAll(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts);
}
