import { withTransaction } from '../../db/pool.js';
import { newId } from '../../ids.js';
import type { HiveCredential } from '../access.js';
import { hiveError } from '../errors.js';
import { itemTotals, ownedOrganisation, PAGE_SIZE, startAndAwaitJob, type ComplianceServices } from './jobs.js';
import * as repo from './repository.js';

/**
 * Retention sweeps (POST /v1/admin/retention, and the daily `hive-retention` schedule): the rules in
 * force on each node (settings.ts) expire memories by age since they were last written. A dry run
 * names what would go and what stays and why; an applied sweep deletes exactly what its plan
 * names (with `from_dry_run`, only what that dry run named), page by page, each page re-checked under the organisation's hold lock. A memory that
 * supersedes another, one superseded by another, a pinned one and anything under a legal hold
 * stay. The applied sweep also removes audit rows past their node's audit-row lifetime, and
 * completed jobs past their organisation's.
 */
export async function requestRetention(services: ComplianceServices, credential: HiveCredential, input: { apply: boolean; from_dry_run?: string; wait_seconds: number }) {
  const root = await ownedOrganisation(services.db, credential);
  const job = await withTransaction(services.db, async (client) => {
    const made = await repo.insertJob(client, { id: newId('cmp_'), orgId: credential.orgId, kind: 'retention', apply: input.apply, personId: credential.personId, tokenId: credential.tokenId });
    if (input.from_dry_run) {
      // Applying a dry run: planned here, as of now, restricted to what the dry run named.
      const dryRun = await repo.jobById(client, input.from_dry_run);
      if (dryRun?.org_id !== credential.orgId || dryRun.kind !== 'retention') throw hiveError(404, `No retention job ${input.from_dry_run}.`);
      if (dryRun.apply || dryRun.status !== 'completed') throw hiveError(409, `Job ${dryRun.id} is not a completed dry run.`);
      await repo.markPlanned(client, made.id, await repo.planRetention(client, made, PAGE_SIZE, dryRun.id));
    }
    await repo.insertAudit(client, [{
      orgId: credential.orgId, nodeId: root.id, action: 'retention.requested', jobId: made.id, personId: credential.personId, tokenId: credential.tokenId,
      detail: { apply: input.apply, ...(input.from_dry_run && { from_dry_run: input.from_dry_run }) },
    }]);
    return made;
  });
  return startAndAwaitJob(services, job, input.wait_seconds);
}

/** The workflow's first step: the plan, made once (a retry finds it made) as of the job's instant. */
export async function planRetentionJob(services: Pick<ComplianceServices, 'db'>, jobId: string): Promise<{ pages: number; apply: boolean; found: boolean }> {
  return withTransaction(services.db, async (client) => {
    const job = await repo.jobById(client, jobId, true);
    if (!job) return { pages: 0, apply: false, found: false };
    if (job.planned) return { pages: job.pages, apply: job.apply, found: true };
    const pages = await repo.planRetention(client, job, PAGE_SIZE);
    await repo.markPlanned(client, jobId, pages);
    return { pages, apply: job.apply, found: true };
  });
}

/**
 * Deletes one page of the plan in one transaction with its audit rows and the items' outcomes.
 * Each memory is re-read under lock: one gone since is `gone`, one that is now held, protected or
 * written again since the plan is `kept`. A page already settled finds nothing to do.
 */
export async function applyRetentionPage(services: Pick<ComplianceServices, 'db'>, jobId: string, page: number): Promise<{ deleted: number; kept: number; gone: number }> {
  return withTransaction(services.db, async (client) => {
    const job = await repo.jobById(client, jobId);
    const items = await repo.unsettledItems(client, jobId, page);
    if (!job || items.length === 0) return { deleted: 0, kept: 0, gone: 0 };
    await repo.lockOrganisationHolds(client, items.map((item) => item.org_id));
    const states = new Map((await repo.lockForRetention(client, items.map((item) => item.memory_id))).map((state) => [state.id, state]));
    const outcomes = items.map((item) => {
      const state = states.get(item.memory_id);
      if (!state) return { item, outcome: 'gone' as const, reason: null };
      if (state.reason) return { item, outcome: 'kept' as const, reason: state.reason };
      if (state.updated_at.getTime() > item.written_at.getTime()) return { item, outcome: 'kept' as const, reason: 'written_since' };
      return { item, outcome: 'deleted' as const, reason: null };
    });
    const deleted = outcomes.filter((entry) => entry.outcome === 'deleted').map((entry) => entry.item);
    await repo.deleteMemories(client, deleted.map((item) => item.memory_id));
    await repo.settleItems(client, jobId, outcomes.map((entry) => ({ memoryId: entry.item.memory_id, outcome: entry.outcome, reason: entry.reason })));
    await repo.insertAudit(client, byNode(deleted).map(([nodeId, nodeItems]) => ({
      orgId: nodeItems[0]!.org_id,
      nodeId,
      action: 'retention.deleted',
      jobId,
      personId: job.requested_by,
      tokenId: null,
      detail: { memory_ids: nodeItems.map((item) => item.memory_id), rules: [...new Set(nodeItems.map((item) => item.max_age_days))] },
    })));
    return { deleted: deleted.length, kept: outcomes.filter((entry) => entry.outcome === 'kept').length, gone: outcomes.filter((entry) => entry.outcome === 'gone').length };
  });
}

/** Expired audit rows (or jobs) removed per statement. */
const EXPIRY_BATCH = 1_000;

/**
 * The sweep's last step: an applied sweep removes expired audit rows and completed jobs (batch by
 * batch; a retry finds fewer), then the job completes with its totals and, for an organisation's own sweep, an
 * audit row saying what it did, in the same transaction.
 */
export async function finishRetention(services: Pick<ComplianceServices, 'db'>, jobId: string): Promise<Record<string, unknown>> {
  const job = await repo.jobById(services.db, jobId);
  if (!job) return { found: false };
  if (job.status === 'completed') return job.result ?? {};
  const expired = { audit_rows_expired: 0, jobs_expired: 0 };
  while (job.apply) {
    const removed = await repo.deleteExpiredAudit(services.db, job.org_id, job.as_of, EXPIRY_BATCH);
    expired.audit_rows_expired += removed;
    if (removed < EXPIRY_BATCH) break;
  }
  while (job.apply) {
    const removed = await repo.deleteExpiredJobs(services.db, job.org_id, job.as_of, job.id, EXPIRY_BATCH);
    expired.jobs_expired += removed;
    if (removed < EXPIRY_BATCH) break;
  }
  const result = { dry_run: !job.apply, as_of: job.as_of.toISOString(), memories: await itemTotals(services.db, jobId), ...(job.apply && expired) };
  await withTransaction(services.db, async (client) => {
    const locked = await repo.jobById(client, jobId, true);
    if (!locked || locked.status === 'completed') return;
    if (job.org_id) {
      const root = await repo.rootNodeOf(client, job.org_id);
      await repo.insertAudit(client, [{ orgId: job.org_id, nodeId: root.id, action: job.apply ? 'retention.completed' : 'retention.dry_run', jobId, personId: job.requested_by, tokenId: null, detail: result }]);
    }
    await repo.completeJob(client, jobId, result);
  });
  return result;
}

function byNode(items: repo.ItemRow[]): [string, repo.ItemRow[]][] {
  const groups = new Map<string, repo.ItemRow[]>();
  for (const item of items) groups.set(item.node_id, [...(groups.get(item.node_id) ?? []), item]);
  return [...groups];
}
