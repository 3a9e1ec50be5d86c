import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { z } from 'zod';
import type { Db } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { parseMetadata } from '../metadata.js';
import { pageRequest, toPage, withIds } from '../pagination.js';
import { checkChatModel, checkTools, LIST_PAGE, seconds, secondsOrNull } from './assistants.js';
import type { GatewayServices } from '../composition/gateway.js';
import { lastRunEventId } from './run-events.js';
import * as repo from './repository.js';
import type { runBody, threadAndRunBody, toolOutputsBody } from './schemas.js';
import { createThread, MAX_THREAD_MESSAGES, newMessages, threadOf, type ThreadCaller, type ThreadServices } from './threads.js';

/**
 * Runs (OpenAI's /v1/threads/{id}/runs): a row callers poll, and the Temporal workflow whose id is
 * the run id (workflows/assistant-run.ts), which moves it through queued -> in_progress ->
 * requires_action -> ... -> completed | failed | cancelled | expired. One active run per thread
 * (409 thread_locked). Submitting tool outputs and cancelling change the row first, then signal
 * the workflow, so a lost signal delays a run but never loses what the caller sent.
 */
export const RUN_WORKFLOW = 'assistantRunWorkflow';
export const TOOL_OUTPUTS_SIGNAL = 'toolOutputs';
export const CANCEL_RUN_SIGNAL = 'cancelRun';
const UNIQUE_VIOLATION = '23505';
const FINISHED: repo.RunStatus[] = ['cancelled', 'completed', 'failed', 'expired', 'incomplete'];

/** Mirrors workflows/assistant-run.ts. */
export interface RunWorkflowInput {
  runId: string;
  requiresActionSeconds: number;
  heartbeatSeconds: number;
}

export async function createRun(platform: ThreadServices, caller: ThreadCaller, threadId: string, body: z.output<typeof runBody>) {
  const assistant = await repo.findAssistant(platform.db, caller.developerId, body.assistant_id);
  if (!assistant) throw serviceError('invalid_assistant_id', { param: 'assistant_id' });
  const thread = await threadOf(platform.db, caller, threadId);
  const model = body.model ?? assistant.model;
  if (body.model) await checkChatModel(platform, caller.developerId, body.model);
  const tools = body.tools ? checkTools(body.tools) : assistant.tools;
  const additional = newMessages(body.additional_messages ?? [], 'additional_messages');
  const instructions = [body.instructions ?? assistant.instructions ?? '', body.additional_instructions ?? ''].filter(Boolean).join('\n\n');

  let run: repo.RunRow;
  try {
    run = await withTransaction(platform.db, async (client) => {
      const inserted = await repo.insertRun(client, {
        id: newId('run_'),
        thread_id: thread.id,
        assistant_id: assistant.id,
        developer_id: caller.developerId,
        payer_account_id: caller.payerAccountId,
        customer_id: caller.billedCustomerId ?? caller.customerId ?? thread.customer_id,
        model,
        instructions,
        tools,
        tool_resources: assistant.tool_resources,
        temperature: body.temperature !== undefined ? body.temperature : assistant.temperature,
        top_p: body.top_p !== undefined ? body.top_p : assistant.top_p,
        max_completion_tokens: body.max_completion_tokens ?? null,
        max_prompt_tokens: body.max_prompt_tokens ?? null,
        truncation_strategy: body.truncation_strategy ?? { type: 'auto', last_messages: null },
        response_format: body.response_format ?? assistant.response_format ?? 'auto',
        tool_choice: body.tool_choice ?? 'auto',
        parallel_tool_calls: body.parallel_tool_calls ?? true,
        metadata: body.metadata == null ? null : parseMetadata(body.metadata),
      });
      if (additional.length > 0) {
        const appended = await repo.appendMessages(client, thread.id, additional.map((message) => ({ ...message, run_id: null })), MAX_THREAD_MESSAGES);
        if (appended === 'full') throw serviceError('thread_full');
      }
      return inserted;
    });
  } catch (error) {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError('thread_locked');
    throw error;
  }
  await startRunWorkflow(platform, run);
  return formatRun(run, []);
}

/** POST /v1/threads/runs: a thread with its messages, then its first run. */
export async function createThreadAndRun(platform: ThreadServices, caller: ThreadCaller, body: z.output<typeof threadAndRunBody>) {
  const { thread: threadFields, tool_resources, ...run } = body;
  if (!(await repo.findAssistant(platform.db, caller.developerId, run.assistant_id))) throw serviceError('invalid_assistant_id', { param: 'assistant_id' });
  const thread = await createThread(platform, caller, { ...threadFields, ...(tool_resources !== undefined && { tool_resources }) });
  return createRun(platform, caller, thread.id, run);
}

/** Idempotent: the workflow id is the run id. A start that fails leaves the run queued; it fails the run rather than hang it. */
async function startRunWorkflow(platform: ThreadServices, run: repo.RunRow): Promise<void> {
  try {
    await platform.temporal.client.workflow.start(RUN_WORKFLOW, {
      taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
      workflowId: run.id,
      args: [{ runId: run.id, requiresActionSeconds: platform.config.ASSISTANT_REQUIRES_ACTION_SECONDS, heartbeatSeconds: platform.config.ASSISTANT_HEARTBEAT_TIMEOUT_SECONDS } satisfies RunWorkflowInput],
      staticSummary: `Run ${run.id} of ${run.assistant_id} on ${run.thread_id}`,
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return;
    await repo.moveRun(platform.db, run.id, ['queued'], 'failed', { last_error: { code: 'server_error', message: 'The run could not be started; create it again.' } });
    throw error;
  }
}

export async function getRun(db: Db, caller: ThreadCaller, threadId: string, runId: string) {
  const run = await runOf(db, caller, threadId, runId);
  return formatRun(run, await repo.stepsOf(db, run.id));
}

export async function listRuns(db: Db, caller: ThreadCaller, threadId: string, query: { limit?: string; after?: string; order?: 'asc' | 'desc' }) {
  await threadOf(db, caller, threadId);
  const page = pageRequest({ limit: query.limit, after: typeof query.after === 'string' && query.after.startsWith('run_') ? Buffer.from(JSON.stringify({ id: query.after })).toString('base64url') : query.after }, LIST_PAGE);
  const rows = await repo.listRuns(db, threadId, { ...page, order: query.order ?? 'desc' });
  const steps = new Map(await Promise.all(rows.map(async (row) => [row.id, await repo.stepsOf(db, row.id)] as const)));
  return withIds(toPage(rows, page, (row) => formatRun(row, steps.get(row.id) ?? [])));
}

export async function updateRun(db: Db, caller: ThreadCaller, threadId: string, runId: string, metadata: Record<string, unknown> | null | undefined) {
  const run = await runOf(db, caller, threadId, runId);
  const updated = await repo.updateRunMetadata(db, run.id, metadata == null ? null : parseMetadata(metadata));
  return formatRun(updated, await repo.stepsOf(db, run.id));
}

async function runOf(db: Db, caller: ThreadCaller, threadId: string, runId: string): Promise<repo.RunRow> {
  await threadOf(db, caller, threadId);
  const run = await repo.findRun(db, threadId, runId);
  if (!run) throw serviceError('not_found', { message: 'No such run in this thread.' });
  return run;
}

/**
 * Tool outputs for a run in requires_action: they must answer exactly the calls it waits for
 * (invalid_tool_call_id); any other state is 409 run_not_in_requires_action.
 */
export async function submitToolOutputs(platform: ThreadServices & Pick<GatewayServices, 'redis'>, caller: ThreadCaller, threadId: string, runId: string, body: z.output<typeof toolOutputsBody>) {
  await threadOf(platform.db, caller, threadId);
  // A stream of what follows starts after the events so far.
  const afterEventId = await lastRunEventId(platform.redis, platform.config.REDIS_KEY_PREFIX, runId);
  const resumed = await withTransaction(platform.db, async (client) => {
    const run = await repo.findRun(client, threadId, runId, true);
    if (!run) throw serviceError('not_found', { message: 'No such run in this thread.' });
    if (run.status !== 'requires_action' || !run.required_action) throw serviceError('run_not_in_requires_action');
    const waiting = run.required_action.submit_tool_outputs.tool_calls.map((call) => call.id);
    const given = body.tool_outputs.map((output) => output.tool_call_id);
    if (new Set(given).size !== given.length || given.length !== waiting.length || !given.every((id) => waiting.includes(id))) {
      throw serviceError('invalid_tool_call_id', { param: 'tool_outputs', message: `tool_outputs must answer exactly these tool calls, each once: ${waiting.join(', ')}.` });
    }
    const steps = await repo.stepsOf(client, run.id);
    const step = steps.at(-1)!;
    if (step.step_details.type !== 'tool_calls') throw serviceError('run_not_in_requires_action');
    const outputs = new Map(body.tool_outputs.map((output) => [output.tool_call_id, output.output]));
    const details: repo.StepDetails = {
      type: 'tool_calls',
      tool_calls: step.step_details.tool_calls.map((call) => (call.type === 'function' && outputs.has(call.id) ? { ...call, function: { ...call.function, output: outputs.get(call.id)! } } : call)),
    };
    await repo.updateStep(client, run.id, step.step_index, { status: 'completed', step_details: details });
    return (await repo.moveRun(client, run.id, ['requires_action'], 'in_progress', { required_action: null }))!;
  });
  await signalRun(platform, runId, TOOL_OUTPUTS_SIGNAL);
  return { run: formatRun(resumed, await repo.stepsOf(platform.db, runId)), afterEventId };
}

/** queued, in_progress or requires_action -> cancelling (the workflow ends it cancelled); a finished run is 409 run_already_completed. */
export async function cancelRun(platform: ThreadServices, caller: ThreadCaller, threadId: string, runId: string) {
  const run = await runOf(platform.db, caller, threadId, runId);
  if (FINISHED.includes(run.status)) throw serviceError('run_already_completed');
  const cancelling = (await repo.moveRun(platform.db, run.id, ['queued', 'in_progress', 'requires_action'], 'cancelling')) ?? (await repo.findRunById(platform.db, run.id))!;
  if (FINISHED.includes(cancelling.status)) throw serviceError('run_already_completed');
  await signalRun(platform, runId, CANCEL_RUN_SIGNAL);
  return formatRun(cancelling, await repo.stepsOf(platform.db, runId));
}

/** Wakes the workflow; the row already says what happened, so a signal lost here only delays the run. */
async function signalRun(platform: ThreadServices, runId: string, signal: string): Promise<void> {
  try {
    await platform.temporal.client.workflow.getHandle(runId).signal(signal);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) platform.logger.warn({ err: error, runId, signal }, 'run signal not delivered; the workflow reads the run row when it wakes');
  }
}

export async function listSteps(db: Db, caller: ThreadCaller, threadId: string, runId: string, order: 'asc' | 'desc' = 'desc') {
  const run = await runOf(db, caller, threadId, runId);
  const steps = await repo.stepsOf(db, run.id);
  const data = steps.map((step) => formatStep(run, step));
  if (order === 'desc') data.reverse();
  return { object: 'list' as const, data, has_more: false, next_cursor: null, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}

export async function getStep(db: Db, caller: ThreadCaller, threadId: string, runId: string, stepId: string) {
  const run = await runOf(db, caller, threadId, runId);
  const step = await repo.findStepById(db, run.id, stepId);
  if (!step) throw serviceError('not_found', { message: 'No such step in this run.' });
  return formatStep(run, step);
}

/** The tokens a run's steps used: its usage, and what its token budgets have spent. */
export function tokensOf(steps: repo.StepRow[]): { prompt: number; completion: number } {
  return steps.reduce((sum, step) => ({ prompt: sum.prompt + step.prompt_tokens, completion: sum.completion + step.completion_tokens }), { prompt: 0, completion: 0 });
}

/** A run's usage is the sum of its steps' metered calls. */
export function formatRun(run: repo.RunRow, steps: repo.StepRow[]) {
  const { prompt, completion } = tokensOf(steps);
  const finished = FINISHED.includes(run.status);
  return {
    id: run.id,
    object: 'thread.run' as const,
    created_at: seconds(run.created_at),
    thread_id: run.thread_id,
    assistant_id: run.assistant_id,
    status: run.status,
    required_action: run.required_action,
    last_error: run.last_error,
    expires_at: secondsOrNull(run.expires_at),
    started_at: secondsOrNull(run.started_at),
    cancelled_at: secondsOrNull(run.cancelled_at),
    failed_at: secondsOrNull(run.failed_at),
    completed_at: secondsOrNull(run.completed_at),
    incomplete_details: run.incomplete_details,
    model: run.model,
    instructions: run.instructions,
    tools: run.tools,
    metadata: run.metadata ?? {},
    usage: finished ? { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } : null,
    temperature: run.temperature,
    top_p: run.top_p,
    max_prompt_tokens: run.max_prompt_tokens,
    max_completion_tokens: run.max_completion_tokens,
    truncation_strategy: run.truncation_strategy,
    response_format: run.response_format,
    tool_choice: run.tool_choice,
    parallel_tool_calls: run.parallel_tool_calls,
    cost_usd: steps.reduce((sum, step) => sum + Number(step.cost_micros), 0) / 1_000_000,
  };
}

export function formatStep(run: repo.RunRow, step: repo.StepRow) {
  return {
    id: step.id,
    object: 'thread.run.step' as const,
    created_at: seconds(step.created_at),
    run_id: run.id,
    assistant_id: run.assistant_id,
    thread_id: run.thread_id,
    type: step.type,
    status: step.status,
    cancelled_at: step.status === 'cancelled' ? secondsOrNull(step.completed_at ?? run.cancelled_at) : null,
    completed_at: step.status === 'completed' ? secondsOrNull(step.completed_at) : null,
    expired_at: step.status === 'expired' ? secondsOrNull(run.failed_at) : null,
    failed_at: step.status === 'failed' ? secondsOrNull(run.failed_at) : null,
    last_error: null,
    step_details: step.step_details,
    usage: { prompt_tokens: step.prompt_tokens, completion_tokens: step.completion_tokens, total_tokens: step.prompt_tokens + step.completion_tokens },
    metadata: {},
  };
}
