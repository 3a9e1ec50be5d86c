import type { Job } from 'bullmq';
import type { GatewayServices } from '../composition/gateway.js';
import { storeKeys } from './crypto.js';
import * as repo from './repository.js';
import { buildIvfLists } from './sealed-spaces.js';

/**
 * IVF lists of sealed stores with vector_index ivf, built on the CPU pool after ingest: a file
 * that completes queues a build, which runs when the store has grown enough since the last one
 * (chunks not yet in a list are scanned by every search meanwhile, so recall never drops).
 */
export const IVF_QUEUE = 'vector-store-ivf';

export interface IvfJob {
  storeId: string;
  /** byok stores: the data key wrapped by the master key, as the ingest job carried it. */
  wrappedKey?: string;
}

/** One queued build per store at a time; a build queued while one waits is the same job. */
export async function queueIvfBuild(platform: Pick<GatewayServices, 'queues'>, job: IvfJob): Promise<void> {
  await platform.queues.queue<IvfJob>(IVF_QUEUE).add('build', job, { jobId: `ivf-${job.storeId}`, delay: 1_000, attempts: 3, backoff: { type: 'exponential', delay: 5_000 }, removeOnComplete: true, removeOnFail: { age: 86_400 } });
}

export async function rebuildIvf(platform: GatewayServices, storeId: string, options: { wrappedKey?: string; force?: boolean } = {}): Promise<{ lists: number; chunks: number; rebuilt: boolean }> {
  const store = await repo.findStoreById(platform.db, storeId);
  if (!store || store.state !== 'active' || store.vector_index !== 'ivf' || store.vector_sealing !== 'full') return { lists: 0, chunks: 0, rebuilt: false };
  const keys = store.encryption === 'byok' ? storeKeys(platform.vectorStoreKeys.unwrapForJob(store.id, options.wrappedKey!)) : await platform.vectorStoreKeys.keys(store);
  return buildIvfLists(platform.db, platform.cpu, store, keys!, { force: options.force ?? true });
}

export function ivfProcessor(platform: GatewayServices) {
  return (job: Job<IvfJob>) => rebuildIvf(platform, job.data.storeId, { ...(job.data.wrappedKey && { wrappedKey: job.data.wrappedKey }), force: false });
}
