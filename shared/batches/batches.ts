import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { z } from 'zod';
import type { Config } from '../config.js';
import { withTransaction, type Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { acceptIdCursor } from '../files/files.js';
import * as files from '../files/repository.js';
import { newId } from '../ids.js';
import type { Logger } from '../logger.js';
import { parseMetadata } from '../metadata.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import type { TemporalHandle } from '../platform/temporal.js';
import * as repo from './repository.js';

export type { BatchRow } from './repository.js';

/**
 * Batches (spec 1, POST /v1/batches): the row callers poll, and the Temporal workflow
 * (`batchWorkflow`, id = batch id) that validates, runs and finalizes it. This module is the
 * caller's side: create, read, list, cancel.
 */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/moderations'] as const;
export const BATCH_WORKFLOW = 'batchWorkflow';
export const CANCEL_BATCH_SIGNAL = 'cancelBatch';
/** Spec 1: up to 50,000 requests per batch. */
export const MAX_BATCH_REQUESTS = 50_000;

/** What the workflow is started with; the worker reads everything else from the batch row. */
export interface BatchWorkflowInput {
  batchId: string;
  /** Unix milliseconds: the end of the completion window. */
  expiresAt: number;
  heartbeatTimeoutSeconds: number;
}

export interface BatchRuntime {
  db: Db;
  temporal: TemporalHandle;
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'BATCH_HEARTBEAT_TIMEOUT_SECONDS' | 'BATCH_COMPLETION_WINDOW_SECONDS'>;
  logger: Logger;
}

export const batchCreateBody = z.strictObject({
  input_file_id: z.unknown().optional(),
  endpoint: z.unknown().optional(),
  completion_window: z.unknown().optional(),
  metadata: z.unknown().optional(),
});

/**
 * Creates the batch row and its batch.created event in one transaction, then starts its workflow.
 * A start that fails (Temporal away, the process dying) leaves a row with workflow_started false,
 * which the worker's recovery sweep starts later under the same id.
 */
/** `input` as parsed by batchCreateBody; the checks that carry the spec's batch codes follow here. */
export async function createBatch(runtime: BatchRuntime, caller: { developerId: string; payerAccountId: string }, input: z.output<typeof batchCreateBody>): Promise<repo.BatchRow> {
  if (input.input_file_id === undefined || input.input_file_id === null || input.input_file_id === '') throw serviceError('missing_input_file_id', { param: 'input_file_id' });
  if (typeof input.input_file_id !== 'string') throw serviceError('invalid_request', { param: 'input_file_id', message: 'input_file_id must be a string.' });
  if (typeof input.endpoint !== 'string' || !(BATCH_ENDPOINTS as readonly string[]).includes(input.endpoint)) throw serviceError('invalid_endpoint', { param: 'endpoint' });
  if (input.completion_window !== '24h') throw serviceError('invalid_completion_window', { param: 'completion_window' });
  const metadata = input.metadata === undefined || input.metadata === null ? null : parseMetadata(input.metadata);

  const file = await files.findFile(runtime.db, caller.developerId, input.input_file_id);
  if (!file) throw serviceError('not_found', { param: 'input_file_id', message: 'No such file.' });
  if (file.purpose !== 'batch') throw serviceError('input_file_wrong_purpose', { param: 'input_file_id' });

  const batch = await withTransaction(runtime.db, async (tx) => {
    const row = await repo.insertBatch(tx, {
      id: newId('batch_'),
      developerId: caller.developerId,
      payerAccountId: caller.payerAccountId,
      endpoint: input.endpoint as repo.BatchEndpoint,
      inputFileId: file.id,
      metadata,
      windowSeconds: runtime.config.BATCH_COMPLETION_WINDOW_SECONDS,
    });
    await recordEvent(tx, caller.developerId, 'batch.created', { batch: formatBatch(row) });
    return row;
  });
  try {
    await startBatchWorkflow(runtime, batch);
  } catch (error) {
    // The batch exists and is recoverable: the sweep starts its workflow with the same id.
    runtime.logger.warn({ err: error, batchId: batch.id }, 'batch workflow not started yet; the recovery sweep will start it');
  }
  return batch;
}

/** Idempotent: the workflow id is the batch id, so a second start finds the first. */
export async function startBatchWorkflow(runtime: BatchRuntime, batch: Pick<repo.BatchRow, 'id' | 'expires_at' | 'endpoint' | 'input_file_id'>): Promise<void> {
  try {
    await runtime.temporal.client.workflow.start(BATCH_WORKFLOW, {
      taskQueue: runtime.config.TEMPORAL_TASK_QUEUE,
      workflowId: batch.id,
      args: [workflowInput(runtime, batch)],
      staticSummary: `Batch ${batch.id}: ${batch.endpoint} lines of ${batch.input_file_id}`,
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
  await repo.markWorkflowStarted(runtime.db, batch.id);
}

function workflowInput(runtime: BatchRuntime, batch: Pick<repo.BatchRow, 'id' | 'expires_at'>): BatchWorkflowInput {
  return { batchId: batch.id, expiresAt: batch.expires_at.getTime(), heartbeatTimeoutSeconds: runtime.config.BATCH_HEARTBEAT_TIMEOUT_SECONDS };
}

/** Starts the workflows of batches whose start was never confirmed. Returns how many it started. */
export async function startUnstartedBatches(runtime: BatchRuntime, olderThanSeconds = 30): Promise<number> {
  let started = 0;
  for (const batch of await repo.unstartedBatches(runtime.db, olderThanSeconds)) {
    await startBatchWorkflow(runtime, batch);
    started += 1;
  }
  return started;
}

export async function getBatch(db: Db, developerId: string, id: string): Promise<repo.BatchRow> {
  const batch = await repo.findBatch(db, developerId, id);
  if (!batch) throw batchNotFound();
  return batch;
}

export async function listBatches(db: Db, developerId: string, query: { limit?: unknown; after?: unknown }): Promise<Page<ReturnType<typeof formatBatch>>> {
  const page = pageRequest({ limit: query.limit, after: acceptIdCursor(query.after, 'batch_') });
  return toPage(await repo.listBatches(db, developerId, page), page, formatBatch);
}

/**
 * A validating or running batch moves to cancelling, and its workflow is told through Temporal
 * (signalWithStart, so a batch whose workflow never started is still driven to cancelled). The
 * workflow stops its chunks, keeps what finished, and ends the batch as cancelled.
 */
export async function cancelBatch(runtime: BatchRuntime, developerId: string, id: string): Promise<repo.BatchRow> {
  const existing = await getBatch(runtime.db, developerId, id);
  if (existing.status === 'cancelling') return existing;
  const batch = await repo.markCancelling(runtime.db, developerId, id);
  if (!batch) throw serviceError('batch_not_cancellable', { message: `The batch is ${(await getBatch(runtime.db, developerId, id)).status}; only a validating or in_progress batch can be cancelled.` });
  try {
    await runtime.temporal.client.workflow.signalWithStart(BATCH_WORKFLOW, {
      taskQueue: runtime.config.TEMPORAL_TASK_QUEUE,
      workflowId: batch.id,
      args: [workflowInput(runtime, batch)],
      signal: CANCEL_BATCH_SIGNAL,
      signalArgs: [],
    });
  } catch (error) {
    // The chunks also read the cancelling status from the row, so the batch still stops.
    runtime.logger.warn({ err: error, batchId: batch.id }, 'cancel signal not delivered; the batch stops on its next progress write');
  }
  return batch;
}

const seconds = (date: Date | null) => (date === null ? null : Math.floor(date.getTime() / 1000));

/** The OpenAI batch object: statuses, request_counts, Unix-second timestamps, output and error files. */
export function formatBatch(batch: repo.BatchRow) {
  return {
    id: batch.id,
    object: 'batch' as const,
    endpoint: batch.endpoint,
    errors: batch.errors && batch.errors.length > 0 ? { object: 'list' as const, data: batch.errors } : null,
    input_file_id: batch.input_file_id,
    completion_window: batch.completion_window,
    status: batch.status,
    output_file_id: batch.output_file_id,
    error_file_id: batch.error_file_id,
    created_at: seconds(batch.created_at)!,
    in_progress_at: seconds(batch.in_progress_at),
    expires_at: seconds(batch.expires_at),
    finalizing_at: seconds(batch.finalizing_at),
    completed_at: seconds(batch.completed_at),
    failed_at: seconds(batch.failed_at),
    expired_at: seconds(batch.expired_at),
    cancelling_at: seconds(batch.cancelling_at),
    cancelled_at: seconds(batch.cancelled_at),
    request_counts: { total: batch.total_count, completed: batch.completed_count, failed: batch.failed_count },
    metadata: batch.metadata,
  };
}

const batchNotFound = () => serviceError('not_found', { message: 'No such batch.' });
