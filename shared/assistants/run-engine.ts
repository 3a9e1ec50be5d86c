import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { backgroundCall } from '../billing/background-call.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { newId } from '../ids.js';
import { parseChatInput, planChat } from '../inference/chat.js';
import { completeChat } from '../inference/complete-chat.js';
import { resolutionContextFor } from '../models/definitions.js';
import { encodeCl100k } from '../vector-stores/chunking.js';
import { searchVectorStore } from '../vector-stores/search.js';
import { publishRunEvents, type RunEvent } from './run-events.js';
import * as repo from './repository.js';
import { formatRun, formatStep, tokensOf } from './runs.js';
import { formatMessage, MAX_THREAD_MESSAGES, type MessageContentText } from './threads.js';

/**
 * What a run's workflow does, step by step, as activities (workflows/assistant-run.ts): each model
 * call is one step (index 0, 1, ...), called through the gateway's own chat path (metering,
 * wallets, customers, cascades) with a billing key of its own, and recorded once. A step run again
 * after a worker died finds its record and answers as it did, so no message is posted twice and
 * no call billed twice. file_search calls run inside their step; function calls wait for
 * submit_tool_outputs in requires_action.
 */
/** Model calls one run may make before it fails: an agent loop must end. */
export const MAX_RUN_STEPS = 24;
const FILE_SEARCH_TOOL = 'file_search';
const DEFAULT_FILE_SEARCH_RESULTS = 10;

export type StepOutcome = { kind: 'message' } | { kind: 'tools'; nextStep: number } | { kind: 'requires_action' } | { kind: 'cancelling' } | { kind: 'stopped' };

/** queued -> in_progress; false when the run is no longer queued (cancelled first, or already started). */
export async function startRun(platform: GatewayServices, runId: string): Promise<{ running: boolean; cancelling: boolean }> {
  const started = await repo.moveRun(platform.db, runId, ['queued'], 'in_progress');
  if (started) {
    await publish(platform, runId, [{ event: 'thread.run.in_progress', data: formatRun(started, []) }]);
    return { running: true, cancelling: false };
  }
  const run = await repo.findRunById(platform.db, runId);
  return { running: run?.status === 'in_progress', cancelling: run?.status === 'cancelling' };
}

/**
 * One model call of a run. Step 0 also starts a queued run (queued -> in_progress), and a step
 * that answers in text also completes the run, in the transaction that posts the message: a run
 * without tools is one local activity, and a retried step finds what it recorded.
 */
export async function runModelStep(platform: GatewayServices, runId: string, stepIndex: number): Promise<StepOutcome> {
  let run = await repo.findRunById(platform.db, runId);
  if (!run) return { kind: 'stopped' };
  if (run.status === 'queued' && stepIndex === 0) {
    const started = await repo.moveRun(platform.db, runId, ['queued'], 'in_progress');
    if (started) await publish(platform, runId, [{ event: 'thread.run.in_progress', data: formatRun(started, []) }]);
    run = started ?? (await repo.findRunById(platform.db, runId))!;
  }
  if (run.status === 'cancelling') return { kind: 'cancelling' };
  const steps = await repo.stepsOf(platform.db, runId);
  const recorded = steps.find((step) => step.step_index === stepIndex);
  if (recorded) return outcomeOf(platform, run, recorded);
  if (run.status !== 'in_progress') return { kind: 'stopped' };
  const priorSteps = steps.filter((step) => step.step_index < stepIndex);

  const budget = budgetOf(run, priorSteps);
  if (budget.completionTokens !== null && budget.completionTokens <= 0) return endIncomplete(platform, run, 'max_completion_tokens');
  const body = await chatBodyOf(platform, run, priorSteps, budget);
  if (!body) return endIncomplete(platform, run, 'max_prompt_tokens');
  const call = await meteredCallOf(platform, run);
  const input = parseChatInput(body, { idempotencyKey: undefined });
  const targets = await planChat(input, resolutionContextFor(platform, run.developer_id), platform.providers);
  const completed = await completeChat(platform, call, input, targets, { signal: new AbortController().signal, billingKey: `run:${run.id}:${stepIndex}` });
  const choice = completed.body.choices[0]!;
  const usage = { prompt_tokens: completed.body.usage.prompt_tokens, completion_tokens: completed.body.usage.completion_tokens, cost_micros: completed.deductedMicros };
  const toolCalls = (choice.message as { tool_calls?: { id: string; function: { name: string; arguments: string } }[] }).tool_calls ?? [];

  if (toolCalls.length === 0) {
    const text = typeof choice.message.content === 'string' ? choice.message.content : '';
    const { message, step, finished } = await withTransaction(platform.db, async (client) => {
      const messageId = newId('msg_');
      const appended = await repo.appendMessages(client, run.thread_id, [
        { id: messageId, role: 'assistant', content: [withCitations(text, priorSteps)], attachments: null, assistant_id: run.assistant_id, run_id: run.id, step_index: stepIndex, metadata: null },
      ], MAX_THREAD_MESSAGES);
      if (appended === 'full') throw serviceError('thread_full');
      const recordedStep = await repo.recordStep(client, {
        id: newId('step_'), run_id: run.id, step_index: stepIndex, type: 'message_creation', status: 'completed',
        step_details: { type: 'message_creation', message_creation: { message_id: appended[0]!.id } }, ...usage,
      });
      // An answer cut short by the run's last completion tokens ends the run incomplete, as OpenAI's do.
      const spent = choice.finish_reason === 'length' && budget.completionTokens !== null && usage.completion_tokens >= budget.completionTokens;
      const finished = spent ? await endRun(client, run.id, 'incomplete', { incomplete: { reason: 'max_completion_tokens' } }) : await endRun(client, run.id, 'completed');
      return { message: appended[0]!, step: recordedStep, finished };
    });
    const formatted = formatMessage(message);
    await publish(platform, run.id, [
      { event: 'thread.run.step.created', data: { ...formatStep(run, step), status: 'in_progress', completed_at: null } },
      { event: 'thread.message.created', data: { ...formatted, status: 'in_progress', content: [] } },
      { event: 'thread.message.delta', data: { id: message.id, object: 'thread.message.delta', delta: { content: (message.content as MessageContentText[]).map((part, index) => ({ index, ...part })) } } },
      { event: 'thread.message.completed', data: formatted },
      { event: 'thread.run.step.completed', data: formatStep(run, step) },
      ...(finished ? [{ event: `thread.run.${finished.status}`, data: formatRun(finished, [...priorSteps, step]) }] : []),
    ]);
    return { kind: 'message' };
  }

  // file_search runs here, in this step; function calls wait for the caller's outputs.
  const records: repo.ToolCallRecord[] = [];
  for (const toolCall of toolCalls) {
    if (toolCall.function.name === FILE_SEARCH_TOOL && hasFileSearch(run)) {
      const results = await fileSearch(platform, run, call, toolCall.function.arguments, `run:${run.id}:${stepIndex}:${toolCall.id}`);
      records.push({ id: toolCall.id, type: 'file_search', file_search: { ranking_options: { ranker: 'default-2024-11-15', score_threshold: 0 }, results } });
    } else {
      records.push({ id: toolCall.id, type: 'function', function: { name: toolCall.function.name, arguments: toolCall.function.arguments, output: null } });
    }
  }
  const pending = records.filter((record): record is Extract<repo.ToolCallRecord, { type: 'function' }> => record.type === 'function');
  const { step, waiting } = await withTransaction(platform.db, async (client) => {
    const recordedStep = await repo.recordStep(client, {
      id: newId('step_'), run_id: run.id, step_index: stepIndex, type: 'tool_calls', status: pending.length > 0 ? 'in_progress' : 'completed',
      step_details: { type: 'tool_calls', tool_calls: records }, ...usage,
    });
    const moved =
      pending.length > 0
        ? await repo.moveRun(client, run.id, ['in_progress'], 'requires_action', {
            required_action: { type: 'submit_tool_outputs', submit_tool_outputs: { tool_calls: pending.map((call) => ({ id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } })) } },
            expiresInSeconds: platform.config.ASSISTANT_REQUIRES_ACTION_SECONDS,
          })
        : undefined;
    return { step: recordedStep, waiting: moved };
  });
  await publish(platform, run.id, [
    { event: 'thread.run.step.created', data: formatStep(run, step) },
    ...(step.status === 'completed' ? [{ event: 'thread.run.step.completed', data: formatStep(run, step) }] : []),
    ...(waiting ? [{ event: 'thread.run.requires_action', data: formatRun(waiting, []) }] : []),
  ]);
  return pending.length > 0 ? { kind: 'requires_action' } : { kind: 'tools', nextStep: stepIndex + 1 };
}

/** A step already recorded answers as it did the first time. */
async function outcomeOf(platform: GatewayServices, run: repo.RunRow, step: repo.StepRow): Promise<StepOutcome> {
  if (step.type === 'message_creation') return { kind: 'message' };
  const waiting = step.step_details.type === 'tool_calls' && step.step_details.tool_calls.some((call) => call.type === 'function' && call.function.output === null);
  if (!waiting) return { kind: 'tools', nextStep: step.step_index + 1 };
  return run.status === 'requires_action' || run.status === 'in_progress' ? { kind: 'requires_action' } : { kind: 'stopped' };
}

/**
 * After the wait for tool outputs: 'resumed' when submit_tool_outputs recorded them (the run is
 * in progress again), 'cancelling' when a cancel came, 'expired' when the time to answer passed
 * (ASSISTANT_REQUIRES_ACTION_SECONDS, spec 1's 10 minutes), 'waiting' when none of these yet.
 */
export async function afterRequiresAction(platform: GatewayServices, runId: string): Promise<'resumed' | 'cancelling' | 'expired' | 'waiting' | 'stopped'> {
  const run = await repo.findRunById(platform.db, runId);
  if (!run) return 'stopped';
  if (run.status === 'in_progress') return 'resumed';
  if (run.status === 'cancelling') return 'cancelling';
  if (run.status === 'requires_action' && run.expires_at && run.expires_at.getTime() <= Date.now()) {
    await finishRun(platform, runId, 'expired', { error: { code: 'expired', message: 'The run waited 10 minutes for tool outputs.' } });
    return 'expired';
  }
  // Woken early (a stale signal): the outputs have not come and the time has not run out.
  return run.status === 'requires_action' ? 'waiting' : 'stopped';
}

/** The run's end: its state, its unfinished steps, and run.completed / run.failed / run.cancelled, in one transaction. */
export async function finishRun(platform: GatewayServices, runId: string, outcome: RunOutcome, ending: RunEnding = {}): Promise<void> {
  const finished = await withTransaction(platform.db, (client) => endRun(client, runId, outcome, ending));
  if (finished) await publish(platform, runId, [{ event: `thread.run.${outcome}`, data: formatRun(finished, await repo.stepsOf(platform.db, runId)) }]);
}

type RunOutcome = 'completed' | 'failed' | 'cancelled' | 'expired' | 'incomplete';

/** Why a run ended other than completed: its last_error, or which token budget ran out. */
interface RunEnding {
  error?: { code: string; message: string };
  incomplete?: repo.IncompleteDetails;
}

/**
 * Inside the caller's transaction: undefined when the run had already ended. The spec's run events
 * are run.completed, run.failed and run.cancelled: an expired or incomplete run is a run.failed
 * whose status says which.
 */
async function endRun(client: Queryable, runId: string, outcome: RunOutcome, { error, incomplete }: RunEnding = {}): Promise<repo.RunRow | undefined> {
  const finished = await repo.moveRun(client, runId, ['queued', 'in_progress', 'requires_action', 'cancelling'], outcome, {
    required_action: null,
    ...(error && { last_error: error }),
    ...(incomplete && { incomplete_details: incomplete }),
  });
  if (!finished) return undefined;
  await repo.closeOpenSteps(client, runId, outcome === 'cancelled' ? 'cancelled' : outcome === 'expired' ? 'expired' : 'failed');
  const type = outcome === 'completed' ? 'run.completed' : outcome === 'cancelled' ? 'run.cancelled' : 'run.failed';
  await recordEvent(client, finished.developer_id, type, {
    id: runId, thread_id: finished.thread_id, assistant_id: finished.assistant_id, status: outcome, ...(error && { last_error: error }), ...(incomplete && { incomplete_details: incomplete }),
  });
  return finished;
}

/** A run whose token budget ran out before its next model call ends incomplete. */
async function endIncomplete(platform: GatewayServices, run: repo.RunRow, reason: repo.IncompleteDetails['reason']): Promise<StepOutcome> {
  await finishRun(platform, run.id, 'incomplete', { incomplete: { reason } });
  return { kind: 'stopped' };
}

/**
 * What is left of the run's token budgets for its next model call (null: no budget): max_prompt_tokens
 * and max_completion_tokens hold over the whole run, so every earlier step's usage counts.
 */
function budgetOf(run: repo.RunRow, priorSteps: repo.StepRow[]): { promptTokens: number | null; completionTokens: number | null } {
  const { prompt, completion } = tokensOf(priorSteps);
  return {
    promptTokens: run.max_prompt_tokens === null ? null : run.max_prompt_tokens - prompt,
    completionTokens: run.max_completion_tokens === null ? null : run.max_completion_tokens - completion,
  };
}

/** Progress for the run's stream followers; a follower that misses it still finds the state in the row. */
async function publish(platform: GatewayServices, runId: string, events: RunEvent[]): Promise<void> {
  try {
    await publishRunEvents(platform.redis, platform.config.REDIS_KEY_PREFIX, runId, events);
  } catch (error) {
    platform.logger.warn({ err: error, runId }, 'run events not published');
  }
}

function meteredCallOf(platform: GatewayServices, run: repo.RunRow): Promise<MeteredCall> {
  return backgroundCall(platform.db, { developerId: run.developer_id, payerAccountId: run.payer_account_id, customerId: run.customer_id, requestId: `run_${run.id.slice(4)}` });
}

function hasFileSearch(run: repo.RunRow): boolean {
  return (run.tools as { type: string }[]).some((tool) => tool.type === 'file_search');
}

/**
 * The chat request of one step: instructions, the thread (truncated as the run says), then this
 * run's tool calls and their outputs. Under a prompt budget the oldest thread messages are left out
 * until the request fits it (counted in cl100k tokens, four more a message for its framing), down
 * to the latest message; undefined when even that does not fit.
 */
async function chatBodyOf(platform: GatewayServices, run: repo.RunRow, priorSteps: repo.StepRow[], budget: { promptTokens: number | null; completionTokens: number | null }): Promise<Record<string, unknown> | undefined> {
  const last = run.truncation_strategy?.type === 'last_messages' ? (run.truncation_strategy.last_messages ?? null) : null;
  const history = await repo.threadHistory(platform.db, run.thread_id, last);
  const instructions: Record<string, unknown>[] = run.instructions ? [{ role: 'system', content: run.instructions }] : [];
  let thread: Record<string, unknown>[] = history.map((message) => ({ role: message.role, content: (message.content as MessageContentText[]).map((part) => part.text.value).join('\n') }));
  const toolTurns: Record<string, unknown>[] = [];
  for (const step of priorSteps) {
    if (step.step_details.type !== 'tool_calls') continue;
    const calls = step.step_details.tool_calls;
    toolTurns.push({
      role: 'assistant',
      content: null,
      tool_calls: calls.map((call) => ({ id: call.id, type: 'function', function: call.type === 'function' ? { name: call.function.name, arguments: call.function.arguments } : { name: FILE_SEARCH_TOOL, arguments: '{}' } })),
    });
    for (const call of calls) {
      toolTurns.push({ role: 'tool', tool_call_id: call.id, content: call.type === 'function' ? (call.function.output ?? '') : JSON.stringify(call.file_search.results) });
    }
  }
  const tools = (run.tools as { type: string; function?: Record<string, unknown> }[]).map((tool) =>
    tool.type === 'file_search'
      ? { type: 'function', function: { name: FILE_SEARCH_TOOL, description: "Search the files attached to this assistant and thread for passages relevant to the user's question.", parameters: { type: 'object', properties: { query: { type: 'string' } } } } }
      : { type: 'function', function: tool.function },
  );
  if (budget.promptTokens !== null) {
    const fixed = promptTokensOf([...instructions, ...toolTurns]) + (tools.length > 0 ? encodeCl100k(JSON.stringify(tools)).length : 0);
    const sizes = thread.map((message) => promptTokensOf([message]));
    let total = fixed + sizes.reduce((sum, size) => sum + size, 0);
    let first = 0;
    while (total > budget.promptTokens && first < thread.length - 1) total -= sizes[first++]!;
    if (total > budget.promptTokens) return undefined;
    thread = thread.slice(first);
  }
  return {
    model: run.model,
    messages: [...instructions, ...thread, ...toolTurns],
    ...(tools.length > 0 && { tools }),
    ...(run.tool_choice !== null && run.tool_choice !== undefined && tools.length > 0 && { tool_choice: toolChoiceOf(run.tool_choice) }),
    ...(run.temperature !== null && { temperature: run.temperature }),
    ...(run.top_p !== null && { top_p: run.top_p }),
    ...(budget.completionTokens !== null && { max_completion_tokens: budget.completionTokens }),
  };
}

/** The cl100k tokens of messages as a chat prompt: their content and tool calls, and four a message for the role and framing. */
function promptTokensOf(messages: Record<string, unknown>[]): number {
  let tokens = 0;
  for (const message of messages) {
    tokens += MESSAGE_FRAMING_TOKENS;
    if (typeof message.content === 'string') tokens += encodeCl100k(message.content).length;
    if (message.tool_calls) tokens += encodeCl100k(JSON.stringify(message.tool_calls)).length;
  }
  return tokens;
}

const MESSAGE_FRAMING_TOKENS = 4;

function toolChoiceOf(choice: unknown): unknown {
  if (typeof choice === 'string') return choice;
  const named = choice as { type: string; function?: { name: string } };
  return { type: 'function', function: { name: named.type === 'file_search' ? FILE_SEARCH_TOOL : (named.function?.name ?? '') } };
}

/** Searches every vector store of the run (the assistant's and the thread's) and keeps the best results. */
async function fileSearch(platform: GatewayServices, run: repo.RunRow, call: MeteredCall, args: string, billingKey: string) {
  let query = '';
  try {
    const parsed = JSON.parse(args) as { query?: unknown };
    if (typeof parsed.query === 'string') query = parsed.query;
  } catch {
    // The model sent no usable arguments: search for the user's last message.
  }
  if (!query) {
    const history = await repo.threadHistory(platform.db, run.thread_id, 20);
    const lastUser = history.filter((message) => message.role === 'user').at(-1);
    query = lastUser ? (lastUser.content as MessageContentText[]).map((part) => part.text.value).join('\n') : '';
  }
  if (!query.trim()) return [];
  const thread = await platform.db.query<{ tool_resources: repo.ToolResources | null }>(`SELECT tool_resources FROM threads WHERE id = $1`, [run.thread_id]);
  const storeIds = [...new Set([...(run.tool_resources?.file_search?.vector_store_ids ?? []), ...(thread.rows[0]?.tool_resources?.file_search?.vector_store_ids ?? [])])];
  const max = (run.tools as { type: string; file_search?: { max_num_results?: number } }[]).find((tool) => tool.type === 'file_search')?.file_search?.max_num_results ?? DEFAULT_FILE_SEARCH_RESULTS;
  const caller = { developerId: run.developer_id, payerAccountId: run.payer_account_id, customerId: run.customer_id, passphrase: undefined };
  const results = [];
  for (const storeId of storeIds) {
    const page = await searchVectorStore(platform, caller, call, storeId, { query: query.slice(0, 10_000), max_num_results: max }, { billingKey: `${billingKey}:${storeId}` });
    results.push(...page.data.map((result) => ({ ...result, vector_store_id: storeId })));
  }
  return results.sort((a, b) => b.score - a.score).slice(0, max);
}

/**
 * The assistant's text with a citation for each file its file_search steps found: markers as
 * OpenAI writes them (【step:result†filename】) appended, each with a file_citation annotation.
 */
function withCitations(text: string, steps: repo.StepRow[]): MessageContentText {
  let value = text;
  const annotations: unknown[] = [];
  const cited = new Set<string>();
  for (const step of steps) {
    if (step.step_details.type !== 'tool_calls') continue;
    for (const call of step.step_details.tool_calls) {
      if (call.type !== 'file_search') continue;
      (call.file_search.results as { file_id: string; filename: string }[]).forEach((result, i) => {
        if (cited.has(result.file_id)) return;
        cited.add(result.file_id);
        const marker = `【${step.step_index}:${i}†${result.filename}】`;
        const start = value.length;
        value += marker;
        annotations.push({ type: 'file_citation', text: marker, start_index: start, end_index: value.length, file_citation: { file_id: result.file_id } });
      });
    }
  }
  return { type: 'text', text: { value, annotations } };
}
