import type { z } from 'zod';
import type { GatewayServices } from '../composition/gateway.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { newId } from '../ids.js';
import { EMBEDDING_MODEL_HINT, embeddingModel } from '../models/catalog.js';
import { storeKeys, type StoreKeys } from '../vector-stores/crypto.js';
import { changedTypes, DEFAULT_POLICY, mergePolicy } from './policy.js';
import * as repo from './repository.js';
import type { brainListQuery, createBrainBody, updateBrainBody } from './schemas.js';

/**
 * Brains (spec 2): a developer's memory stores. A brain's text is sealed under its own data key
 * (wrapped by the platform's master key) when its encryption is standard or strict; strict also
 * seals the vectors, which PostgreSQL then never scores.
 */
export type BrainServices = Pick<GatewayServices, 'db' | 'config' | 'vectorStoreKeys' | 'temporal' | 'logger' | 'cpu' | 'providers'>;

export const DEFAULT_EMBEDDING_MODEL = 'text-embedding-3-small';
const PAGE = { defaultLimit: 100, maxLimit: 500 };

export async function createBrain(platform: BrainServices, developerId: string, body: z.output<typeof createBrainBody>) {
  const model = embeddingModelOf(body.embedding_model ?? DEFAULT_EMBEDDING_MODEL);
  const encryption = body.encryption ?? 'none';
  const policy = mergePolicy(DEFAULT_POLICY, body.memory_policy);
  const id = newId('brn_');
  const wrapped = await wrappedKeyFor(platform, id, encryption);
  const brain = await withTransaction(platform.db, (client) =>
    repo.insertBrain(
      client,
      { id, developer_id: developerId, name: body.name, embedding_model: `${model.provider}/${model.model}`, embedding_dims: model.dimensions!, encryption, wrapped_data_key: wrapped, tuning: policy.tuning, memory_policy: policy },
      encryption !== 'strict',
    ),
  );
  return formatBrain(brain);
}

export async function listBrains(platform: Pick<BrainServices, 'db'>, developerId: string, query: z.output<typeof brainListQuery>) {
  const limit = Math.min(query.limit ?? PAGE.defaultLimit, PAGE.maxLimit);
  const offset = query.offset ?? 0;
  const rows = await repo.listBrains(platform.db, developerId, limit, offset);
  return { object: 'list' as const, data: rows.slice(0, limit).map(formatBrain), has_more: rows.length > limit, limit, offset };
}

export async function getBrain(platform: Pick<BrainServices, 'db'>, developerId: string, id: string) {
  return formatBrain(await brainOf(platform.db, developerId, id));
}

/**
 * Name, encryption (only while the brain is empty) and memory_policy (merged over the current
 * one). A policy change that re-ranks stored memory emits brain.policy.changed with the entries
 * it affects and the types whose ranking changed.
 */
export async function updateBrain(platform: BrainServices, developerId: string, id: string, body: z.output<typeof updateBrainBody>) {
  return withTransaction(platform.db, async (client) => {
    const brain = await brainOf(client, developerId, id, 'update');
    let wrapped: Buffer | null | undefined;
    if (body.encryption !== undefined && body.encryption !== brain.encryption) {
      if (await repo.hasEntries(client, brain.id)) throw serviceError('brain_not_empty', { param: 'encryption' });
      wrapped = await wrappedKeyFor(platform, brain.id, body.encryption);
      // A strict brain's vectors are never indexed by PostgreSQL; the others' are.
      if (body.encryption === 'strict') await repo.dropSpace(client, brain.id, brain.active_space);
      else if (brain.encryption === 'strict') await repo.createSpaceIndex(client, brain.id, brain.active_space, brain.embedding_dims);
    }
    const policy = body.memory_policy ? mergePolicy(brain.memory_policy, body.memory_policy) : undefined;
    const updated = await repo.updateBrain(client, brain.id, {
      ...(body.name !== undefined && { name: body.name }),
      ...(wrapped !== undefined && { encryption: body.encryption, wrapped_data_key: wrapped }),
      ...(policy && { memory_policy: policy, tuning: policy.tuning }),
    });
    if (policy) {
      const types = changedTypes(brain.memory_policy, policy);
      if (types.length > 0) {
        const affected = await repo.countMemoriesOfTypes(client, brain.id, types);
        await recordEvent(client, developerId, 'brain.policy.changed', { id: brain.id, affected_entries: affected, changed_types: types });
      }
    }
    return formatBrain(updated);
  });
}

/** The brain disappears at once; its entries and chunks are removed by a workflow. */
export async function deleteBrain(platform: BrainServices, developerId: string, id: string) {
  await withTransaction(platform.db, async (client) => {
    const brain = await brainOf(client, developerId, id, 'update');
    await repo.markDeleting(client, brain.id);
  });
  await platform.temporal.client.workflow.start('brainDeletionWorkflow', {
    taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
    workflowId: `brain-deletion-${id}`,
    args: [{ brainId: id }],
    staticSummary: `Delete the content of brain ${id}`,
  }).catch((error: unknown) => {
    // The sweep finds deleting brains whose workflow never started.
    platform.logger.warn({ err: error, brainId: id }, 'brain deletion workflow not started');
  });
  return { id, object: 'brain.deleted' as const, deleted: true };
}

/** A brain of this developer, or 404 (another tenant's id looks exactly like an unknown one). */
export async function brainOf(q: Queryable, developerId: string, id: string, lock?: 'update'): Promise<repo.BrainRow> {
  return found(BRAIN_ID.test(id) ? await repo.findBrain(q, developerId, id, lock) : undefined);
}

/** brainOf for a recall: the row, and whether the brain has any entity (repo.findRecalledBrain). */
export async function recalledBrainOf(q: Queryable, developerId: string, id: string): Promise<repo.BrainRow & { has_entities: boolean }> {
  return found(BRAIN_ID.test(id) ? await repo.findRecalledBrain(q, developerId, id) : undefined);
}

const BRAIN_ID = /^brn_[0-9A-Za-z]{24}$/;

function found<Row>(brain: Row | undefined): Row {
  if (!brain) throw serviceError('not_found', { message: 'No such brain.' });
  return brain;
}

/** The brain's keys for sealing and opening, or null for a plaintext brain. */
export async function brainKeys(platform: Pick<BrainServices, 'vectorStoreKeys'>, brain: Pick<repo.BrainRow, 'id' | 'encryption' | 'wrapped_data_key'>): Promise<StoreKeys | null> {
  if (brain.encryption === 'none') return null;
  const dataKey = await platform.vectorStoreKeys.dataKey({ id: brain.id, encryption: 'managed', wrapped_data_key: brain.wrapped_data_key, kdf_salt: null });
  return storeKeys(dataKey!);
}

async function wrappedKeyFor(platform: Pick<BrainServices, 'vectorStoreKeys'>, brainId: string, encryption: repo.BrainRow['encryption']): Promise<Buffer | null> {
  if (encryption === 'none') return null;
  return (await platform.vectorStoreKeys.createStoreKey(brainId, 'managed')).wrapped_data_key;
}

/** An embedding id with or without its provider prefix (openai/text-embedding-3-small, svc:openai/..., text-embedding-3-small). */
export function embeddingModelOf(id: string) {
  const model = embeddingModel(id);
  if (!model?.dimensions) throw serviceError('invalid_embedding_model', { param: 'embedding_model', message: EMBEDDING_MODEL_HINT });
  return model;
}

const iso = (date: Date) => date.toISOString();

export function formatBrain(brain: repo.BrainRow) {
  return {
    id: brain.id,
    object: 'brain' as const,
    name: brain.name,
    embedding_model: brain.embedding_model,
    embedding_dims: brain.embedding_dims,
    encryption: brain.encryption,
    tuning: brain.tuning,
    autotune_frozen: brain.autotune_frozen,
    memory_policy: brain.memory_policy,
    created_at: iso(brain.created_at),
    updated_at: iso(brain.updated_at),
  };
}
