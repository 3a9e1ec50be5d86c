import { proxyActivities } from '@temporalio/workflow';
import type { VectorStoreActivities } from '../workers/vector-store-activities.js';
import { RESOURCE_STEP } from './activity-profiles.js';

/** Mirrors shared/vector-stores/lifecycle.ts (workflow code imports no runtime code from shared/). */
export interface VectorStoreDeletionInput {
  storeId: string;
}

const { removeVectorStoreContent } = proxyActivities<VectorStoreActivities>(RESOURCE_STEP);

/**
 * A deleted vector store (workflow id `<store id>-deletion`): its chunks, vectors, facts and file
 * attachments are removed, then the store reads as deleted. Retried until the database answers,
 * so a worker that dies half-way leaves nothing behind for long.
 */
export async function vectorStoreDeletionWorkflow(input: VectorStoreDeletionInput): Promise<string> {
  await removeVectorStoreContent(input.storeId);
  return 'deleted';
}
