import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';

/**
 * All SQL of batches. Caller-facing reads are filtered by developer (another developer's batch is
 * simply not found); the worker's reads go by batch id, which only the workflow hands out.
 */

export type BatchStatus = 'validating' | 'failed' | 'in_progress' | 'finalizing' | 'completed' | 'expired' | 'cancelling' | 'cancelled';
export type BatchEndpoint = '/v1/chat/completions' | '/v1/embeddings' | '/v1/moderations';
export const TERMINAL_STATUSES: readonly BatchStatus[] = ['failed', 'completed', 'expired', 'cancelled'];

export interface BatchRow {
  id: string;
  developer_id: string;
  payer_account_id: string;
  endpoint: BatchEndpoint;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  metadata: Record<string, string> | null;
  errors: BatchErrorEntry[] | null;
  output_file_id: string | null;
  error_file_id: string | null;
  total_count: number;
  completed_count: number;
  failed_count: number;
  runnable_count: number;
  workflow_started: boolean;
  created_at: Date;
  expires_at: Date;
  in_progress_at: Date | null;
  finalizing_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  expired_at: Date | null;
  cancelling_at: Date | null;
  cancelled_at: Date | null;
}

export interface BatchErrorEntry {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

const COLUMNS = `id, developer_id, payer_account_id, endpoint, input_file_id, completion_window, status, metadata, errors,
  output_file_id, error_file_id, total_count, completed_count, failed_count, runnable_count, workflow_started, created_at,
  expires_at, in_progress_at, finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at`;

export async function insertBatch(
  q: Queryable,
  batch: { id: string; developerId: string; payerAccountId: string; endpoint: BatchEndpoint; inputFileId: string; metadata: Record<string, string> | null; windowSeconds: number },
): Promise<BatchRow> {
  const { rows } = await q.query<BatchRow>(
    `INSERT INTO batches (id, developer_id, payer_account_id, endpoint, input_file_id, metadata, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
     RETURNING ${COLUMNS}`,
    [batch.id, batch.developerId, batch.payerAccountId, batch.endpoint, batch.inputFileId, batch.metadata === null ? null : JSON.stringify(batch.metadata), batch.windowSeconds],
  );
  return rows[0]!;
}

export async function findBatch(q: Queryable, developerId: string, id: string): Promise<BatchRow | undefined> {
  const { rows } = await q.query<BatchRow>(`SELECT ${COLUMNS} FROM batches WHERE developer_id = $1 AND id = $2`, [developerId, id]);
  return rows[0];
}

export async function findBatchById(q: Queryable, id: string, options: { lock?: boolean } = {}): Promise<BatchRow | undefined> {
  const { rows } = await q.query<BatchRow>(`SELECT ${COLUMNS} FROM batches WHERE id = $1${options.lock ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0];
}

/** Newest first. */
export async function listBatches(q: Queryable, developerId: string, page: { limit: number; after: CursorPosition | undefined }): Promise<BatchRow[]> {
  const { rows } = await q.query<BatchRow>(
    `SELECT ${COLUMNS} FROM batches
     WHERE developer_id = $1
       AND ($2::text IS NULL OR (created_at, id) < (SELECT b.created_at, b.id FROM batches b WHERE b.developer_id = $1 AND b.id = $2))
     ORDER BY created_at DESC, id DESC
     LIMIT $3`,
    [developerId, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

/** validating or in_progress -> cancelling; any other status is left alone (undefined). */
export async function markCancelling(q: Queryable, developerId: string, id: string): Promise<BatchRow | undefined> {
  const { rows } = await q.query<BatchRow>(
    `UPDATE batches SET status = 'cancelling', cancelling_at = now()
     WHERE developer_id = $1 AND id = $2 AND status IN ('validating', 'in_progress')
     RETURNING ${COLUMNS}`,
    [developerId, id],
  );
  return rows[0];
}

export async function markWorkflowStarted(q: Queryable, id: string): Promise<void> {
  await q.query('UPDATE batches SET workflow_started = true WHERE id = $1 AND NOT workflow_started', [id]);
}

/** Batches whose workflow start was never confirmed (the API died or Temporal was away after the commit). */
export async function unstartedBatches(q: Queryable, olderThanSeconds: number, limit = 100): Promise<BatchRow[]> {
  const { rows } = await q.query<BatchRow>(
    `SELECT ${COLUMNS} FROM batches
     WHERE NOT workflow_started AND created_at < now() - make_interval(secs => $1)
     ORDER BY created_at LIMIT $2`,
    [olderThanSeconds, limit],
  );
  return rows;
}

// ---- validation ------------------------------------------------------------------------------

export interface ValidLine {
  customId: string;
  position: number;
  lineNumber: number;
  body: unknown;
}

export interface InvalidLine {
  lineNumber: number;
  customId: string | null;
  code: string;
  message: string;
}

/** A validation run again (its worker died) starts from nothing. */
export async function clearValidation(q: Queryable, batchId: string): Promise<void> {
  await q.query('DELETE FROM batch_requests WHERE batch_id = $1', [batchId]);
  await q.query('DELETE FROM batch_invalid_lines WHERE batch_id = $1', [batchId]);
}

export async function insertValidLines(q: Queryable, batchId: string, lines: ValidLine[]): Promise<void> {
  if (lines.length === 0) return;
  await q.query(
    `INSERT INTO batch_requests (batch_id, custom_id, position, line_number, body)
     SELECT $1, u.custom_id, u.position, u.line_number, u.body::jsonb
     FROM unnest($2::text[], $3::int[], $4::int[], $5::text[]) AS u(custom_id, position, line_number, body)`,
    [batchId, lines.map((l) => l.customId), lines.map((l) => l.position), lines.map((l) => l.lineNumber), lines.map((l) => JSON.stringify(l.body))],
  );
}

export async function insertInvalidLines(q: Queryable, batchId: string, lines: InvalidLine[]): Promise<void> {
  if (lines.length === 0) return;
  await q.query(
    `INSERT INTO batch_invalid_lines (batch_id, line_number, custom_id, code, message)
     SELECT $1, u.line_number, u.custom_id, u.code, u.message
     FROM unnest($2::int[], $3::text[], $4::text[], $5::text[]) AS u(line_number, custom_id, code, message)`,
    [batchId, lines.map((l) => l.lineNumber), lines.map((l) => l.customId), lines.map((l) => l.code), lines.map((l) => l.message)],
  );
}

/** validating -> in_progress with the counts validation found (invalid lines count as failed). */
export async function startRunning(q: Queryable, batchId: string, counts: { total: number; runnable: number; invalid: number }): Promise<BatchRow | undefined> {
  const { rows } = await q.query<BatchRow>(
    `UPDATE batches SET status = 'in_progress', in_progress_at = now(), total_count = $2, runnable_count = $3, failed_count = $4, completed_count = 0
     WHERE id = $1 AND status = 'validating'
     RETURNING ${COLUMNS}`,
    [batchId, counts.total, counts.runnable, counts.invalid],
  );
  return rows[0];
}

/** Counts for a batch cancelled during validation: the lines were read, none will run. */
export async function recordValidationCounts(q: Queryable, batchId: string, counts: { total: number; runnable: number; invalid: number }): Promise<void> {
  await q.query('UPDATE batches SET total_count = $2, runnable_count = $3, failed_count = $4 WHERE id = $1', [batchId, counts.total, counts.runnable, counts.invalid]);
}

// ---- running ---------------------------------------------------------------------------------

export interface PendingRequest {
  custom_id: string;
  position: number;
  body: Record<string, unknown>;
}

/** The lines of positions [from, to) not finished yet: a chunk run again picks up only these. */
export async function pendingRequests(q: Queryable, batchId: string, from: number, to: number): Promise<PendingRequest[]> {
  const { rows } = await q.query<PendingRequest>(
    `SELECT custom_id, position, body FROM batch_requests
     WHERE batch_id = $1 AND position >= $2 AND position < $3 AND status = 'pending'
     ORDER BY position`,
    [batchId, from, to],
  );
  return rows;
}

export interface RequestResult {
  customId: string;
  resultId: string;
  succeeded: boolean;
  statusCode: number | null;
  requestId: string | null;
  response: unknown;
  error: unknown;
}

/**
 * Records finished lines and moves the batch's counts in one statement. A line already finished
 * (a chunk run twice) is left as it was and counted once. Only a running batch takes results, so
 * nothing lands after finalize has read them. Returns the batch's status.
 */
export async function recordResults(q: Queryable, batchId: string, results: RequestResult[]): Promise<{ status: BatchStatus; recorded: number }> {
  const { rows } = await q.query<{ status: BatchStatus; recorded: number }>(
    `WITH running AS (
       SELECT id FROM batches WHERE id = $1 AND status IN ('in_progress', 'cancelling') FOR UPDATE
     ), done AS (
       UPDATE batch_requests r
          SET status = CASE WHEN u.succeeded THEN 'succeeded' ELSE 'failed' END, result_id = u.result_id, status_code = u.status_code,
              request_id = u.request_id, response = u.response::jsonb, error = u.error::jsonb, finished_at = now()
         FROM unnest($2::text[], $3::text[], $4::boolean[], $5::int[], $6::text[], $7::text[], $8::text[])
              AS u(custom_id, result_id, succeeded, status_code, request_id, response, error)
        -- custom_id = ANY($2) lets the primary key find exactly these rows whatever the planner
        -- guesses of a batch it has no statistics for yet (else it may scan the whole batch per row).
        WHERE r.batch_id = $1 AND r.custom_id = ANY ($2::text[]) AND r.custom_id = u.custom_id AND r.status = 'pending' AND EXISTS (SELECT 1 FROM running)
        RETURNING r.status
     ), counted AS (
       UPDATE batches SET completed_count = completed_count + (SELECT count(*) FROM done WHERE status = 'succeeded'),
                          failed_count = failed_count + (SELECT count(*) FROM done WHERE status = 'failed')
        WHERE id = $1 AND EXISTS (SELECT 1 FROM running)
        RETURNING status
     )
     SELECT COALESCE((SELECT status FROM counted), (SELECT status FROM batches WHERE id = $1)) AS status, (SELECT count(*)::int FROM done) AS recorded`,
    [
      batchId,
      results.map((r) => r.customId),
      results.map((r) => r.resultId),
      results.map((r) => r.succeeded),
      results.map((r) => r.statusCode),
      results.map((r) => r.requestId),
      results.map((r) => (r.response === null || r.response === undefined ? null : JSON.stringify(r.response))),
      results.map((r) => (r.error === null || r.error === undefined ? null : JSON.stringify(r.error))),
    ],
  );
  return rows[0]!;
}

export async function batchStatus(q: Queryable, batchId: string): Promise<BatchStatus | undefined> {
  const { rows } = await q.query<{ status: BatchStatus }>('SELECT status FROM batches WHERE id = $1', [batchId]);
  return rows[0]?.status;
}

// ---- finalizing ------------------------------------------------------------------------------

export async function markFinalizing(q: Queryable, batchId: string): Promise<void> {
  await q.query(`UPDATE batches SET status = 'finalizing', finalizing_at = COALESCE(finalizing_at, now()) WHERE id = $1 AND status = 'in_progress'`, [batchId]);
}

/** The lines a batch never ran (its window expired) become failures with `error`. */
export async function expirePending(q: Queryable, batchId: string, resultIds: (customId: string) => string, error: unknown): Promise<void> {
  const { rows } = await q.query<{ custom_id: string }>(`SELECT custom_id FROM batch_requests WHERE batch_id = $1 AND status = 'pending'`, [batchId]);
  for (let i = 0; i < rows.length; i += 1_000) {
    const slice = rows.slice(i, i + 1_000);
    await recordResults(
      q,
      batchId,
      slice.map((row) => ({ customId: row.custom_id, resultId: resultIds(row.custom_id), succeeded: false, statusCode: null, requestId: null, response: null, error })),
    );
  }
}

export interface OutputRow {
  result_id: string;
  custom_id: string;
  status_code: number | null;
  request_id: string | null;
  response: unknown;
  error: unknown;
  position: number;
}

/** Succeeded lines in input order, a page at a time (keyset on position). */
export async function succeededPage(q: Queryable, batchId: string, afterPosition: number, limit: number): Promise<OutputRow[]> {
  const { rows } = await q.query<OutputRow>(
    `SELECT result_id, custom_id, status_code, request_id, response, error, position FROM batch_requests
     WHERE batch_id = $1 AND status = 'succeeded' AND position > $2 ORDER BY position LIMIT $3`,
    [batchId, afterPosition, limit],
  );
  return rows;
}

export interface ErrorRow {
  line_number: number;
  custom_id: string | null;
  result_id: string | null;
  status_code: number | null;
  request_id: string | null;
  response: unknown;
  error: unknown;
}

/** Failed lines and lines refused by validation, in input order (keyset on line number). */
export async function errorPage(q: Queryable, batchId: string, afterLine: number, limit: number): Promise<ErrorRow[]> {
  const { rows } = await q.query<ErrorRow>(
    `SELECT * FROM (
       SELECT line_number, custom_id, result_id, status_code, request_id, response, error FROM batch_requests
        WHERE batch_id = $1 AND status = 'failed' AND line_number > $2
       UNION ALL
       SELECT line_number, custom_id, NULL, NULL, NULL, NULL, jsonb_build_object('code', code, 'message', message, 'line', line_number) FROM batch_invalid_lines
        WHERE batch_id = $1 AND line_number > $2
     ) lines ORDER BY line_number LIMIT $3`,
    [batchId, afterLine, limit],
  );
  return rows;
}

/** Moves the batch to its final status with its files; a batch already final is left alone (undefined). */
export async function finish(
  q: Queryable,
  batchId: string,
  outcome: { status: 'completed' | 'expired' | 'cancelled' | 'failed'; outputFileId: string | null; errorFileId: string | null; errors?: BatchErrorEntry[] },
): Promise<BatchRow | undefined> {
  const stamp = { completed: 'completed_at', expired: 'expired_at', cancelled: 'cancelled_at', failed: 'failed_at' }[outcome.status];
  const { rows } = await q.query<BatchRow>(
    `UPDATE batches SET status = $2, ${stamp} = now(), output_file_id = $3, error_file_id = $4, errors = COALESCE($5::jsonb, errors)
     WHERE id = $1 AND status NOT IN ('completed', 'expired', 'cancelled', 'failed')
     RETURNING ${COLUMNS}`,
    [batchId, outcome.status, outcome.outputFileId, outcome.errorFileId, outcome.errors ? JSON.stringify(outcome.errors) : null],
  );
  return rows[0];
}
