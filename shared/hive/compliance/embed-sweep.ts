import { withTransaction } from '../../db/pool.js';
import { ServiceError } from '../../errors.js';
import { newId } from '../../ids.js';
import type { HiveCredential } from '../access.js';
import { embedMemory, hiveEmbeddingModel } from '../embedding.js';
import { ownedOrganisation, startAndAwaitJob, type ComplianceServices } from './jobs.js';
import * as repo from './repository.js';

/**
 * The embedding sweep (POST /v1/admin/embed, and the hourly `hive-embed-sweep` schedule). Every
 * write queues its own embedding job (shared/hive/embedding.ts, BullMQ queue `hive-embed`); the
 * sweep catches what those missed (a job that failed for good, a queue that was away) and what a
 * change of HIVE_EMBEDDING_MODEL left behind: every live memory whose current version has no
 * vector from the configured model. It walks the memories by id, a page per activity; a memory is
 * embedded exactly as its queued job would embed it (embedMemory): a vector is stored only for the
 * version it was computed from, so a page run twice finds nothing left to embed.
 */
export const EMBED_PAGE = 64;
/** Embedding calls in flight at once within a page. */
const CONCURRENCY = 8;

export async function requestEmbedSweep(services: ComplianceServices, credential: HiveCredential, input: { wait_seconds: number }) {
  const root = await ownedOrganisation(services.db, credential);
  const job = await withTransaction(services.db, async (client) => {
    const made = await repo.insertJob(client, { id: newId('cmp_'), orgId: credential.orgId, kind: 'embed', apply: true, personId: credential.personId, tokenId: credential.tokenId });
    await repo.insertAudit(client, [{ orgId: credential.orgId, nodeId: root.id, action: 'embed.requested', jobId: made.id, personId: credential.personId, tokenId: credential.tokenId }]);
    return made;
  });
  return startAndAwaitJob(services, job, input.wait_seconds);
}

export interface EmbedPage {
  /** Where the next page starts (the last id of this one); null: the sweep is through. */
  next: string | null;
  embedded: number;
  stale: number;
  /** Memories the provider refused for good (a 4xx other than 429): counted and passed over, so one cannot stop every sweep. */
  refused: number;
}

/** Embeds the next page after `after`, each memory's current version as its queued job would. */
export async function embedSweepPage(services: ComplianceServices, jobId: string, after: string): Promise<EmbedPage> {
  const job = await repo.jobById(services.db, jobId);
  if (!job || job.status === 'completed') return { next: null, embedded: 0, stale: 0, refused: 0 };
  const model = hiveEmbeddingModel(services.config);
  const rows = await repo.unembeddedAfter(services.db, job.org_id, after, model.id, EMBED_PAGE);
  if (rows.length === 0) return { next: null, embedded: 0, stale: 0, refused: 0 };
  const outcomes: ('embedded' | 'stale' | 'refused')[] = [];
  for (let start = 0; start < rows.length; start += CONCURRENCY) {
    outcomes.push(...(await Promise.all(rows.slice(start, start + CONCURRENCY).map((row) => embedMemory(services, { memoryId: row.id, version: row.version }).catch(refusedForGood)))));
  }
  const count = (outcome: string) => outcomes.filter((each) => each === outcome).length;
  return { next: rows.at(-1)!.id, embedded: count('embedded'), stale: count('stale'), refused: count('refused') };
}

/** A provider's permanent refusal of one memory's text; anything else (the provider or database away) is thrown for the step to retry. */
function refusedForGood(error: unknown): 'refused' {
  if (error instanceof ServiceError && error.status < 500 && error.status !== 429) return 'refused';
  throw error;
}

/** Completes the sweep with its totals and, for an organisation's own sweep, its audit row, in one transaction. */
export async function finishEmbedSweep(services: Pick<ComplianceServices, 'db' | 'config'>, jobId: string, totals: { embedded: number; stale: number; refused: number; pages: number }): Promise<Record<string, unknown>> {
  const result = { model: services.config.HIVE_EMBEDDING_MODEL, ...totals };
  await withTransaction(services.db, async (client) => {
    const job = await repo.jobById(client, jobId, true);
    if (!job || job.status === 'completed') return;
    if (job.org_id) {
      const root = await repo.rootNodeOf(client, job.org_id);
      await repo.insertAudit(client, [{ orgId: job.org_id, nodeId: root.id, action: 'embed.completed', jobId, personId: job.requested_by, tokenId: null, detail: result }]);
    }
    await repo.completeJob(client, jobId, result);
  });
  return result;
}
