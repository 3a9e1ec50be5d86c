import type { Config } from '../../config.js';
import { contentHash } from '../../content-hash.js';
import type { Queryable } from '../../db/pool.js';
import { awayDependency } from '../../platform/dependency-errors.js';
import type { Infrastructure } from '../../platform/infrastructure.js';
import { workflowResultBy } from '../../platform/temporal.js';
import type { ProviderRegistry } from '../../providers/registry.js';
import { nodeWithRole, type HiveCredential } from '../access.js';
import { hiveError, hiveUnavailable } from '../errors.js';
import type { ReachedNodeRow } from '../repository.js';
import * as repo from './repository.js';
import type { SettingsRecord } from './schemas.js';

/**
 * Compliance jobs: a retention sweep, an erasure or an embedding sweep is a row in
 * hive.compliance_jobs and a Temporal workflow whose id is the row's id (readable in the Web UI).
 * The workflow's activities settle the row page by page; the route waits a while for the result
 * and otherwise answers 202 with the job, which POST /v1/admin/job reads until it is completed.
 */
export type ComplianceServices = Pick<Infrastructure, 'db' | 'temporal' | 'logger'> & {
  config: Config;
  providers: ProviderRegistry;
};

/** Memories settled per page (one transaction each, its audit rows with it). */
export const PAGE_SIZE = 250;
/** A job's answer lists at most this many memories (its counts cover them all). */
const LISTED_ITEMS = 1_000;

export const WORKFLOW_OF: Record<repo.JobKind, string> = {
  retention: 'hiveRetentionWorkflow',
  erasure: 'hiveErasureWorkflow',
  embed: 'hiveEmbedSweepWorkflow',
};

/** What one administrative change of compliance does (the route has checked who may ask). */
export type HiveAdminChange =
  | { kind: 'hold.place'; holdId: string; orgId: string; nodeId: string; reason: string; by: ChangeAuthor }
  | { kind: 'hold.lift'; holdId: string; orgId: string; by: ChangeAuthor }
  | { kind: 'settings.replace'; changeId: string; orgId: string; nodeId: string; settings: SettingsRecord; by: ChangeAuthor };
type ChangeAuthor = { personId: string | null; tokenId: string };

/** What hiveAdminChangeWorkflow answers: the hold a placement or a lift stands for (null for settings), the erasures a lift woke. */
export type HiveAdminChangeResult = { holdId: string | null; woken: string[] };

/**
 * How long a route waits for its change's workflow. A healthy run is one short transaction (a
 * second or two at worst on a loaded machine), so a change not done by then has no worker taking
 * it: the caller hears so well before the 30 to 60 s at which clients and proxies give up.
 */
export const ADMIN_CHANGE_WAIT_MS = 10_000;
/** The Retry-After of that answer: a worker that restarts polls again within about this long. */
const ADMIN_CHANGE_RETRY_AFTER_SECONDS = 10;

/**
 * The workflow id of a change, made of what was asked rather than of a fresh id, so the same
 * request sent again (a client retrying after a timeout or a 503) joins the change it made:
 * a placement by the organisation, node, reason and token that asks it (the token names its
 * person); a replacement by the node and the record; a lift by its hold.
 */
export function adminChangeWorkflowId(change: HiveAdminChange): string {
  switch (change.kind) {
    case 'hold.place':
      return `hive-hold-placed-${change.nodeId}-${contentHash([change.orgId, change.nodeId, change.reason, change.by.tokenId]).slice(0, 32)}`;
    case 'hold.lift':
      return `hive-hold-${change.holdId}-lifted`;
    case 'settings.replace':
      return `hive-settings-${change.nodeId}-${contentHash(change.settings).slice(0, 32)}`;
  }
}

/**
 * Runs one administrative change (a hold placed or lifted, settings replaced) as its workflow,
 * hiveAdminChangeWorkflow, and waits for it at most ADMIN_CHANGE_WAIT_MS. While it runs, the same
 * change asked again joins it (USE_EXISTING) and gets its answer. Once it has closed, asking
 * again starts a new run (ALLOW_DUPLICATE): its step finds the change already made (the hold still
 * active, the record already the node's own, the hold lifted) and answers that, or makes it anew
 * if it was undone meanwhile, as a user would expect of asking for a state. Without a worker the
 * answer is a 503; the workflow stays queued and the change applies once a worker runs it.
 */
export async function runAdminChange(services: ComplianceServices, change: HiveAdminChange): Promise<HiveAdminChangeResult> {
  const handle = await services.temporal.client.workflow.start('hiveAdminChangeWorkflow', {
    taskQueue: services.config.TEMPORAL_TASK_QUEUE,
    workflowId: adminChangeWorkflowId(change),
    args: [change],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    staticSummary: `Hive ${change.kind}`,
  });
  const result = await workflowResultBy<HiveAdminChangeResult>(handle, Date.now() + ADMIN_CHANGE_WAIT_MS);
  if (result) return result;
  throw hiveUnavailable(
    `The change is queued: no worker has run it within ${ADMIN_CHANGE_WAIT_MS / 1_000} seconds, and it applies once one does. Send the same request again to see it; it joins this change rather than making another.`,
    ADMIN_CHANGE_RETRY_AFTER_SECONDS,
  );
}

/** The organisation's root node, when the caller is its owner (compliance needs owner on the organisation). */
export async function ownedOrganisation(db: Queryable, credential: HiveCredential): Promise<ReachedNodeRow> {
  const root = await repo.rootNodeOf(db, credential.orgId);
  return nodeWithRole(db, credential, root.id, 'owner');
}

/** Starts the job's workflow, or finds it started, and marks the job so (the start sweep passes it over from then on). */
export async function startJobWorkflow(services: ComplianceServices, job: Pick<repo.JobRow, 'id' | 'kind'>): Promise<void> {
  try {
    await services.temporal.client.workflow.start(WORKFLOW_OF[job.kind], {
      taskQueue: services.config.TEMPORAL_TASK_QUEUE,
      workflowId: job.id,
      args: [{ jobId: job.id }],
      // A running workflow is joined; one that ran and closed is never run again from here.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      staticSummary: `Hive ${job.kind} ${job.id}`,
    });
  } catch (error) {
    if ((error as Error).name !== 'WorkflowExecutionAlreadyStartedError') throw error;
  }
  await repo.markWorkflowStarted(services.db, job.id);
}

/**
 * Starts the workflow of a job the request has just committed, and says whether it did. Once the
 * job (and its audit row) is committed, a 503 would tell the caller that nothing happened, and a
 * retry would make a second job: with Temporal away the job stays as committed, the route answers
 * it as a job still running, and the start sweep (startUnstartedComplianceJobs) starts it later.
 */
export async function startCommittedJob(services: ComplianceServices, job: Pick<repo.JobRow, 'id' | 'kind'>): Promise<boolean> {
  try {
    await startJobWorkflow(services, job);
    return true;
  } catch (error) {
    if (awayDependency(error) !== 'Temporal') throw error;
    services.logger.warn({ err: error, jobId: job.id }, 'compliance job committed but its workflow not started (Temporal away); the start sweep starts it');
    return false;
  }
}

/**
 * The worker's sweep (workers/hive-consumers.ts, every 30 s): starts the workflow of each job
 * committed at least `olderThanSeconds` ago whose start was never confirmed. Returns how many.
 * A job is started from here once: a workflow found already closed (REJECT_DUPLICATE) is marked
 * started and left. The compliance steps retry every failure without limit (their activities pass
 * errors through, their profiles set no attempt limit), so a workflow closes without completing its
 * job only when someone terminated or cancelled it; starting it again would undo that every sweep,
 * and once Temporal forgot the closed run, redo work an operator stopped. Such a job stays as it
 * is for an operator, readable through POST /v1/admin/job.
 */
export async function startUnstartedComplianceJobs(services: ComplianceServices, olderThanSeconds = 30): Promise<number> {
  let started = 0;
  for (const job of await repo.unstartedJobs(services.db, olderThanSeconds)) {
    await startJobWorkflow(services, job);
    started += 1;
  }
  return started;
}

/** A request's answer for the job it has just committed: its workflow started and awaited as awaitJob does, or, with Temporal away, the job as it stands (202). */
export async function startAndAwaitJob(services: ComplianceServices, job: Pick<repo.JobRow, 'id' | 'kind'>, waitSeconds: number): Promise<{ status: 200 | 202; job: JobView }> {
  const started = await startCommittedJob(services, job);
  return awaitJob(services, job.id, started ? waitSeconds : 0);
}

/** The job once its workflow has ended, or as it stands after `waitSeconds`. */
export async function awaitJob(services: ComplianceServices, jobId: string, waitSeconds: number): Promise<{ status: 200 | 202; job: JobView }> {
  if (waitSeconds > 0) {
    // However it ended (completed, failed, terminated, Temporal away), the job's row tells.
    await workflowResultBy(services.temporal.client.workflow.getHandle(jobId), Date.now() + waitSeconds * 1_000).catch(() => undefined);
  }
  const job = await viewJob(services.db, jobId);
  return { status: job.status === 'completed' ? 200 : 202, job };
}

/**
 * POST /v1/admin/job: a job of the caller's organisation, as the route that made it answers it. A
 * job not yet completed has its workflow started if it has none (the process that made the job
 * died before starting it); a running workflow is left as it is.
 */
export async function readJob(services: ComplianceServices, credential: HiveCredential, id: string): Promise<JobView> {
  await ownedOrganisation(services.db, credential);
  const job = await repo.jobById(services.db, id);
  if (!job || job.org_id !== credential.orgId) throw hiveError(404, `No compliance job ${id}.`);
  // A job whose workflow never started is started here too (the sweep would, within 30 s); one
  // Temporal away for is read as it stands.
  if (job.status !== 'completed' && !job.workflow_started) await startCommittedJob(services, job);
  return viewJob(services.db, id);
}

export interface ItemView {
  id: string;
  node: { id: string; path: string };
  scope: string;
  kind: string;
  title: string | null;
  written_at: string;
  max_age_days?: number;
  reason: string | null;
}

export interface JobView {
  id: string;
  object: 'compliance_job';
  kind: repo.JobKind;
  apply: boolean;
  status: repo.JobStatus;
  organisation: string | null;
  requested_at: string;
  finished_at: string | null;
  result: Record<string, unknown> | null;
  /** Memories by what was (or would be) done to them: would_delete, would_anonymise, deleted, anonymised, kept, gone. */
  memories?: Record<string, ItemView[]>;
  counts?: Record<string, number>;
  listed_limit?: number;
}

const STATE_OF = (item: Pick<repo.ItemRow, 'action' | 'outcome'>): string =>
  item.outcome ?? (item.action === 'keep' ? 'kept' : `would_${item.action}`);

export async function viewJob(db: Queryable, id: string): Promise<JobView> {
  const job = await repo.jobById(db, id);
  if (!job) throw hiveError(404, `No compliance job ${id}.`);
  const view: JobView = {
    id: job.id,
    object: 'compliance_job',
    kind: job.kind,
    apply: job.apply,
    status: job.status,
    organisation: job.org_id,
    requested_at: job.created_at.toISOString(),
    finished_at: job.finished_at?.toISOString() ?? null,
    result: job.result,
  };
  if (job.kind === 'embed') return view;
  const counts: Record<string, number> = {};
  for (const row of await repo.itemCounts(db, id)) counts[STATE_OF(row)] = (counts[STATE_OF(row)] ?? 0) + row.n;
  const memories: Record<string, ItemView[]> = {};
  for (const item of await repo.itemsOf(db, id, LISTED_ITEMS)) {
    const state = STATE_OF(item);
    (memories[state] ??= []).push({
      id: item.memory_id,
      node: { id: item.node_id, path: item.node_path },
      scope: item.scope,
      kind: item.kind,
      title: item.title,
      written_at: item.written_at.toISOString(),
      ...(item.max_age_days !== null && { max_age_days: item.max_age_days }),
      reason: item.reason,
    });
  }
  return { ...view, memories, counts, listed_limit: LISTED_ITEMS };
}

/** Counts of a job's items by state, for its recorded result. */
export async function itemTotals(db: Queryable, jobId: string): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const row of await repo.itemCounts(db, jobId)) totals[STATE_OF(row)] = (totals[STATE_OF(row)] ?? 0) + row.n;
  return totals;
}

/** Opens the job a scheduled run works under (its id is the run's workflow id, so a retried open finds it). */
export async function openScheduledJob(db: Queryable, kind: repo.JobKind, workflowId: string): Promise<string> {
  const job = await repo.insertJob(db, { id: workflowId, orgId: null, kind, apply: true, personId: null, tokenId: null, workflowStarted: true });
  return job.id;
}
