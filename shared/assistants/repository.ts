import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';

/** SQL of assistants, threads, messages, runs and run steps. Every lookup names the developer, so another developer's id is simply not found. */

export interface AssistantRow {
  id: string;
  developer_id: string;
  name: string | null;
  description: string | null;
  model: string;
  instructions: string | null;
  tools: unknown[];
  tool_resources: ToolResources | null;
  temperature: number | null;
  top_p: number | null;
  response_format: unknown;
  metadata: Record<string, string> | null;
  created_at: Date;
}

export interface ToolResources {
  file_search?: { vector_store_ids?: string[] };
  code_interpreter?: { file_ids?: string[] };
}

export interface Page {
  limit: number;
  after: CursorPosition | undefined;
  order: 'asc' | 'desc';
}

const json = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(value));

export async function insertAssistant(q: Queryable, row: Omit<AssistantRow, 'created_at'>): Promise<AssistantRow> {
  const { rows } = await q.query<AssistantRow>(
    `INSERT INTO assistants (id, developer_id, name, description, model, instructions, tools, tool_resources, temperature, top_p, response_format, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *`,
    [row.id, row.developer_id, row.name, row.description, row.model, row.instructions, JSON.stringify(row.tools), json(row.tool_resources), row.temperature, row.top_p, json(row.response_format), json(row.metadata)],
  );
  return rows[0]!;
}

export async function findAssistant(q: Queryable, developerId: string, id: string): Promise<AssistantRow | undefined> {
  const { rows } = await q.query<AssistantRow>(`SELECT * FROM assistants WHERE developer_id = $1 AND id = $2 AND deleted_at IS NULL`, [developerId, id]);
  return rows[0];
}

export async function updateAssistant(q: Queryable, developerId: string, id: string, row: Omit<AssistantRow, 'id' | 'developer_id' | 'created_at'>): Promise<AssistantRow | undefined> {
  const { rows } = await q.query<AssistantRow>(
    `UPDATE assistants SET name = $3, description = $4, model = $5, instructions = $6, tools = $7, tool_resources = $8, temperature = $9, top_p = $10,
       response_format = $11, metadata = $12, updated_at = now()
     WHERE developer_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING *`,
    [developerId, id, row.name, row.description, row.model, row.instructions, JSON.stringify(row.tools), json(row.tool_resources), row.temperature, row.top_p, json(row.response_format), json(row.metadata)],
  );
  return rows[0];
}

export async function deleteAssistant(q: Queryable, developerId: string, id: string): Promise<boolean> {
  const { rowCount } = await q.query(`UPDATE assistants SET deleted_at = now() WHERE developer_id = $1 AND id = $2 AND deleted_at IS NULL`, [developerId, id]);
  return (rowCount ?? 0) > 0;
}

export async function listAssistants(q: Queryable, developerId: string, page: Page): Promise<AssistantRow[]> {
  const [cmp, dir] = page.order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
  const { rows } = await q.query<AssistantRow>(
    `SELECT * FROM assistants WHERE developer_id = $1 AND deleted_at IS NULL
       AND ($2::text IS NULL OR (created_at, id) ${cmp} (SELECT a.created_at, a.id FROM assistants a WHERE a.developer_id = $1 AND a.id = $2))
     ORDER BY created_at ${dir}, id ${dir} LIMIT $3`,
    [developerId, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

// ---- threads and messages ---------------------------------------------------------------------

export interface ThreadRow {
  id: string;
  developer_id: string;
  customer_id: string | null;
  tool_resources: ToolResources | null;
  metadata: Record<string, string> | null;
  message_count: number;
  created_at: Date;
}

export async function insertThread(q: Queryable, row: Omit<ThreadRow, 'message_count' | 'created_at'>): Promise<ThreadRow> {
  const { rows } = await q.query<ThreadRow>(
    `INSERT INTO threads (id, developer_id, customer_id, tool_resources, metadata) VALUES ($1, $2, $3, $4, $5) RETURNING *`,
    [row.id, row.developer_id, row.customer_id, json(row.tool_resources), json(row.metadata)],
  );
  return rows[0]!;
}

/** A thread of the developer; under a client token, only one of that token's customer. */
export async function findThread(q: Queryable, developerId: string, id: string, customerId: string | null, lock = false): Promise<ThreadRow | undefined> {
  const { rows } = await q.query<ThreadRow>(
    `SELECT * FROM threads WHERE developer_id = $1 AND id = $2 AND deleted_at IS NULL AND ($3::text IS NULL OR customer_id = $3)${lock ? ' FOR UPDATE' : ''}`,
    [developerId, id, customerId],
  );
  return rows[0];
}

export async function updateThread(q: Queryable, id: string, patch: { tool_resources?: ToolResources | null; metadata?: Record<string, string> | null }): Promise<ThreadRow> {
  const { rows } = await q.query<ThreadRow>(
    `UPDATE threads SET tool_resources = CASE WHEN $2 THEN $3::jsonb ELSE tool_resources END, metadata = CASE WHEN $4 THEN $5::jsonb ELSE metadata END
     WHERE id = $1 RETURNING *`,
    [id, patch.tool_resources !== undefined, json(patch.tool_resources), patch.metadata !== undefined, json(patch.metadata)],
  );
  return rows[0]!;
}

export async function deleteThread(q: Queryable, id: string): Promise<void> {
  await q.query(`UPDATE threads SET deleted_at = now() WHERE id = $1`, [id]);
}

export interface MessageRow {
  id: string;
  thread_id: string;
  seq: number;
  role: 'user' | 'assistant';
  content: unknown[];
  attachments: unknown[] | null;
  assistant_id: string | null;
  run_id: string | null;
  step_index: number | null;
  metadata: Record<string, string> | null;
  created_at: Date;
}

export type NewMessage = Pick<MessageRow, 'id' | 'role' | 'content' | 'attachments' | 'assistant_id' | 'run_id' | 'step_index' | 'metadata'>;

/**
 * Appends messages to a thread under its row lock, numbering them; false (and nothing written)
 * when they would take it past `maxMessages`. A message of a run step already written is not
 * written again.
 */
export async function appendMessages(q: Queryable, threadId: string, messages: NewMessage[], maxMessages: number): Promise<MessageRow[] | 'full'> {
  const { rows: locked } = await q.query<{ message_count: number }>(`SELECT message_count FROM threads WHERE id = $1 FOR UPDATE`, [threadId]);
  const count = locked[0]!.message_count;
  const fresh: NewMessage[] = [];
  const existing: MessageRow[] = [];
  for (const message of messages) {
    if (message.run_id && message.step_index !== null) {
      const { rows } = await q.query<MessageRow>(`SELECT * FROM thread_messages WHERE run_id = $1 AND step_index = $2`, [message.run_id, message.step_index]);
      if (rows[0]) {
        existing.push(rows[0]);
        continue;
      }
    }
    fresh.push(message);
  }
  if (count + fresh.length > maxMessages) return 'full';
  const written: MessageRow[] = [];
  for (const [i, message] of fresh.entries()) {
    const { rows } = await q.query<MessageRow>(
      `INSERT INTO thread_messages (id, thread_id, seq, role, content, attachments, assistant_id, run_id, step_index, metadata)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
      [message.id, threadId, count + i + 1, message.role, JSON.stringify(message.content), json(message.attachments), message.assistant_id, message.run_id, message.step_index, json(message.metadata)],
    );
    written.push(rows[0]!);
  }
  if (fresh.length > 0) await q.query(`UPDATE threads SET message_count = message_count + $2 WHERE id = $1`, [threadId, fresh.length]);
  return [...existing, ...written];
}

export async function findMessage(q: Queryable, threadId: string, id: string): Promise<MessageRow | undefined> {
  const { rows } = await q.query<MessageRow>(`SELECT * FROM thread_messages WHERE thread_id = $1 AND id = $2`, [threadId, id]);
  return rows[0];
}

export async function updateMessageMetadata(q: Queryable, threadId: string, id: string, metadata: Record<string, string> | null): Promise<MessageRow | undefined> {
  const { rows } = await q.query<MessageRow>(`UPDATE thread_messages SET metadata = $3 WHERE thread_id = $1 AND id = $2 RETURNING *`, [threadId, id, json(metadata)]);
  return rows[0];
}

export async function listMessages(q: Queryable, threadId: string, page: Page, runId?: string): Promise<MessageRow[]> {
  const [cmp, dir] = page.order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
  const { rows } = await q.query<MessageRow>(
    `SELECT * FROM thread_messages WHERE thread_id = $1 AND ($2::text IS NULL OR run_id = $2)
       AND ($3::text IS NULL OR seq ${cmp} (SELECT m.seq FROM thread_messages m WHERE m.thread_id = $1 AND m.id = $3))
     ORDER BY seq ${dir} LIMIT $4`,
    [threadId, runId ?? null, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

/** The thread's messages in order, the latest `last` of them when given (truncation_strategy last_messages). */
export async function threadHistory(q: Queryable, threadId: string, last: number | null): Promise<MessageRow[]> {
  const { rows } = await q.query<MessageRow>(
    last === null
      ? `SELECT * FROM thread_messages WHERE thread_id = $1 ORDER BY seq`
      : `SELECT * FROM (SELECT * FROM thread_messages WHERE thread_id = $1 ORDER BY seq DESC LIMIT $2) latest ORDER BY seq`,
    last === null ? [threadId] : [threadId, last],
  );
  return rows;
}

// ---- runs and steps ---------------------------------------------------------------------------

export type RunStatus = 'queued' | 'in_progress' | 'requires_action' | 'cancelling' | 'cancelled' | 'completed' | 'failed' | 'expired' | 'incomplete';

/** Why a run ended incomplete: which of its token budgets ran out. */
export interface IncompleteDetails {
  reason: 'max_prompt_tokens' | 'max_completion_tokens';
}
export const ACTIVE_RUN_STATUSES: RunStatus[] = ['queued', 'in_progress', 'requires_action', 'cancelling'];

/** Whether a run of the thread is still under way (the thread then takes no new message). */
export async function hasActiveRun(q: Queryable, threadId: string): Promise<boolean> {
  const { rows } = await q.query(`SELECT 1 FROM runs WHERE thread_id = $1 AND status = ANY($2) LIMIT 1`, [threadId, ACTIVE_RUN_STATUSES]);
  return rows.length > 0;
}

export interface RunRow {
  id: string;
  thread_id: string;
  assistant_id: string;
  developer_id: string;
  payer_account_id: string;
  customer_id: string | null;
  status: RunStatus;
  model: string;
  instructions: string;
  tools: unknown[];
  tool_resources: ToolResources | null;
  temperature: number | null;
  top_p: number | null;
  max_completion_tokens: number | null;
  max_prompt_tokens: number | null;
  truncation_strategy: { type: 'auto' | 'last_messages'; last_messages?: number | null } | null;
  response_format: unknown;
  tool_choice: unknown;
  parallel_tool_calls: boolean;
  metadata: Record<string, string> | null;
  required_action: RequiredAction | null;
  last_error: { code: string; message: string } | null;
  incomplete_details: IncompleteDetails | null;
  started_at: Date | null;
  expires_at: Date | null;
  cancelled_at: Date | null;
  failed_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
}

export interface RequiredAction {
  type: 'submit_tool_outputs';
  submit_tool_outputs: { tool_calls: { id: string; type: 'function'; function: { name: string; arguments: string } }[] };
}

export type NewRun = Omit<RunRow, 'status' | 'required_action' | 'last_error' | 'incomplete_details' | 'started_at' | 'expires_at' | 'cancelled_at' | 'failed_at' | 'completed_at' | 'created_at'>;

export async function insertRun(q: Queryable, run: NewRun): Promise<RunRow> {
  const { rows } = await q.query<RunRow>(
    `INSERT INTO runs (id, thread_id, assistant_id, developer_id, payer_account_id, customer_id, model, instructions, tools, tool_resources, temperature, top_p,
       max_completion_tokens, max_prompt_tokens, truncation_strategy, response_format, tool_choice, parallel_tool_calls, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19) RETURNING *`,
    [
      run.id, run.thread_id, run.assistant_id, run.developer_id, run.payer_account_id, run.customer_id, run.model, run.instructions, JSON.stringify(run.tools),
      json(run.tool_resources), run.temperature, run.top_p, run.max_completion_tokens, run.max_prompt_tokens, json(run.truncation_strategy),
      json(run.response_format), json(run.tool_choice), run.parallel_tool_calls, json(run.metadata),
    ],
  );
  return rows[0]!;
}

export async function findRun(q: Queryable, threadId: string, id: string, lock = false): Promise<RunRow | undefined> {
  const { rows } = await q.query<RunRow>(`SELECT * FROM runs WHERE thread_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`, [threadId, id]);
  return rows[0];
}

export async function findRunById(q: Queryable, id: string): Promise<RunRow | undefined> {
  const { rows } = await q.query<RunRow>(`SELECT * FROM runs WHERE id = $1`, [id]);
  return rows[0];
}

export async function listRuns(q: Queryable, threadId: string, page: Page): Promise<RunRow[]> {
  const [cmp, dir] = page.order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
  const { rows } = await q.query<RunRow>(
    `SELECT * FROM runs WHERE thread_id = $1
       AND ($2::text IS NULL OR (created_at, id) ${cmp} (SELECT r.created_at, r.id FROM runs r WHERE r.thread_id = $1 AND r.id = $2))
     ORDER BY created_at ${dir}, id ${dir} LIMIT $3`,
    [threadId, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

/** Moves a run from one of `from` to `to` with the fields given; undefined when it was in none of them. */
export async function moveRun(
  q: Queryable,
  id: string,
  from: RunStatus[],
  to: RunStatus,
  fields: { required_action?: RequiredAction | null; last_error?: { code: string; message: string } | null; incomplete_details?: IncompleteDetails; expiresInSeconds?: number } = {},
): Promise<RunRow | undefined> {
  const { rows } = await q.query<RunRow>(
    `UPDATE runs SET status = $3, updated_at = now(), incomplete_details = coalesce($9::jsonb, incomplete_details),
       required_action = CASE WHEN $4 THEN $5::jsonb ELSE required_action END,
       last_error = CASE WHEN $6 THEN $7::jsonb ELSE last_error END,
       started_at = CASE WHEN $3 = 'in_progress' THEN coalesce(started_at, now()) ELSE started_at END,
       expires_at = CASE WHEN $8::int IS NOT NULL THEN now() + make_interval(secs => $8) WHEN $3 IN ('in_progress', 'requires_action') THEN expires_at ELSE NULL END,
       cancelled_at = CASE WHEN $3 = 'cancelled' THEN now() ELSE cancelled_at END,
       failed_at = CASE WHEN $3 IN ('failed', 'expired') THEN now() ELSE failed_at END,
       completed_at = CASE WHEN $3 = 'completed' THEN now() ELSE completed_at END
     WHERE id = $1 AND status = ANY($2) RETURNING *`,
    [id, from, to, fields.required_action !== undefined, json(fields.required_action), fields.last_error !== undefined, json(fields.last_error), fields.expiresInSeconds ?? null, json(fields.incomplete_details ?? null)],
  );
  return rows[0];
}

export async function updateRunMetadata(q: Queryable, id: string, metadata: Record<string, string> | null): Promise<RunRow> {
  const { rows } = await q.query<RunRow>(`UPDATE runs SET metadata = $2, updated_at = now() WHERE id = $1 RETURNING *`, [id, json(metadata)]);
  return rows[0]!;
}

export interface StepRow {
  id: string;
  run_id: string;
  step_index: number;
  type: 'message_creation' | 'tool_calls';
  status: 'in_progress' | 'completed' | 'cancelled' | 'failed' | 'expired';
  step_details: StepDetails;
  prompt_tokens: number;
  completion_tokens: number;
  cost_micros: string;
  created_at: Date;
  completed_at: Date | null;
}

export type ToolCallRecord =
  | { id: string; type: 'function'; function: { name: string; arguments: string; output: string | null } }
  | { id: string; type: 'file_search'; file_search: { ranking_options: { ranker: string; score_threshold: number }; results: unknown[] } };

export type StepDetails = { type: 'message_creation'; message_creation: { message_id: string } } | { type: 'tool_calls'; tool_calls: ToolCallRecord[] };

/** Records a step once: a step run again (its activity retried) finds the first record. */
export async function recordStep(
  q: Queryable,
  step: Pick<StepRow, 'id' | 'run_id' | 'step_index' | 'type' | 'status' | 'step_details' | 'prompt_tokens' | 'completion_tokens'> & { cost_micros: number },
): Promise<StepRow> {
  const { rows } = await q.query<StepRow>(
    `INSERT INTO run_steps (id, run_id, step_index, type, status, step_details, prompt_tokens, completion_tokens, cost_micros, completed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN $5 = 'completed' THEN now() END)
     ON CONFLICT (run_id, step_index) DO UPDATE SET run_id = excluded.run_id RETURNING *`,
    [step.id, step.run_id, step.step_index, step.type, step.status, JSON.stringify(step.step_details), step.prompt_tokens, step.completion_tokens, step.cost_micros],
  );
  return rows[0]!;
}

export async function updateStep(q: Queryable, runId: string, stepIndex: number, fields: { status: StepRow['status']; step_details?: StepDetails }): Promise<void> {
  await q.query(
    `UPDATE run_steps SET status = $3, step_details = coalesce($4::jsonb, step_details), completed_at = CASE WHEN $3 = 'completed' THEN now() ELSE completed_at END
     WHERE run_id = $1 AND step_index = $2`,
    [runId, stepIndex, fields.status, json(fields.step_details)],
  );
}

export async function findStep(q: Queryable, runId: string, stepIndex: number): Promise<StepRow | undefined> {
  const { rows } = await q.query<StepRow>(`SELECT * FROM run_steps WHERE run_id = $1 AND step_index = $2`, [runId, stepIndex]);
  return rows[0];
}

export async function stepsOf(q: Queryable, runId: string): Promise<StepRow[]> {
  const { rows } = await q.query<StepRow>(`SELECT * FROM run_steps WHERE run_id = $1 ORDER BY step_index`, [runId]);
  return rows;
}

export async function findStepById(q: Queryable, runId: string, id: string): Promise<StepRow | undefined> {
  const { rows } = await q.query<StepRow>(`SELECT * FROM run_steps WHERE run_id = $1 AND id = $2`, [runId, id]);
  return rows[0];
}

/** Cancels or expires a run's unfinished steps with it. */
export async function closeOpenSteps(q: Queryable, runId: string, status: 'cancelled' | 'expired' | 'failed'): Promise<void> {
  await q.query(`UPDATE run_steps SET status = $2 WHERE run_id = $1 AND status = 'in_progress'`, [runId, status]);
}
