import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { GatewayServices } from '../composition/gateway.js';
import { backgroundCall } from '../billing/background-call.js';
import { withIndexBuildMemory, withTransaction } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { newId } from '../ids.js';
import { EMBEDDING_MODEL_HINT, embeddingModel } from '../models/catalog.js';
import { activeStore, readableStore, assertNotSuspended, searchIndexOf, seconds, type VectorStoreCaller, type VectorStoreServices } from './common.js';
import { open, sealVector, storeKeys, textAad, vectorAad, type StoreKeys } from './crypto.js';
import { embedTexts } from './ingest.js';
import { queueIvfBuild } from './ivf.js';
import * as repo from './repository.js';
import { dimensionsOf } from './vector-stores.js';

/**
 * Blue-green migration of a store to another embedding model (POST /v1/vector_stores/{id}/migrate).
 * The new space is built beside the old one: every chunk is copied without its vector, then
 * re-embedded in batches; searches keep reading the old space until the flip, which moves the
 * store to the new space, model and dimensions in one transaction. A failure leaves the old space
 * serving and removes the new one. The Temporal workflow's id is the migration id.
 */
export const MIGRATION_WORKFLOW = 'vectorStoreMigrationWorkflow';
const UNIQUE_VIOLATION = '23505';

/** Mirrors workflows/vector-store-migration.ts. */
export interface MigrationWorkflowInput {
  migrationId: string;
  /** byok stores only: the data key wrapped by the master key, since the workflow outlives the lease. */
  wrappedKey?: string;
  heartbeatTimeoutSeconds: number;
}

export async function startMigration(platform: VectorStoreServices, caller: VectorStoreCaller, storeId: string, body: { embedding_model?: string; dimensions?: number }) {
  const store = await activeStore(platform.db, caller.developerId, storeId);
  await assertNotSuspended(platform, store, caller.payerAccountId);
  if (body.embedding_model === undefined) throw serviceError('missing_embedding_model', { param: 'embedding_model' });
  const model = embeddingModel(body.embedding_model);
  if (!model) throw serviceError('invalid_embedding_model', { param: 'embedding_model', message: EMBEDDING_MODEL_HINT });
  const dimensions = dimensionsOf(model, body.dimensions);
  const dataKey = store.encryption === 'byok' ? await platform.vectorStoreKeys.dataKey(store, caller.passphrase) : null;

  let migration: repo.MigrationRow;
  try {
    migration = await withTransaction(platform.db, async (client) => {
      const locked = await activeStore(client, caller.developerId, storeId, 'update');
      return repo.insertMigration(client, {
        id: newId('vsmig_'),
        vector_store_id: storeId,
        developer_id: caller.developerId,
        payer_account_id: caller.payerAccountId,
        customer_id: caller.customerId,
        from_model: locked.embedding_model,
        from_dimensions: locked.dimensions,
        to_model: model.model,
        to_dimensions: dimensions,
        from_space: locked.active_space,
        to_space: locked.active_space + 1,
      });
    });
  } catch (error) {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError('migration_in_progress');
    throw error;
  }
  const input: MigrationWorkflowInput = { migrationId: migration.id, heartbeatTimeoutSeconds: platform.config.VECTOR_STORE_HEARTBEAT_TIMEOUT_SECONDS, ...(dataKey && { wrappedKey: platform.vectorStoreKeys.wrapForJob(store.id, dataKey) }) };
  try {
    await platform.temporal.client.workflow.start(MIGRATION_WORKFLOW, {
      taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
      workflowId: migration.id,
      args: [input],
      staticSummary: `Re-embed ${storeId}: ${migration.from_model} (${migration.from_dimensions}) -> ${migration.to_model} (${migration.to_dimensions})`,
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) {
      await withTransaction(platform.db, (client) => repo.failMigration(client, migration, 'the migration workflow could not be started'));
      throw error;
    }
  }
  return formatMigration(migration);
}

export async function getMigration(platform: VectorStoreServices, developerId: string, storeId: string, id: string) {
  const store = await readableStore(platform.db, developerId, storeId);
  const migration = await repo.findMigration(platform.db, storeId, id);
  if (!migration) throw serviceError('migration_not_found');
  return formatMigration(migration);
}

function formatMigration(migration: repo.MigrationRow) {
  return {
    id: migration.id,
    object: 'vector_store.migration' as const,
    vector_store_id: migration.vector_store_id,
    status: migration.status,
    from: { embedding_model: migration.from_model, dimensions: migration.from_dimensions },
    to: { embedding_model: migration.to_model, dimensions: migration.to_dimensions },
    chunks_done: migration.chunks_done,
    chunks_total: migration.chunks_total,
    last_error: migration.last_error,
    created_at: seconds(migration.created_at),
    completed_at: migration.completed_at && seconds(migration.completed_at),
  };
}

// ---- the workflow's activities ------------------------------------------------------------------

async function migrationOf(platform: GatewayServices, id: string): Promise<{ migration: repo.MigrationRow; store: repo.VectorStoreRow }> {
  const migration = await repo.findMigrationById(platform.db, id);
  const store = migration && (await repo.findStoreById(platform.db, migration.vector_store_id));
  if (!migration || !store) throw new Error(`migration ${id} or its store is gone`);
  return { migration, store };
}

async function keysFor(platform: GatewayServices, store: repo.VectorStoreRow, wrappedKey: string | undefined): Promise<StoreKeys | null> {
  if (store.encryption === 'byok') return storeKeys(platform.vectorStoreKeys.unwrapForJob(store.id, wrappedKey!));
  return platform.vectorStoreKeys.keys(store);
}

/** Builds the new space beside the old: its index, and every chunk without a vector. Returns whether the migration still runs. */
export async function prepareMigration(platform: GatewayServices, id: string): Promise<{ running: boolean; chunksTotal: number }> {
  const { migration, store } = await migrationOf(platform, id);
  if (migration.status !== 'in_progress' || store.state !== 'active') return { running: false, chunksTotal: 0 };
  if (searchIndexOf(store) === 'hnsw') {
    await withIndexBuildMemory(platform.db, platform.config.INDEX_BUILD_MEMORY_MB, (client) => repo.createSpaceIndex(client, store, migration.to_space, migration.to_dimensions));
  }
  return { running: true, chunksTotal: await repo.copyMissingChunks(platform.db, migration) };
}

/** Re-embeds up to `batch` chunks of the new space with the new model; returns how many are left. Run again, it picks up where it stopped. */
export async function reembedBatch(platform: GatewayServices, id: string, wrappedKey: string | undefined, onProgress: () => void): Promise<{ remaining: number; done: number }> {
  const { migration, store } = await migrationOf(platform, id);
  if (migration.status !== 'in_progress') return { remaining: 0, done: migration.chunks_done };
  const keys = await keysFor(platform, store, wrappedKey);
  const call = await backgroundCall(platform.db, { developerId: migration.developer_id, payerAccountId: migration.payer_account_id, customerId: migration.customer_id, requestId: `migration_${migration.id}` });
  const batchSize = platform.config.VECTOR_STORE_EMBED_BATCH;
  for (let round = 0; round < 8; round++) {
    const pending = await repo.unembeddedInSpace(platform.db, store.id, migration.to_space, batchSize);
    if (pending.length === 0) break;
    const texts = pending.map((chunk) => chunk.text ?? open(keys!.text, chunk.text_sealed!, textAad(store.id, chunk.file_id, chunk.chunk_index)).toString('utf8'));
    const first = pending[0]!;
    const vectors = await embedTexts(platform, call, { embedding_model: migration.to_model, dimensions: migration.to_dimensions }, texts, `vsmig:${migration.id}:${first.file_id}:${first.chunk_index}`);
    const sealed = store.vector_sealing === 'full';
    await repo.writeSpaceEmbeddings(
      platform.db,
      store.id,
      migration.to_space,
      pending.map((chunk, i) => ({
        fileId: chunk.file_id,
        chunkIndex: chunk.chunk_index,
        embedding: sealed ? null : vectors[i]!,
        sealed: sealed ? sealVector(keys!, vectors[i]!, vectorAad(store.id, migration.to_space, chunk.file_id, chunk.chunk_index)) : null,
      })),
    );
    onProgress();
  }
  const { done, total } = await repo.countEmbedded(platform.db, migration);
  return { remaining: total - done, done };
}

/**
 * The flip, in one transaction under the store's row lock: chunks of files ingested meanwhile are
 * copied first (then 'more' sends the workflow back to re-embedding); otherwise the store moves to
 * the new space, model and dimensions.
 */
export async function flipMigration(platform: GatewayServices, id: string): Promise<'flipped' | 'more' | 'stopped'> {
  const outcome = await withTransaction(platform.db, async (client) => {
    const migration = await repo.findMigrationById(client, id);
    if (!migration || migration.status !== 'in_progress') return 'stopped' as const;
    const store = await repo.lockStore(client, migration.developer_id, migration.vector_store_id, 'update');
    if (!store || store.state !== 'active') return 'stopped' as const;
    await repo.copyMissingChunks(client, migration);
    const { done, total } = await repo.countEmbedded(client, migration);
    if (done < total) return 'more' as const;
    await repo.flipSpace(client, migration);
    await recordEvent(client, migration.developer_id, 'vector_store.migration.completed', {
      vector_store_id: migration.vector_store_id,
      migration_id: migration.id,
      embedding_model: migration.to_model,
      dimensions: migration.to_dimensions,
    });
    return 'flipped' as const;
  });
  return outcome;
}

/** After the flip: the old space's chunks and index go; an ivf store's lists are built for the new space. */
export async function retireOldSpace(platform: GatewayServices, id: string, wrappedKey: string | undefined): Promise<void> {
  const { migration, store } = await migrationOf(platform, id);
  await repo.deleteSpace(platform.db, migration.vector_store_id, migration.from_space);
  await repo.dropSpaceIndex(platform.db, migration.vector_store_id, migration.from_space);
  if (store.vector_index === 'ivf') await queueIvfBuild(platform, { storeId: store.id, ...(wrappedKey && { wrappedKey }) });
}

/** A failed migration: the old space keeps serving; the new one is removed. */
export async function abandonMigration(platform: GatewayServices, id: string, reason: string): Promise<void> {
  const { migration } = await migrationOf(platform, id);
  await withTransaction(platform.db, async (client) => {
    if (!(await repo.failMigration(client, migration, reason))) return;
    await recordEvent(client, migration.developer_id, 'vector_store.migration.failed', { vector_store_id: migration.vector_store_id, migration_id: migration.id, error: reason });
  });
  await repo.deleteSpace(platform.db, migration.vector_store_id, migration.to_space);
  await repo.dropSpaceIndex(platform.db, migration.vector_store_id, migration.to_space);
}
