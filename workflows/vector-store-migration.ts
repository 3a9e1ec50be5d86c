import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { VectorStoreActivities } from '../workers/vector-store-activities.js';
import { heartbeatingChunk, RESOURCE_STEP } from './activity-profiles.js';

/** Mirrors shared/vector-stores/migrations.ts (workflow code imports no runtime code from shared/). */
export interface MigrationWorkflowInput {
  migrationId: string;
  wrappedKey?: string;
  heartbeatTimeoutSeconds: number;
}

const steps = proxyActivities<VectorStoreActivities>(RESOURCE_STEP);

/**
 * A store's blue-green re-embedding (workflow id = migration id). Its history reads:
 * prepareMigration (the new space beside the old), reembedMigrationBatch again and again until
 * no chunk is left (each heartbeating, each resuming where a killed one stopped), then
 * flipMigration (atomic; back to re-embedding if files arrived meanwhile) and retireOldSpace.
 * Any failure ends in abandonMigration: the old space keeps serving.
 */
export async function vectorStoreMigrationWorkflow(input: MigrationWorkflowInput): Promise<string> {
  const { migrationId, wrappedKey } = input;
  const chunk = heartbeatingChunk(input.heartbeatTimeoutSeconds);
  const { reembedMigrationBatch } = proxyActivities<VectorStoreActivities>({ ...chunk, retry: { ...chunk.retry, maximumAttempts: 10 } });
  try {
    const prepared = await steps.prepareMigration(migrationId);
    if (!prepared.running) return 'stopped';
    for (let flips = 0; ; flips++) {
      for (;;) {
        const { remaining } = await reembedMigrationBatch(migrationId, wrappedKey);
        if (remaining === 0) break;
      }
      const outcome = await steps.flipMigration(migrationId);
      if (outcome === 'stopped') return 'stopped';
      if (outcome === 'flipped') break;
      if (flips > 100) throw ApplicationFailure.create({ message: 'files kept arriving faster than the migration could re-embed them', nonRetryable: true });
    }
    await steps.retireOldSpace(migrationId, wrappedKey);
    return 'completed';
  } catch (error) {
    const reason = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
    await steps.abandonMigration(migrationId, reason);
    throw error;
  }
}
