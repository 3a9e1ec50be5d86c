import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Db } from '../db/pool.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { TemporalHandle } from '../platform/temporal.js';
import * as repo from './repository.js';

/** Mirrors workflows/vector-store-deletion.ts (workflow code imports no runtime code from shared/). */
export const STORE_DELETION_WORKFLOW = 'vectorStoreDeletionWorkflow';
export const deletionWorkflowId = (storeId: string) => `${storeId}-deletion`;

/**
 * A deleted store's content (its chunk partition, facts and attachments) is removed by a Temporal
 * workflow, so a removal interrupted by a restart is finished by the next worker. The workflow id
 * is derived from the store id: starting it twice finds the first.
 */
export async function startStoreDeletion(platform: { temporal: TemporalHandle; config: Pick<Config, 'TEMPORAL_TASK_QUEUE'>; logger: Logger }, storeId: string): Promise<void> {
  try {
    await platform.temporal.client.workflow.start(STORE_DELETION_WORKFLOW, {
      taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
      workflowId: deletionWorkflowId(storeId),
      args: [{ storeId }],
      staticSummary: `Remove the content of vector store ${storeId}`,
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return;
    // The store is already deleting (writes refused); the recovery sweep starts the workflow later.
    platform.logger.warn({ err: error, storeId }, 'vector store deletion workflow not started yet');
  }
}

/** The activity: drop the store's content; idempotent. */
export async function removeStoreContent(db: Db, storeId: string): Promise<void> {
  await repo.dropStoreContent(db, storeId);
}
