import { createHash } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { withTransaction, type Queryable } from '../db/pool.js';
import { recordEvent, type EventType } from '../events/outbox.js';
import { recordGeneratedFile, writeGeneratedFile } from '../files/files.js';
import * as files from '../files/repository.js';
import { fileStorageFor } from '../files/storage.js';
import { newId } from '../ids.js';
import type { GatewayServices } from '../composition/gateway.js';
import { formatBatch, MAX_BATCH_REQUESTS } from './batches.js';
import { readJsonlLines } from './jsonl.js';
import { runBatchLine, type BatchContext } from './lines.js';
import * as repo from './repository.js';

/**
 * The worker's side of a batch, one function per activity of `batchWorkflow`:
 * validateBatchInput reads the input file as a stream into per-line rows, runBatchChunk runs a
 * range of them, finalizeBatch streams the results into the output and error files. Every step
 * can run again after a crash: validation starts over in one transaction, a chunk runs only the
 * lines still pending, finalize writes the same file ids and ends the batch once.
 */

export type ValidationOutcome =
  | { outcome: 'run'; runnable: number; chunkSize: number; parallelChunks: number }
  | { outcome: 'cancelling' | 'finished' };

const DISCOUNT_FROM_REQUESTS = 10;

export async function validateBatchInput(platform: GatewayServices, batchId: string): Promise<ValidationOutcome> {
  const { db, config } = platform;
  const batch = await repo.findBatchById(db, batchId);
  if (!batch) throw new Error(`batch ${batchId} does not exist`);
  const plan = { chunkSize: config.BATCH_CHUNK_SIZE, parallelChunks: config.BATCH_PARALLEL_CHUNKS };
  if (batch.status === 'in_progress') return { outcome: 'run', runnable: batch.runnable_count, ...plan };
  if (batch.status === 'cancelling') return { outcome: 'cancelling' };
  if (batch.status !== 'validating') return { outcome: 'finished' };

  const input = await files.findFile(db, batch.developer_id, batch.input_file_id);
  const storage = fileStorageFor(config);
  if (!input || (await storage.size(input.storage_key)) === undefined) {
    await failBatch(platform, batchId, { code: 'input_file_missing', message: 'The input file was deleted before the batch started.', param: 'input_file_id', line: null });
    return { outcome: 'finished' };
  }

  let counts: ValidationCounts | { empty: true };
  try {
    counts = await withTransaction(db, (tx) => readInputLines(platform, tx, batch, input.storage_key));
  } catch (error) {
    if (!(error instanceof TooManyRequests)) throw error;
    await failBatch(platform, batchId, { code: 'too_many_requests', message: `The input file has more than ${MAX_BATCH_REQUESTS} requests.`, param: 'input_file_id', line: null });
    return { outcome: 'finished' };
  }
  if ('empty' in counts) {
    await failBatch(platform, batchId, { code: 'empty_file', message: 'The input file has no requests.', param: 'input_file_id', line: null });
    return { outcome: 'finished' };
  }
  if (!counts.started) return { outcome: (await repo.batchStatus(db, batchId)) === 'cancelling' ? 'cancelling' : 'finished' };
  return { outcome: 'run', runnable: counts.runnable, ...plan };
}

class TooManyRequests extends Error {}

interface ValidationCounts {
  total: number;
  runnable: number;
  invalid: number;
  /** False when the batch was cancelled while its file was read. */
  started: boolean;
}

/**
 * One pass over the input, in the caller's transaction: each line checked and stored (valid lines
 * to run, refused lines for the error file), a thousand rows per statement. Over the request limit
 * it throws, so the transaction rolls back what was stored.
 */
async function readInputLines(platform: GatewayServices, tx: Queryable, batch: repo.BatchRow, storageKey: string): Promise<ValidationCounts | { empty: true }> {
  await repo.clearValidation(tx, batch.id);
  const seen = new Set<string>();
  let valid: repo.ValidLine[] = [];
  let invalid: repo.InvalidLine[] = [];
  const counts = { total: 0, runnable: 0, invalid: 0 };
  const source = fileStorageFor(platform.config).read(storageKey);
  for await (const line of readJsonlLines(source, platform.config.JSON_BODY_LIMIT)) {
    if (line.text !== undefined && line.text.trim() === '') continue;
    counts.total += 1;
    if (counts.total > MAX_BATCH_REQUESTS) {
      source.destroy();
      throw new TooManyRequests();
    }
    const checked = checkLine(line, batch.endpoint, seen);
    if ('code' in checked) {
      invalid.push(checked);
      counts.invalid += 1;
    } else {
      valid.push({ ...checked, position: counts.runnable });
      counts.runnable += 1;
    }
    if (valid.length >= 1_000) {
      await repo.insertValidLines(tx, batch.id, valid);
      valid = [];
    }
    if (invalid.length >= 1_000) {
      await repo.insertInvalidLines(tx, batch.id, invalid);
      invalid = [];
    }
  }
  await repo.insertValidLines(tx, batch.id, valid);
  await repo.insertInvalidLines(tx, batch.id, invalid);
  if (counts.total === 0) return { empty: true };
  const started = await repo.startRunning(tx, batch.id, counts);
  // Cancelled while we read: keep the counts, run nothing.
  if (!started) await repo.recordValidationCounts(tx, batch.id, counts);
  return { ...counts, started: Boolean(started) };
}

const ID_LIMIT = 512;

function checkLine(line: { lineNumber: number; text?: string; tooLong?: boolean }, endpoint: string, seen: Set<string>): Omit<repo.ValidLine, 'position'> | repo.InvalidLine {
  const invalid = (code: string, message: string, customId: string | null = null): repo.InvalidLine => ({ lineNumber: line.lineNumber, customId, code, message });
  if (line.tooLong) return invalid('line_too_large', 'The line is larger than the request body limit.');
  let parsed: unknown;
  try {
    parsed = JSON.parse(line.text!);
  } catch {
    return invalid('invalid_json_line', 'The line is not valid JSON.');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return invalid('invalid_json_line', 'The line must be a JSON object with custom_id, method, url and body.');
  const entry = parsed as Record<string, unknown>;
  const customId = entry.custom_id;
  if (typeof customId !== 'string' || customId === '' || customId.length > ID_LIMIT) return invalid('missing_custom_id', `custom_id must be a non-empty string of at most ${ID_LIMIT} characters.`);
  if (seen.has(customId)) return invalid('duplicate_custom_id', `custom_id ${customId} appears on an earlier line; each line needs its own.`, customId);
  seen.add(customId);
  if (entry.method !== 'POST') return invalid('invalid_method', 'method must be POST.', customId);
  if (entry.url !== endpoint) return invalid('mismatched_url', `url must be the batch's endpoint, ${endpoint}.`, customId);
  if (entry.body === null || typeof entry.body !== 'object' || Array.isArray(entry.body)) return invalid('invalid_body', 'body must be a JSON object: the request of the endpoint.', customId);
  return { customId, lineNumber: line.lineNumber, body: entry.body };
}

async function failBatch(platform: GatewayServices, batchId: string, error: repo.BatchErrorEntry): Promise<void> {
  await withTransaction(platform.db, async (tx) => {
    const failed = await repo.finish(tx, batchId, { status: 'failed', outputFileId: null, errorFileId: null, errors: [error] });
    if (failed) await recordEvent(tx, failed.developer_id, 'batch.failed', { batch: formatBatch(failed) });
  });
}

// ---- running ---------------------------------------------------------------------------------

export interface ChunkInput {
  batchId: string;
  chunk: number;
  from: number;
  to: number;
}

export interface ChunkProgress {
  /** Lines of the chunk recorded so far (this attempt). */
  recorded: number;
  /** Lines of the chunk still pending when this attempt started. */
  pending: number;
}

export interface ChunkRuntime {
  signal: AbortSignal;
  attempt: number;
  heartbeat(progress: ChunkProgress): void;
}

export type ChunkOutcome = { stopped: null | 'cancelling' | 'not_running'; recorded: number };

/** Results are written in groups: one statement per FLUSH_EVERY lines (or FLUSH_MS), not one per line. */
const FLUSH_EVERY = 100;
const FLUSH_MS = 250;

/**
 * Runs the pending lines of positions [from, to): each through runBatchLine, bounded per upstream,
 * results written in groups with the batch's counts. A batch found cancelling stops the chunk
 * (in-flight lines are aborted, their reservations released, and they stay out of the files).
 */
export async function runBatchChunk(platform: GatewayServices, input: ChunkInput, runtime: ChunkRuntime): Promise<ChunkOutcome> {
  const batch = await repo.findBatchById(platform.db, input.batchId);
  if (!batch || batch.status !== 'in_progress') return { stopped: batch?.status === 'cancelling' ? 'cancelling' : 'not_running', recorded: 0 };
  const lines = await repo.pendingRequests(platform.db, input.batchId, input.from, input.to);
  const progress: ChunkProgress = { recorded: 0, pending: lines.length };
  runtime.heartbeat(progress);
  if (lines.length === 0) return { stopped: null, recorded: 0 };

  // Our own abort: a cancelled batch seen in the row, or the activity's cancellation.
  const abort = new AbortController();
  // Every line in flight listens on it (to abort its own signal); that many listeners is expected.
  setMaxListeners(platform.config.BATCH_UPSTREAM_CONCURRENCY + 16, abort.signal);
  const onCancel = () => abort.abort(runtime.signal.reason);
  // Heartbeats also flow while every line waits on a slow upstream, so a live chunk is never taken for dead.
  const beating = setInterval(() => runtime.heartbeat(progress), 1_000);
  if (runtime.signal.aborted) onCancel();
  else runtime.signal.addEventListener('abort', onCancel, { once: true });
  let stopped: ChunkOutcome['stopped'] = null;

  const context: BatchContext = {
    batchId: batch.id,
    developerId: batch.developer_id,
    payerAccountId: batch.payer_account_id,
    endpoint: batch.endpoint,
    priceFactor: batch.runnable_count >= DISCOUNT_FROM_REQUESTS ? 0.5 : 1,
    signal: abort.signal,
    customers: new Map(),
    limit: upstreamLimiterOf(platform),
    attempt: runtime.attempt,
  };

  let buffer: repo.RequestResult[] = [];
  let flushing: Promise<void> = Promise.resolve();
  let flushError: unknown;
  let timer: NodeJS.Timeout | undefined;
  const flush = (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    if (buffer.length === 0) return flushing;
    const results = buffer;
    buffer = [];
    flushing = flushing.then(async () => {
      try {
        const written = await repo.recordResults(platform.db, batch.id, results);
        progress.recorded += written.recorded;
        runtime.heartbeat(progress);
        if (written.status !== 'in_progress' && !abort.signal.aborted) {
          stopped = written.status === 'cancelling' ? 'cancelling' : 'not_running';
          abort.abort(new Error(`batch is ${written.status}`));
        }
      } catch (error) {
        flushError ??= error;
        abort.abort(error);
      }
    });
    return flushing;
  };
  const record = (result: repo.RequestResult) => {
    buffer.push(result);
    if (buffer.length >= FLUSH_EVERY) void flush();
    else timer ??= setTimeout(() => void flush(), FLUSH_MS);
  };

  let lineError: unknown;
  // A fixed set of runners takes the lines in order: only as many lines are alive at once as can be
  // in flight (the per-upstream limiter then bounds them across all the chunks of this process).
  let next = 0;
  const runner = async () => {
    while (next < lines.length && !abort.signal.aborted) {
      const line = lines[next++]!;
      try {
        record(await runBatchLine(platform, context, line));
      } catch (error) {
        // Aborted lines stay pending; anything else fails the attempt (after the others flush).
        if (!abort.signal.aborted) {
          lineError ??= error;
          abort.abort(error);
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(lines.length, platform.config.BATCH_UPSTREAM_CONCURRENCY) }, runner));
  } finally {
    runtime.signal.removeEventListener('abort', onCancel);
    clearInterval(beating);
    await flush();
  }
  if (flushError) throw flushError;
  if (lineError && !stopped) throw lineError;
  if (runtime.signal.aborted) throw runtime.signal.reason ?? new Error('chunk cancelled');
  return { stopped, recorded: progress.recorded };
}

/** One semaphore per upstream provider, per worker process, shared by every chunk it runs. */
const limiters = new WeakMap<GatewayServices, <T>(provider: string, run: () => Promise<T>) => Promise<T>>();

function upstreamLimiterOf(platform: GatewayServices): <T>(provider: string, run: () => Promise<T>) => Promise<T> {
  let limiter = limiters.get(platform);
  if (!limiter) {
    const max = platform.config.BATCH_UPSTREAM_CONCURRENCY;
    const slots = new Map<string, { active: number; waiting: (() => void)[] }>();
    limiter = async <T>(provider: string, run: () => Promise<T>): Promise<T> => {
      let slot = slots.get(provider);
      if (!slot) slots.set(provider, (slot = { active: 0, waiting: [] }));
      const current = slot;
      if (current.active >= max) await new Promise<void>((resolve) => current.waiting.push(resolve));
      else current.active += 1;
      try {
        return await run();
      } finally {
        const next = current.waiting.shift();
        if (next) next(); // the slot passes straight to the next waiter
        else current.active -= 1;
      }
    };
    limiters.set(platform, limiter);
  }
  return limiter;
}

// ---- finalizing ------------------------------------------------------------------------------

/** Why the workflow stopped: all chunks ran, the window expired, a cancel, or a chunk that could not run at all. */
export type FinalOutcome = 'completed' | 'expired' | 'cancelled' | 'failed';

const EVENT_OF: Record<'completed' | 'cancelled' | 'failed', EventType> = { completed: 'batch.completed', cancelled: 'batch.cancelled', failed: 'batch.failed' };

/**
 * Ends the batch: `requested` says why the workflow stopped (all chunks done, the window expired,
 * or a cancel); a batch the row says is cancelling ends cancelled whatever the workflow saw. The
 * results stream from PostgreSQL into the output and error files (ids derived from the batch id,
 * so a finalize run again rewrites the same files), then one transaction records the files, the
 * final status and the event.
 */
export async function finalizeBatch(platform: GatewayServices, batchId: string, requested: FinalOutcome, failure?: string): Promise<string> {
  const { db, config } = platform;
  const batch = await repo.findBatchById(db, batchId);
  if (!batch) throw new Error(`batch ${batchId} does not exist`);
  if (repo.TERMINAL_STATUSES.includes(batch.status)) return batch.status;
  const outcome: FinalOutcome = batch.status === 'cancelling' ? 'cancelled' : requested;

  if (outcome === 'completed') {
    // Every chunk ran, so nothing should be pending; if a line was somehow skipped it still gets
    // its one line in the error file rather than vanishing.
    await repo.expirePending(db, batchId, () => newId('batch_req_'), { code: 'line_not_run', message: 'The line was not run; submit it again in a new batch.' });
    await repo.markFinalizing(db, batchId);
  }
  if (outcome === 'expired') {
    await repo.expirePending(db, batchId, () => newId('batch_req_'), { code: 'batch_expired', message: 'This request could not be executed before the completion window expired.' });
  }

  const storage = fileStorageFor(config);
  const outputId = derivedFileId(batchId, 'output');
  const errorId = derivedFileId(batchId, 'error');
  const output = await writeGeneratedFile(storage, outputId, outputLines(platform, batchId));
  const errors = await writeGeneratedFile(storage, errorId, errorLines(platform, batchId));

  return withTransaction(db, async (tx) => {
    const locked = await repo.findBatchById(tx, batchId, { lock: true });
    if (!locked || repo.TERMINAL_STATUSES.includes(locked.status)) return locked?.status ?? 'failed';
    const status: FinalOutcome = locked.status === 'cancelling' ? 'cancelled' : outcome;
    const outputFile = output.bytes > 0 ? await recordGeneratedFile(tx, locked.developer_id, { id: outputId, purpose: 'batch_output', filename: `${batchId}_output.jsonl`, ...output }) : null;
    const errorFile = errors.bytes > 0 ? await recordGeneratedFile(tx, locked.developer_id, { id: errorId, purpose: 'batch_output', filename: `${batchId}_error.jsonl`, ...errors }) : null;
    const finished = await repo.finish(tx, batchId, {
      status,
      outputFileId: outputFile?.id ?? null,
      errorFileId: errorFile?.id ?? null,
      ...(status === 'failed' && { errors: [{ code: 'batch_run_failed', message: failure ?? 'The batch could not run to the end.', param: null, line: null }] }),
    });
    if (finished && status !== 'expired') await recordEvent(tx, finished.developer_id, EVENT_OF[status], { batch: formatBatch(finished) });
    return status;
  });
}

const PAGE = 1_000;

/** Output lines: `{id, custom_id, response: {status_code, request_id, body}, error: null}`, in input order. */
async function* outputLines(platform: GatewayServices, batchId: string): AsyncGenerator<string> {
  for (let after = -1; ; ) {
    const rows = await repo.succeededPage(platform.db, batchId, after, PAGE);
    if (rows.length === 0) return;
    yield rows.map((row) => `${JSON.stringify({ id: row.result_id, custom_id: row.custom_id, response: row.response, error: null })}\n`).join('');
    after = rows.at(-1)!.position;
  }
}

/** Error lines: failed requests (with their error response) and refused lines (with an error), in input order. */
async function* errorLines(platform: GatewayServices, batchId: string): AsyncGenerator<string> {
  for (let after = 0; ; ) {
    const rows = await repo.errorPage(platform.db, batchId, after, PAGE);
    if (rows.length === 0) return;
    yield rows
      .map((row) => `${JSON.stringify({ id: row.result_id ?? resultIdForLine(batchId, row.line_number), custom_id: row.custom_id, response: row.response ?? null, error: row.error ?? null })}\n`)
      .join('');
    after = rows.at(-1)!.line_number;
  }
}

/** A refused line never ran, so its id is made from its place in the file (the same on every finalize). */
function resultIdForLine(batchId: string, lineNumber: number): string {
  return `batch_req_${base62(createHash('sha256').update(`${batchId}:line:${lineNumber}`).digest()).slice(0, 24)}`;
}

/** The output and error files of a batch have ids derived from it, so a finalize run again writes the same files. */
export function derivedFileId(batchId: string, kind: 'output' | 'error'): string {
  return `file_${base62(createHash('sha256').update(`${batchId}:${kind}`).digest()).slice(0, 24)}`;
}

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const base62 = (bytes: Buffer) => Array.from(bytes, (byte) => ALPHABET[byte % 62]).join('');
