import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { toSql } from 'pgvector';
import type { z } from 'zod';
import { backgroundCall } from '../billing/background-call.js';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { withIndexBuildMemory, withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { newId } from '../ids.js';
import { openText, sealVector, type StoreKeys } from '../vector-stores/crypto.js';
import { brainKeys, brainOf, embeddingModelOf, type BrainServices } from './brains.js';
import { chunkAad, titleAad, vectorAad } from './aad.js';
import { embed, embedTextOf } from './entries.js';
import { hasMounts } from './mount-repository.js';
import * as repo from './repository.js';
import type { reindexBody } from './schemas.js';

/**
 * Reindex a brain to another embedding model (spec 2), blue-green: the job's workflow embeds
 * every chunk row of the active space (history too, so as_of keeps answering) into a new space
 * while the old one keeps serving, builds the new space's index, then swaps model, dimensions
 * and space in one transaction. The swap refuses if any entry was written during the job (a
 * write lands in the active space only, so swapping would lose it); the job fails with that
 * reason and the active space is untouched. For the rollback window the prior space is kept:
 * a rollback embeds back what was written since the swap, then swaps back; after the window the
 * workflow's timer drops the prior space. The workflow's id is the job id.
 */
export const REINDEX_WORKFLOW = 'brainReindexWorkflow';
export const ROLLBACK_SIGNAL = 'rollback';
const UNIQUE_VIOLATION = '23505';

/** Mirrors workflows/brain-reindex.ts. */
export interface ReindexWorkflowInput {
  jobId: string;
  rollbackWindowSeconds: number;
  heartbeatTimeoutSeconds: number;
}

/** Without confirm, what a reindex would embed and cost; with confirm, the job (201). */
export async function reindex(platform: BrainServices, developerId: string, call: MeteredCall, brainId: string, body: z.output<typeof reindexBody>) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const model = embeddingModelOf(body.embedding_model);
  const target = `${model.provider}/${model.model}`;
  if (target === brain.embedding_model) {
    throw serviceError('invalid_embedding_model', { param: 'embedding_model', message: `This brain already embeds with ${target}.` });
  }
  // A mounted pack's rows (referenced or materialized) carry the old model's vectors.
  if (await hasMounts(platform.db, brain.id)) throw serviceError('pack_mounted');
  if (!body.confirm) {
    const size = await repo.spaceSize(platform.db, brain.id, brain.active_space);
    const tokens = Math.ceil(size.chars / 4);
    return {
      status: 200,
      body: {
        object: 'brain.reindex.estimate' as const,
        brain_id: brain.id,
        from_embedding_model: brain.embedding_model,
        embedding_model: target,
        native_chunks: size.chunks,
        estimated_tokens: tokens,
        estimated_cost_usd: (tokens * model.inputMicrosPer1M) / 1e12,
      },
    };
  }

  let job: repo.ReindexJobRow;
  try {
    job = await withTransaction(platform.db, async (client) => {
      const locked = await brainOf(client, developerId, brainId, 'update');
      return repo.insertReindexJob(client, {
        id: newId('brj_'),
        brain_id: locked.id,
        developer_id: developerId,
        payer_account_id: call.payerAccountId,
        customer_id: call.customer?.id ?? null,
        from_model: locked.embedding_model,
        from_dims: locked.embedding_dims,
        from_space: locked.active_space,
        to_model: target,
        to_dims: model.dimensions!,
        started_write_seq: locked.write_seq,
      });
    });
  } catch (error) {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError('reindex_in_progress');
    throw error;
  }
  const input: ReindexWorkflowInput = {
    jobId: job.id,
    rollbackWindowSeconds: platform.config.BRAIN_REINDEX_ROLLBACK_SECONDS,
    heartbeatTimeoutSeconds: platform.config.BRAIN_REINDEX_HEARTBEAT_TIMEOUT_SECONDS,
  };
  try {
    await platform.temporal.client.workflow.start(REINDEX_WORKFLOW, {
      taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
      workflowId: job.id,
      args: [input],
      staticSummary: `Reindex brain ${brain.id}: ${job.from_model} -> ${job.to_model}`,
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) {
      await failJob(platform.db, job, 'the reindex workflow could not be started');
      throw error;
    }
  }
  return { status: 201, body: formatJob(job) };
}

export async function getReindexJob(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string, jobId: string) {
  const brain = await brainOf(platform.db, developerId, brainId);
  return formatJob(await jobOf(platform.db, brain.id, jobId));
}

/**
 * Starts a rollback of a completed job within its window, while the brain still serves that
 * job's space: the job turns rolling_back and its workflow does the work (202).
 */
export async function rollbackReindex(platform: BrainServices, developerId: string, brainId: string, jobId: string) {
  const job = await withTransaction(platform.db, async (client) => {
    const brain = await brainOf(client, developerId, brainId, 'update');
    const found = await jobOf(client, brain.id, jobId, 'update');
    const open = found.status === 'completed' && found.prior_space_dropped_at === null && found.rollback_expires_at !== null && found.rollback_expires_at.getTime() > Date.now();
    if (!open) throw serviceError('rollback_unavailable');
    if (brain.active_space !== found.to_space) {
      throw serviceError('rollback_unavailable', { message: 'A later reindex has replaced this one; roll that one back first.' });
    }
    try {
      await repo.updateReindexJob(client, found.id, { status: 'rolling_back' });
    } catch (error) {
      if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError('reindex_in_progress');
      throw error;
    }
    return { ...found, status: 'rolling_back' as const };
  });
  try {
    await platform.temporal.client.workflow.getHandle(job.id).signal(ROLLBACK_SIGNAL);
  } catch (error) {
    // The job's workflow is gone (terminated by an operator): the job stays completed.
    await repo.updateReindexJob(platform.db, job.id, { status: 'completed' });
    throw error;
  }
  return formatJob(job);
}

async function jobOf(q: Queryable, brainId: string, jobId: string, lock?: 'update'): Promise<repo.ReindexJobRow> {
  const job = /^brj_[0-9A-Za-z]{24}$/.test(jobId) ? await repo.findReindexJob(q, brainId, jobId, lock) : undefined;
  if (!job) throw serviceError('not_found', { message: 'No such reindex job for this brain.' });
  return job;
}

const iso = (date: Date | null) => date?.toISOString() ?? null;

function formatJob(job: repo.ReindexJobRow) {
  return {
    id: job.id,
    object: 'brain.reindex_job' as const,
    brain_id: job.brain_id,
    status: job.status,
    from_embedding_model: job.from_model,
    to_embedding_model: job.to_model,
    chunks_done: job.chunks_done,
    chunks_total: job.chunks_total,
    failure_reason: job.failure_reason,
    created_at: iso(job.created_at),
    completed_at: iso(job.completed_at),
    rollback_expires_at: iso(job.rollback_expires_at),
    rolled_back_at: iso(job.rolled_back_at),
  };
}

// ---- the workflow's activities ------------------------------------------------------------------

interface JobContext {
  job: repo.ReindexJobRow;
  brain: repo.BrainRow;
}

async function contextOf(q: Queryable, jobId: string, lock?: 'update'): Promise<JobContext | null> {
  const job = await repo.reindexJobById(q, jobId, lock);
  if (!job) return null;
  const brain = await repo.activeBrainById(q, job.brain_id, lock);
  return brain ? { job, brain } : null;
}

/** pending to in_progress. Returns whether the job still runs (its brain may have been deleted). */
export async function beginReindex(platform: GatewayServices, jobId: string): Promise<boolean> {
  return withTransaction(platform.db, async (client) => {
    const context = await contextOf(client, jobId, 'update');
    if (!context || !['pending', 'in_progress'].includes(context.job.status)) return false;
    const { chunks } = await repo.spaceSize(client, context.brain.id, context.job.from_space);
    await repo.updateReindexJob(client, jobId, { status: 'in_progress', chunks_total: chunks });
    return true;
  });
}

/**
 * Embeds the next chunk rows the target space lacks (forward: the job's model into its new space;
 * back, during a rollback: the prior model into the prior space). Idempotent: a batch whose
 * worker died is embedded again and its rows, already there or not, land once.
 */
export async function embedMissingChunks(platform: GatewayServices, jobId: string, direction: 'forward' | 'back', onProgress: () => void): Promise<{ remaining: number }> {
  const context = await contextOf(platform.db, jobId);
  const expected = direction === 'forward' ? 'in_progress' : 'rolling_back';
  if (!context || context.job.status !== expected) return { remaining: 0 };
  const { job, brain } = context;
  const keys = await brainKeys(platform, brain);
  const call = await jobCall(platform, job);
  const way = spacesOf(job, direction);
  for (let round = 0; round < 8; round++) {
    const missing = await repo.chunksMissingIn(platform.db, brain.id, way.from, way.to, platform.config.BRAIN_REINDEX_BATCH);
    if (missing.length === 0) break;
    await repo.insertSpaceRows(platform.db, brain.id, way.to, await embedRows(platform, call, brain, keys, job, way, missing));
    onProgress();
  }
  const counts = await repo.countSpaces(platform.db, brain.id, way.from, way.to);
  if (direction === 'forward') await repo.updateReindexJob(platform.db, jobId, { chunks_total: counts.source, chunks_done: Math.min(counts.copied, counts.source) });
  return { remaining: Math.max(0, counts.source - counts.copied) };
}

/** The new space's HNSW index, built once over all its rows (strict brains have none: their vectors are sealed). */
export async function indexReindexSpace(platform: GatewayServices, jobId: string): Promise<void> {
  const context = await contextOf(platform.db, jobId);
  if (!context || context.job.status !== 'in_progress' || context.brain.encryption === 'strict') return;
  await withIndexBuildMemory(platform.db, platform.config.INDEX_BUILD_MEMORY_MB, (client) => repo.createSpaceIndex(client, context.brain.id, context.job.to_space, context.job.to_dims));
}

/**
 * The swap, in one transaction under the brain's lock: refused (the job fails, the new space is
 * dropped) if any write landed since the job began; otherwise the brain serves the new space.
 */
export async function swapReindex(platform: GatewayServices, jobId: string): Promise<'swapped' | 'refused' | 'stopped'> {
  return withTransaction(platform.db, async (client) => {
    const context = await contextOf(client, jobId, 'update');
    if (!context || context.job.status !== 'in_progress') return 'stopped';
    const { job, brain } = context;
    const counts = await repo.countSpaces(client, brain.id, job.from_space, job.to_space);
    if (await hasMounts(client, brain.id)) {
      await failJob(client, job, 'A pack was mounted while the reindex ran; its rows carry the old model. The active space is untouched: unmount it and run the reindex again.');
      await repo.dropSpace(client, brain.id, job.to_space);
      return 'refused';
    }
    if (brain.write_seq !== job.started_write_seq || counts.copied !== counts.source) {
      await failJob(client, job, 'Entries were written while the reindex ran; the swap refused rather than lose them. The active space is untouched: run the reindex again.');
      await repo.dropSpace(client, brain.id, job.to_space);
      return 'refused';
    }
    await repo.switchSpace(client, brain.id, { model: job.to_model, dims: job.to_dims, space: job.to_space });
    const completedAt = new Date();
    await repo.updateReindexJob(client, job.id, {
      status: 'completed',
      chunks_done: counts.source,
      chunks_total: counts.source,
      completed_at: completedAt,
      rollback_expires_at: new Date(completedAt.getTime() + platform.config.BRAIN_REINDEX_ROLLBACK_SECONDS * 1_000),
      completed_write_seq: brain.write_seq,
    });
    await recordEvent(client, job.developer_id, 'brain.reindex.completed', { id: brain.id, job_id: job.id, to_embedding_model: job.to_model });
    return 'swapped';
  });
}

/**
 * The rollback's swap back, under the brain's lock: what was written since the catch-up is
 * embedded into the prior space here (a few rows at most), then the brain serves the prior
 * model and space again and the job's space is dropped.
 */
export async function swapBack(platform: GatewayServices, jobId: string): Promise<'rolled_back' | 'stopped'> {
  return withTransaction(platform.db, async (client) => {
    const context = await contextOf(client, jobId, 'update');
    if (!context || context.job.status !== 'rolling_back') return 'stopped';
    const { job, brain } = context;
    const keys = await brainKeys(platform, brain);
    const way = spacesOf(job, 'back');
    const call = await jobCall(platform, job);
    for (;;) {
      const missing = await repo.chunksMissingIn(client, brain.id, way.from, way.to, platform.config.BRAIN_REINDEX_BATCH);
      if (missing.length === 0) break;
      await repo.insertSpaceRows(client, brain.id, way.to, await embedRows(platform, call, brain, keys, job, way, missing));
    }
    await repo.switchSpace(client, brain.id, { model: job.from_model, dims: job.from_dims, space: job.from_space });
    await repo.updateReindexJob(client, job.id, { status: 'rolled_back', rolled_back_at: new Date() });
    await repo.dropSpace(client, brain.id, job.to_space);
    return 'rolled_back';
  });
}

/**
 * The end of the rollback window: the prior space is dropped, unless a rollback began (the
 * signal and the timer can race); then the workflow rolls back instead.
 */
export async function dropPriorSpace(platform: GatewayServices, jobId: string): Promise<'dropped' | 'rolling_back'> {
  return withTransaction(platform.db, async (client) => {
    const context = await contextOf(client, jobId, 'update');
    if (context?.job.status === 'rolling_back') return 'rolling_back';
    if (context && context.job.status === 'completed' && context.job.prior_space_dropped_at === null) {
      await repo.dropSpace(client, context.brain.id, context.job.from_space);
      await repo.updateReindexJob(client, jobId, { prior_space_dropped_at: new Date() });
    }
    return 'dropped';
  });
}

/** A job that failed before its swap: the active space was never touched; the new one goes. */
export async function abandonReindex(platform: GatewayServices, jobId: string, reason: string): Promise<void> {
  await withTransaction(platform.db, async (client) => {
    const context = await contextOf(client, jobId, 'update');
    if (!context || !['pending', 'in_progress'].includes(context.job.status)) return;
    await failJob(client, context.job, reason);
    await repo.dropSpace(client, context.brain.id, context.job.to_space);
  });
}

async function failJob(q: Queryable, job: repo.ReindexJobRow, reason: string): Promise<void> {
  await repo.updateReindexJob(q, job.id, { status: 'failed', failure_reason: reason });
  await recordEvent(q, job.developer_id, 'brain.reindex.failed', { id: job.brain_id, job_id: job.id, reason });
}

function jobCall(platform: GatewayServices, job: repo.ReindexJobRow): Promise<MeteredCall> {
  return backgroundCall(platform.db, { developerId: job.developer_id, payerAccountId: job.payer_account_id, customerId: job.customer_id, requestId: `reindex_${job.id}` });
}

interface Way {
  from: number;
  to: number;
  model: { embedding_model: string; embedding_dims: number };
}

function spacesOf(job: repo.ReindexJobRow, direction: 'forward' | 'back'): Way {
  return direction === 'forward'
    ? { from: job.from_space, to: job.to_space, model: { embedding_model: job.to_model, embedding_dims: job.to_dims } }
    : { from: job.to_space, to: job.from_space, model: { embedding_model: job.from_model, embedding_dims: job.from_dims } };
}

/** Opens each missing row's text, embeds it with the target model and seals the vector for the target space (strict). */
async function embedRows(platform: GatewayServices, call: MeteredCall, brain: repo.BrainRow, keys: StoreKeys | null, job: repo.ReindexJobRow, way: Way, missing: repo.MissingChunk[]) {
  const texts = missing.map((row) => {
    const content = row.content ?? openText(keys!, row.content_sealed!, chunkAad(brain.id, row.entry_id, row.chunk_index));
    const title = row.title_sealed ? openText(keys!, row.title_sealed, titleAad(brain.id, row.entry_id)) : row.title;
    return embedTextOf(title, content);
  });
  const first = missing[0]!;
  // The billing key names the batch by its first row, so a batch embedded again is charged once.
  const vectors = await embed(platform, call, way.model, texts, `brain-reindex:${job.id}:${way.to}:${first.version_id}:${first.chunk_index}`);
  const strict = brain.encryption === 'strict';
  return missing.map((row, i) => ({
    ...row,
    embedding: strict ? null : toSql(vectors[i]!),
    embedding_sealed: strict ? sealVector(keys!, vectors[i]!, vectorAad(brain.id, way.to, row.entry_id, row.chunk_index)) : null,
  }));
}
