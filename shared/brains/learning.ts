import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { backgroundCall } from '../billing/background-call.js';
import { payerRefusal, type MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { serviceError, ServiceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { newId } from '../ids.js';
import { parseChatInput, planChat } from '../inference/chat.js';
import { completeChat } from '../inference/complete-chat.js';
import { resolutionContextFor } from '../models/definitions.js';
import { microsToUsd } from '../money.js';
import { workflowResultBy } from '../platform/temporal.js';
import { openText, sealText, type StoreKeys } from '../vector-stores/crypto.js';
import { learningAad } from './aad.js';
import { retune } from './autotune.js';
import { brainKeys, brainOf } from './brains.js';
import { linkEntities, normalizeEntityName } from './entities.js';
import { chunksOf, embed, embedTextOf, openEntry, SpaceSwapped, storeVersion } from './entries.js';
import * as learned from './learning-repository.js';
import { extractionAnswer, extractionRequest, judgementAnswer, judgementRequest, normalizeTitle, parseAnswer, parseTranscript, type CandidateMemory, type TranscriptLine } from './learning-prompts.js';
import { rankingOf, type MemoryPolicy, type Tier } from './policy.js';
import { recall } from './recall.js';
import * as repo from './repository.js';
import type { observeBody } from './schemas.js';

/**
 * Learning (spec 2): a learn pass takes a turn (an observe call's transcript, or an ambient chat
 * turn), asks the model what in it is worth remembering, and files each candidate memory as an
 * addition, a refinement of a memory of the same scope and title (or entity), a conflict (the
 * turn contradicts a memory, which stays as it was) or a proposal (review holds it back, or
 * low-trust input would overwrite high-trust memory). It also counts a use of each recalled
 * memory the answer used: the only place use_count and last_used move.
 *
 * Each pass is a Temporal workflow (brainLearnWorkflow) whose id is the pass id, derived from the
 * brain, the scope and an idempotency key, so a retried observe finds the pass it started and a
 * turn is never learnt twice. Memory text never enters the workflow's history: the transcript and
 * the extraction live in the pass's row, sealed when the brain is.
 */
export type LearnServices = GatewayServices;

/** How long observe with wait holds the request for its pass before answering 202 anyway. */
export const OBSERVE_WAIT_MS = 60_000;
/** Memories recalled into an observed turn, to learn which of them the answer used. */
const RECALLED_INTO_TURN = 8;

export interface LearnResult {
  object: 'brain.observe';
  id: string;
  brain_id: string;
  status: 'learning' | 'completed' | 'skipped' | 'failed';
  ignored?: boolean;
  reason?: string;
  changed: { entry_id: string; action: 'added' | 'refined' }[];
  proposed: string[];
  conflicts: string[];
  used: string[];
  costUsd: number;
}

const pending = (passId: string, brainId: string): LearnResult => ({ object: 'brain.observe', id: passId, brain_id: brainId, status: 'learning', changed: [], proposed: [], conflicts: [], used: [], costUsd: 0 });

/** POST /v1/brains/{id}/observe: 202 while learning, or the pass's outcome when `wait` was asked and it ended in time. */
export async function observe(platform: LearnServices, developerId: string, call: MeteredCall, brainId: string, body: z.output<typeof observeBody>, options: { idempotencyKey: string | undefined; wait: boolean }): Promise<{ status: 200 | 202; body: LearnResult }> {
  const brain = await brainOf(platform.db, developerId, brainId);
  const parsed = parseTranscript(body.transcript);
  if ('error' in parsed) throw serviceError('invalid_transcript', { param: 'transcript', message: `Invalid transcript: ${parsed.error}.` });
  const scope = body.scope ?? '/';
  const trust = body.trust ?? 'high';
  // Without an Idempotency-Key, the same transcript observed again at the same scope is the same pass.
  const key = options.idempotencyKey ?? createHash('sha256').update(JSON.stringify([body.transcript, trust, body.source ?? null])).digest('base64url');
  const passId = passIdOf(brain.id, scope, `observe:${key}`);
  const begun = await beginPass(platform, brain, call, { passId, origin: 'observe', scope, trust, source: body.source ?? 'observe', transcript: parsed.lines, recalled: [] });
  if (begun.status !== 'learning' || !options.wait) return { status: begun.status === 'learning' ? 202 : 200, body: begun };
  const ended = await awaitPass(platform, passId, OBSERVE_WAIT_MS);
  return ended ? { status: 200, body: ended } : { status: 202, body: begun };
}

/** What an ambient turn hands to learning: the turn, and the memories recall put into its prompt. */
export interface AmbientTurn {
  requestId: string;
  scope: string;
  trust: 'high' | 'low';
  question: string;
  answer: string;
  /** Native memories, best first. */
  recalled: { entryId: string; type: string | null; score: number }[];
}

/**
 * Starts the learn pass of an ambient chat turn, after the answer went out. The ambient path is
 * never refused: unfunded under reject (or recall_only) skips learning with an event.
 */
export async function learnFromTurn(platform: LearnServices, call: MeteredCall, brainId: string, turn: AmbientTurn): Promise<void> {
  const brain = await brainOf(platform.db, call.developerId, brainId);
  await beginPass(platform, brain, call, {
    passId: passIdOf(brain.id, turn.scope, `ambient:${turn.requestId}`),
    origin: 'ambient',
    scope: turn.scope,
    trust: turn.trust,
    source: 'chat',
    transcript: [{ role: 'user', text: turn.question }, { role: 'assistant', text: turn.answer }],
    recalled: turn.recalled.map((memory) => ({ entryId: memory.entryId, tier: rankingOf(brain.memory_policy, 'memory', memory.type).tier, score: memory.score })),
  });
}

interface PassToBegin {
  passId: string;
  origin: 'observe' | 'ambient';
  scope: string;
  trust: 'high' | 'low';
  source: string;
  transcript: TranscriptLine[];
  recalled: { entryId: string; tier: Tier; score: number }[];
}

async function beginPass(platform: LearnServices, brain: repo.BrainRow, call: MeteredCall, pass: PassToBegin): Promise<LearnResult> {
  const funding = await fundingOf(platform, brain, call, pass.origin);
  const keys = await brainKeys(platform, brain);
  const row: learned.NewLearnPass = {
    id: pass.passId, brain_id: brain.id, developer_id: brain.developer_id,
    payer_account_id: funding.call.payerAccountId, customer_id: funding.call.customer?.id ?? null,
    origin: pass.origin, scope: pass.scope, trust: pass.trust, source: pass.source,
    transcript: sealJson(keys, brain.id, 'transcript', pass.passId, pass.transcript),
    recalled: pass.recalled.map((memory) => memory.entryId), recalled_tiers: pass.recalled.map((memory) => memory.tier), recalled_scores: pass.recalled.map((memory) => memory.score),
  };
  if (funding.skip) {
    const result: LearnResult = { ...pending(pass.passId, brain.id), status: 'skipped', reason: funding.skip };
    await withTransaction(platform.db, async (client) => {
      if (!(await learned.insertLearnPass(client, row))) return;
      await learned.finishLearnPass(client, pass.passId, 'skipped', { ...result });
      await recordEvent(client, brain.developer_id, 'brain.learning.skipped', { id: brain.id, pass_id: pass.passId, scope: pass.scope, reason: funding.skip });
    });
    return result;
  }
  if (!(await learned.insertLearnPass(platform.db, row))) {
    const existing = await learned.findLearnPass(platform.db, pass.passId);
    if (existing && existing.status !== 'learning') return existing.result as unknown as LearnResult;
  }
  await startLearnWorkflow(platform, pass.passId);
  return pending(pass.passId, brain.id);
}

/**
 * Who pays for a pass (spec 2, on_unfunded): the caller's payer when it can pay. When it cannot,
 * fallback learns on the developer's own pool, recall_only skips (with brain.learning.skipped),
 * and reject refuses an explicit observe with the payer's 402 (the ambient path skips instead).
 */
async function fundingOf(platform: LearnServices, brain: repo.BrainRow, call: MeteredCall, origin: PassToBegin['origin']): Promise<{ call: MeteredCall; skip?: string }> {
  const refusal = await payerRefusal(platform, call);
  if (!refusal) return { call };
  const mode = brain.memory_policy.on_unfunded;
  if (mode === 'fallback' && call.customer) {
    const developerPool: MeteredCall = { ...call, customer: null, credentials: undefined };
    if (!(await payerRefusal(platform, developerPool))) return { call: developerPool };
  }
  if (mode === 'reject' && origin === 'observe') throw refusal;
  return { call, skip: 'unfunded' };
}

export function passIdOf(brainId: string, scope: string, key: string): string {
  return `blp_${createHash('sha256').update(JSON.stringify([brainId, scope, key])).digest('base64url')}`;
}

async function startLearnWorkflow(platform: LearnServices, passId: string): Promise<void> {
  try {
    await platform.temporal.client.workflow.start('brainLearnWorkflow', {
      taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
      workflowId: passId,
      args: [{ passId }],
      // A failed pass may run again; a completed one never does, and a running one is joined.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      workflowIdConflictPolicy: 'USE_EXISTING',
      staticSummary: `Learn pass ${passId}`,
    });
  } catch (error) {
    if ((error as Error).name !== 'WorkflowExecutionAlreadyStartedError') throw error;
  }
}

/** The pass's outcome once it has one, waiting up to `timeoutMs`; null if it is still learning then. */
export async function awaitPass(platform: LearnServices, passId: string, timeoutMs: number): Promise<LearnResult | null> {
  // However the workflow ended (a failed pass, Temporal away), the pass's row tells.
  await workflowResultBy(platform.temporal.client.workflow.getHandle(passId), Date.now() + timeoutMs).catch(() => undefined);
  const pass = await learned.findLearnPass(platform.db, passId);
  return pass && pass.status !== 'learning' ? (pass.result as unknown as LearnResult) : null;
}

/** The stored form of an extraction: what the model found worth remembering. */
interface Extraction {
  ignored: boolean;
  reason?: string;
  memories: CandidateMemory[];
}

export type ExtractStep = { next: 'commit' } | { next: 'done'; result: LearnResult };

/**
 * The pass's first activity: the ignore pre-gate, then the extraction call through the gateway's
 * own chat path (billed to the pass's payer). Its outcome is stored in the pass row, so a retry
 * after a crash does not ask the model again.
 */
export async function extractMemories(platform: LearnServices, passId: string): Promise<ExtractStep> {
  const pass = await learned.findLearnPass(platform.db, passId);
  if (!pass) return { next: 'done', result: { ...pending(passId, ''), status: 'failed', reason: 'pass_not_found' } };
  if (pass.status !== 'learning') return { next: 'done', result: pass.result as unknown as LearnResult };
  if (pass.extracted) return { next: 'commit' };
  const brain = await repo.activeBrainById(platform.db, pass.brain_id);
  if (!brain) return { next: 'done', result: await endPass(platform, pass, 'skipped', { reason: 'brain_deleted' }) };
  const keys = await brainKeys(platform, brain);
  const transcript = openJson<TranscriptLine[]>(keys, brain.id, 'transcript', pass.id, pass.transcript);
  const spent = { micros: 0 };

  const ignoredBy = ignoreGate(brain.memory_policy, transcript);
  if (ignoredBy) {
    await learned.recordExtraction(platform.db, pass.id, { extracted: sealJson(keys, brain.id, 'extracted', pass.id, { ignored: true, reason: ignoredBy, memories: [] } satisfies Extraction), recalled: pass.recalled, recalled_tiers: pass.recalled_tiers, recalled_scores: pass.recalled_scores, used: [], costMicros: 0 });
    return { next: 'commit' };
  }
  try {
    const call = await passCall(platform, pass);
    const recalled = pass.origin === 'ambient' ? await ambientRecalled(platform, brain, keys, pass) : await recallIntoTurn(platform, brain, call, pass, transcript, spent);
    const content = await learningChat(platform, call, extractionRequest(platform.config.BRAIN_LEARN_MODEL, brain.memory_policy, transcript, recalled.memories), `learn:${pass.id}:extract`, spent);
    const answer = parseAnswer(extractionAnswer, content);
    if (!answer) return { next: 'done', result: await endPass(platform, pass, 'failed', { reason: 'extraction_unparseable', costMicros: spent.micros }) };
    const recalledIds = new Set(recalled.memories.map((memory) => memory.entryId));
    const extraction: Extraction = { ignored: answer.ignored || answer.memories.length === 0, memories: answer.memories };
    await learned.recordExtraction(platform.db, pass.id, {
      extracted: sealJson(keys, brain.id, 'extracted', pass.id, extraction),
      recalled: recalled.memories.map((memory) => memory.entryId), recalled_tiers: recalled.tiers, recalled_scores: recalled.scores,
      used: [...new Set(answer.used_entry_ids)].filter((id) => recalledIds.has(id)),
      costMicros: spent.micros,
    });
    return { next: 'commit' };
  } catch (error) {
    const ended = await endedByRefusal(platform, pass, error, spent);
    if (ended) return { next: 'done', result: ended };
    throw error;
  }
}

/** A model or billing refusal (4xx) ends the pass: unfunded as skipped (with its event), anything else as failed. Infrastructure errors retry. */
async function endedByRefusal(platform: LearnServices, pass: learned.LearnPassRow, error: unknown, spent: { micros: number }): Promise<LearnResult | null> {
  if (!(error instanceof ServiceError) || error.status >= 500 || error.status === 429) return null;
  if (error.status === 402) return endPass(platform, pass, 'skipped', { reason: 'unfunded', costMicros: spent.micros });
  return endPass(platform, pass, 'failed', { reason: error.code, costMicros: spent.micros });
}

async function endPass(platform: LearnServices, pass: learned.LearnPassRow, status: 'skipped' | 'failed', detail: { reason: string; costMicros?: number }): Promise<LearnResult> {
  const result: LearnResult = { ...pending(pass.id, pass.brain_id), status, reason: detail.reason, costUsd: microsToUsd(Number(pass.cost_micros) + (detail.costMicros ?? 0)) };
  await withTransaction(platform.db, async (client) => {
    const current = await learned.findLearnPass(client, pass.id, 'update');
    if (current?.status !== 'learning') return;
    await learned.finishLearnPass(client, pass.id, status, { ...result }, detail.costMicros ?? 0);
    if (status === 'skipped') await recordEvent(client, pass.developer_id, 'brain.learning.skipped', { id: pass.brain_id, pass_id: pass.id, scope: pass.scope, reason: detail.reason });
  });
  return result;
}

/**
 * The ignore pre-gate (memory_policy.ignore): a transcript matching one of the patterns (case-
 * insensitive; `*` matches any run of characters) is not learnt from, nor is one without a task
 * in it when require_task_relevance is set (only greetings, thanks and acknowledgements).
 * The rubric goes to the extraction prompt.
 */
export function ignoreGate(policy: MemoryPolicy, transcript: TranscriptLine[]): string | null {
  const text = transcript.map((line) => line.text).join('\n').toLowerCase();
  if ((policy.ignore.patterns ?? []).some((pattern) => globMatches(pattern.toLowerCase(), text))) return 'ignore_pattern';
  if (policy.ignore.require_task_relevance && !transcript.some((line) => line.role === 'user' && isTaskRelevant(line.text))) return 'not_task_relevant';
  return null;
}

/** A glob whose literal parts appear in order (linear: no backtracking on hostile patterns). */
function globMatches(pattern: string, text: string): boolean {
  let at = 0;
  for (const part of pattern.split('*')) {
    if (part === '') continue;
    const found = text.indexOf(part, at);
    if (found === -1) return false;
    at = found + part.length;
  }
  return true;
}

const SMALL_TALK = new Set(['hi', 'hello', 'hey', 'thanks', 'thank', 'you', 'ok', 'okay', 'bye', 'goodbye', 'cool', 'great', 'nice', 'yes', 'no', 'sure', 'please', 'good', 'morning', 'evening', 'night', 'cheers', 'lol', 'how', 'are', 'doing', 'fine', 'well', 'i', 'am', 'the', 'a', 'to', 'and', 'so', 'much', 'very', 'again', 'see', 'later']);
const isTaskRelevant = (text: string) => text.toLowerCase().split(/[^a-z0-9']+/).filter((word) => word.length > 0 && !SMALL_TALK.has(word)).length >= 2;

/** The metered call of a pass: its payer, as its request named it (or the developer pool on fallback). */
function passCall(platform: LearnServices, pass: Pick<learned.LearnPassRow, 'id' | 'developer_id' | 'payer_account_id' | 'customer_id'>): Promise<MeteredCall> {
  return backgroundCall(platform.db, { developerId: pass.developer_id, payerAccountId: pass.payer_account_id, customerId: pass.customer_id, requestId: `learn_${pass.id.slice(4, 28)}` });
}

interface RecalledIntoTurn {
  memories: { entryId: string; content: string }[];
  tiers: string[];
  scores: number[];
}

/** An observed turn had no recall of its own: the memories recall gives its user lines at its scope stand for it. */
async function recallIntoTurn(platform: LearnServices, brain: repo.BrainRow, call: MeteredCall, pass: learned.LearnPassRow, transcript: TranscriptLine[], spent: { micros: number }): Promise<RecalledIntoTurn> {
  const question = transcript.filter((line) => line.role === 'user').map((line) => line.text).join('\n').slice(0, 100_000);
  const hits = (await recall(platform, brain.developer_id, call, brain.id, { query: question, scope: pass.scope, classes: ['memory'], top_k: RECALLED_INTO_TURN }, { billingKey: `brain-recall:${call.requestId}`, spent })).data;
  const native = hits.filter((hit) => hit.source.store === 'native');
  return {
    memories: native.map((hit) => ({ entryId: hit.entry_id, content: hit.content })),
    tiers: native.map((hit) => rankingOf(brain.memory_policy, hit.class, hit.type).tier),
    scores: native.map((hit) => hit.score),
  };
}

/** An ambient turn's recalled memories, as its recall ranked them (their text read again to show the model). */
async function ambientRecalled(platform: LearnServices, brain: repo.BrainRow, keys: StoreKeys | null, pass: learned.LearnPassRow): Promise<RecalledIntoTurn> {
  const entries = await Promise.all(pass.recalled.map((entryId) => repo.currentEntry(platform.db, brain.id, entryId)));
  const memories = entries.flatMap((entry) => (entry ? [{ entryId: entry.entry_id, content: openEntry(keys, entry).body }] : []));
  return { memories, tiers: pass.recalled_tiers, scores: pass.recalled_scores };
}

/** One chat call of learning through the gateway's own chat path; the answer's text. */
export async function learningChat(platform: LearnServices, call: MeteredCall, body: Record<string, unknown>, billingKey: string, spent: { micros: number }): Promise<string | null> {
  const input = parseChatInput(body, { idempotencyKey: undefined });
  const targets = await planChat(input, resolutionContextFor(platform, call.developerId), platform.providers);
  const completed = await completeChat(platform, call, input, targets, { signal: new AbortController().signal, billingKey });
  spent.micros += completed.deductedMicros;
  const content = completed.body.choices[0]?.message.content;
  return typeof content === 'string' ? content : null;
}

/** What the pass does with one candidate. */
type Decision =
  | { kind: 'add'; memory: CandidateMemory; type: string }
  | { kind: 'refine'; memory: CandidateMemory; type: string; target: OpenedMemory }
  | { kind: 'propose'; memory: CandidateMemory; type: string; action: 'add' | 'refine'; target: OpenedMemory | null; reason: 'review' | 'low_trust' }
  | { kind: 'conflict'; memory: CandidateMemory; type: string; target: OpenedMemory; reason: string }
  | { kind: 'same' };

interface OpenedMemory {
  entry: repo.EntryRow;
  title: string | null;
  body: string;
  entityNames: string[];
}

export interface CommitOutcome {
  result: LearnResult;
  brainId: string;
  scope: string;
  /** The scope holds more memories than consolidate_at: a consolidation should run. */
  consolidate: boolean;
}

/**
 * The pass's second activity: decides each candidate (judging refinements against the model),
 * embeds what it writes, then files everything in one transaction with the pass's completion,
 * its events and its use counts. A retried commit after that transaction finds the pass
 * completed and returns what it recorded: learnt exactly once.
 */
export async function commitLearnPass(platform: LearnServices, passId: string): Promise<CommitOutcome> {
  const pass = await learned.findLearnPass(platform.db, passId);
  if (!pass) throw new Error(`learn pass ${passId} not found`);
  if (pass.status !== 'learning') return { result: pass.result as unknown as LearnResult, brainId: pass.brain_id, scope: pass.scope, consolidate: false };
  const brain = await repo.activeBrainById(platform.db, pass.brain_id);
  if (!brain) return { result: await endPass(platform, pass, 'skipped', { reason: 'brain_deleted' }), brainId: pass.brain_id, scope: pass.scope, consolidate: false };
  const keys = await brainKeys(platform, brain);
  const extraction = openJson<Extraction>(keys, brain.id, 'extracted', pass.id, pass.extracted!);
  const spent = { micros: 0 };
  try {
    const call = await passCall(platform, pass);
    const decisions = await decide(platform, call, brain, keys, pass, extraction.memories, spent);
    const writes = decisions.filter((decision): decision is Extract<Decision, { kind: 'add' | 'refine' }> => decision.kind === 'add' || decision.kind === 'refine');
    const vectors = await embed(platform, call, brain, writes.map((write) => embedTextOf(write.memory.title, write.memory.body)), `learn:${pass.id}:embed`, spent);
    const result = await withTransaction(platform.db, async (client) => {
      const locked = await repo.activeBrainById(client, brain.id, 'update');
      if (!locked) throw new Error(`brain ${brain.id} went away during learn pass ${pass.id}`);
      if (locked.active_space !== brain.active_space) throw new SpaceSwapped();
      const current = await learned.findLearnPass(client, pass.id, 'update');
      if (current?.status !== 'learning') return current!.result as unknown as LearnResult;
      const outcome: LearnResult = { ...pending(pass.id, brain.id), status: 'completed', used: current.used };
      for (const [index, write] of writes.entries()) {
        const entryId = write.kind === 'refine' ? write.target.entry.entry_id : newId('ent_');
        await writeMemory(client, locked, keys, pass, entryId, write.memory, write.type, vectors[index]!, write.kind === 'refine' ? write.target.entry.trust : null);
        outcome.changed.push({ entry_id: entryId, action: write.kind === 'refine' ? 'refined' : 'added' });
      }
      for (const decision of decisions) {
        if (decision.kind === 'propose') outcome.proposed.push(await fileProposal(client, brain, keys, pass, decision));
        if (decision.kind === 'conflict') outcome.conflicts.push(await fileConflict(client, brain, keys, pass, decision));
      }
      await learned.countUses(client, brain.id, current.used);
      if (writes.length > 0) await repo.bumpWriteSeq(client, brain.id);
      if (extraction.ignored && writes.length === 0 && outcome.proposed.length === 0 && outcome.conflicts.length === 0) {
        outcome.ignored = true;
        if (extraction.reason) outcome.reason = extraction.reason;
      }
      outcome.costUsd = microsToUsd(Number(current.cost_micros) + spent.micros);
      await learned.finishLearnPass(client, pass.id, 'completed', { ...outcome }, spent.micros);
      if (locked.tuning === 'auto' && !locked.autotune_frozen && current.recalled.length > 0) await retune(client, locked);
      return outcome;
    });
    const memories = await learned.countMemoriesOfScope(platform.db, brain.id, pass.scope);
    return { result, brainId: brain.id, scope: pass.scope, consolidate: memories > brain.memory_policy.consolidate_at };
  } catch (error) {
    const ended = await endedByRefusal(platform, pass, error, spent);
    if (ended) return { result: ended, brainId: brain.id, scope: pass.scope, consolidate: false };
    throw error;
  }
}

/**
 * Each candidate against the scope's memories: one of the same normalised title (or, failing
 * that, of the same type sharing an entity) is judged by the model: the same statement changes
 * nothing, a refinement supersedes it, a contradiction opens a conflict; unrelated, it is added.
 * Review (learn_mode, per_tier_review) and low trust over high trust turn a write into a proposal.
 */
async function decide(platform: LearnServices, call: MeteredCall, brain: repo.BrainRow, keys: StoreKeys | null, pass: learned.LearnPassRow, candidates: CandidateMemory[], spent: { micros: number }): Promise<Decision[]> {
  const stored = await learned.memoriesOfScope(platform.db, brain.id, pass.scope);
  const names = await learned.entityNamesOfEntries(platform.db, brain.id, stored.map((entry) => entry.entry_id));
  const memories: OpenedMemory[] = stored.map((entry) => ({ entry, ...openEntry(keys, entry), entityNames: names.get(entry.entry_id) ?? [] }));
  const decisions: Decision[] = [];
  for (const [index, memory] of latestPerTitle(candidates).entries()) {
    const type = typeOf(brain.memory_policy, memory);
    if (!type) continue;
    const tier = rankingOf(brain.memory_policy, 'memory', type).tier;
    const matches = matchesOf(memories, memory, type);
    let decision: Decision = { kind: 'add', memory, type };
    for (const [position, target] of matches.entries()) {
      const relation = target.body.trim() === memory.body.trim() ? 'same' : await judge(platform, call, pass, target.body, memory.body, `${index}:${position}`, spent);
      if (relation === 'unrelated') continue;
      decision = relation === 'same' ? { kind: 'same' } : relation === 'contradicts' ? { kind: 'conflict', memory, type, target, reason: 'contradicts' } : { kind: 'refine', memory, type, target };
      break;
    }
    if (decision.kind === 'add' || decision.kind === 'refine') {
      const target = decision.kind === 'refine' ? decision.target : null;
      const review = reviews(brain.memory_policy, tier);
      const lowOverHigh = pass.trust === 'low' && target?.entry.trust === 'high';
      if (review || lowOverHigh) decision = { kind: 'propose', memory, type, action: decision.kind, target, reason: lowOverHigh ? 'low_trust' : 'review' };
    }
    decisions.push(decision);
  }
  return decisions;
}

/**
 * One candidate per normalised title: a transcript stating the same thing twice, or changing it
 * as it goes ("Kubernetes... no, Nomad"), gives one memory, as its last statement has it.
 */
function latestPerTitle(candidates: CandidateMemory[]): CandidateMemory[] {
  const last = new Map<string, number>();
  candidates.forEach((memory, index) => last.set(normalizeTitle(memory.title) || `#${index}`, index));
  return candidates.filter((memory, index) => last.get(normalizeTitle(memory.title) || `#${index}`) === index);
}

/** The taxonomy's type for a candidate: its own, or the first type of the tier it gave; none, and it is dropped. */
function typeOf(policy: MemoryPolicy, memory: CandidateMemory): string | null {
  const types = policy.type_taxonomy;
  return types.find((entry) => entry.type === memory.type)?.type ?? types.find((entry) => entry.tier === memory.tier)?.type ?? null;
}

/** Memories a candidate may refine: the same normalised title first, then those of its type sharing an entity. */
function matchesOf(memories: OpenedMemory[], memory: CandidateMemory, type: string): OpenedMemory[] {
  const title = normalizeTitle(memory.title);
  const byTitle = memories.filter((stored) => normalizeTitle(stored.title) === title);
  const names = new Set(memory.entities.flatMap((entity) => [entity.name, ...entity.aliases].map(normalizeEntityName)));
  const byEntity = memories.filter((stored) => !byTitle.includes(stored) && stored.entry.type === type && stored.entityNames.some((name) => names.has(name)));
  return [...byTitle, ...byEntity.slice(0, 3)];
}

function reviews(policy: MemoryPolicy, tier: Tier): boolean {
  const perTier = policy.per_tier_review[tier];
  return perTier ? perTier === 'review' : policy.learn_mode === 'review';
}

async function judge(platform: LearnServices, call: MeteredCall, pass: learned.LearnPassRow, stored: string, incoming: string, label: string, spent: { micros: number }) {
  const content = await learningChat(platform, call, judgementRequest(platform.config.BRAIN_LEARN_MODEL, stored, incoming), `learn:${pass.id}:judge:${label}`, spent);
  // A judgement that cannot be read changes nothing stored: the candidate is taken as unrelated (added).
  return parseAnswer(judgementAnswer, content)?.relation ?? 'unrelated';
}

/** Writes a learnt memory (a new entry, or the next version of the one it refines) and links its entities. */
export async function writeMemory(client: Queryable, brain: repo.BrainRow, keys: StoreKeys | null, pass: Pick<learned.LearnPassRow, 'scope' | 'trust' | 'source'>, entryId: string, memory: CandidateMemory, type: string, vector: number[], refinedTrust: 'high' | 'low' | null): Promise<void> {
  // Refining keeps the higher of the two trusts (low input over high memory never gets here: it is a proposal).
  const trust = refinedTrust === 'high' || pass.trust === 'high' ? 'high' : 'low';
  const chunks = chunksOf(brain, 'memory', memory.title, memory.body);
  await storeVersion(client, brain, keys, { entryId, scope: pass.scope, class: 'memory', type, title: memory.title, body: memory.body, trust, source: pass.source, chunks, vectors: [vector] });
  await linkEntities(client, brain.id, pass.scope, entryId, memory.entities, memory.relations);
}

/** A proposal's or conflict's candidate, as stored (sealed when the brain is). */
export interface HeldCandidate {
  memory: CandidateMemory;
  type: string;
  trust: 'high' | 'low';
  source: string;
}

async function fileProposal(client: Queryable, brain: repo.BrainRow, keys: StoreKeys | null, pass: learned.LearnPassRow, decision: Extract<Decision, { kind: 'propose' }>): Promise<string> {
  const id = newId('bprp_');
  const held: HeldCandidate = { memory: decision.memory, type: decision.type, trust: pass.trust, source: pass.source };
  await learned.insertProposal(client, { id, brain_id: brain.id, pass_id: pass.id, scope: pass.scope, action: decision.action, target_entry_id: decision.target?.entry.entry_id ?? null, reason: decision.reason, candidate: sealJson(keys, brain.id, 'proposal', id, held) });
  await recordEvent(client, brain.developer_id, 'brain.learning.proposed', { id: brain.id, proposal_id: id, scope: pass.scope, action: decision.action, reason: decision.reason });
  return id;
}

async function fileConflict(client: Queryable, brain: repo.BrainRow, keys: StoreKeys | null, pass: learned.LearnPassRow, decision: Extract<Decision, { kind: 'conflict' }>): Promise<string> {
  const id = newId('bcfl_');
  const held: HeldCandidate = { memory: decision.memory, type: decision.type, trust: pass.trust, source: pass.source };
  await learned.insertConflict(client, { id, brain_id: brain.id, pass_id: pass.id, scope: pass.scope, entry_id: decision.target.entry.entry_id, candidate: sealJson(keys, brain.id, 'conflict', id, held), reason: decision.reason });
  await recordEvent(client, brain.developer_id, 'brain.conflict', { id: brain.id, conflict_id: id, entry_id: decision.target.entry.entry_id, scope: pass.scope });
  return id;
}

/** Learning's JSON at rest: plain for a plaintext brain, sealed under the brain's key otherwise. */
export function sealJson(keys: StoreKeys | null, brainId: string, kind: Parameters<typeof learningAad>[1], id: string, value: unknown): Buffer {
  const text = JSON.stringify(value);
  return keys ? sealText(keys, text, learningAad(brainId, kind, id)) : Buffer.from(text, 'utf8');
}

export function openJson<T>(keys: StoreKeys | null, brainId: string, kind: Parameters<typeof learningAad>[1], id: string, stored: Buffer): T {
  return JSON.parse(keys ? openText(keys, stored, learningAad(brainId, kind, id)) : stored.toString('utf8')) as T;
}

/** Starts (or joins) the consolidation of a scope. */
export async function requestConsolidation(platform: LearnServices, brainId: string, scope: string): Promise<void> {
  await platform.temporal.client.workflow.start('brainConsolidationWorkflow', {
    taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
    workflowId: `brain-consolidate-${brainId}-${createHash('sha256').update(scope).digest('hex').slice(0, 16)}`,
    args: [{ brainId, scope }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    staticSummary: `Consolidate the memories of ${brainId} at ${scope}`,
  });
}
