import type { Queryable } from '../../db/pool.js';
import { newId } from '../../ids.js';
import type { RetentionRule, Sensitivity } from './schemas.js';

/**
 * SQL of the hive's compliance: settings records, legal holds, compliance jobs and their planned
 * items, the audit log, and the deletions and anonymisations the sweeps make. Callers have checked
 * the caller's role; these statements scope by organisation themselves.
 */

/** `n` (a hive.nodes row) lies under an active legal hold: on it or on a node above it. */
const HELD = (n: string) => `EXISTS (
  SELECT 1 FROM hive.legal_holds h JOIN hive.nodes hn ON hn.id = h.node_id
   WHERE h.lifted_at IS NULL AND h.org_id = ${n}.org_id AND (hn.id = ${n}.id OR starts_with(${n}.path, hn.path || '/')))`;

/** The settings record in force on `n`: its own, else its nearest ancestor's (no row: the defaults). */
const SETTINGS_IN_FORCE = (n: string) => `(
  SELECT s.retention, s.audit_row_days FROM hive.nodes a JOIN hive.node_settings s ON s.node_id = a.id
   WHERE a.org_id = ${n}.org_id AND (a.id = ${n}.id OR starts_with(${n}.path, a.path || '/'))
   ORDER BY a.depth DESC LIMIT 1)`;

/** Audit rows live this long where no settings record says otherwise. */
export const DEFAULT_AUDIT_ROW_DAYS = 365;

/**
 * Serialises an organisation's holds with its deletions: placing a hold and every page that
 * deletes take this lock, so a page either commits before a hold exists or sees it.
 */
export async function lockOrganisationHolds(db: Queryable, orgIds: string[]): Promise<void> {
  for (const orgId of [...new Set(orgIds)].sort()) await db.query(`SELECT pg_advisory_xact_lock(hashtextextended('hive.legal_holds:' || $1, 0))`, [orgId]);
}

// ---------------------------------------------------------------- settings

export interface SettingsRow {
  node_id: string;
  node_path: string;
  retention: RetentionRule[];
  sensitivity: Sensitivity;
  audit_row_days: number;
  updated_at: Date;
  updated_by: string | null;
}

/** The record in force on a node: its own or its nearest ancestor's (`node_id` says whose). */
export async function settingsInForce(db: Queryable, nodeId: string): Promise<SettingsRow | undefined> {
  const { rows } = await db.query<SettingsRow>(
    `SELECT s.node_id, a.name_path AS node_path, s.retention, s.sensitivity, s.audit_row_days, s.updated_at, s.updated_by
       FROM hive.nodes n
       JOIN hive.nodes a ON a.org_id = n.org_id AND (a.id = n.id OR starts_with(n.path, a.path || '/'))
       JOIN hive.node_settings s ON s.node_id = a.id
      WHERE n.id = $1
      ORDER BY a.depth DESC LIMIT 1`,
    [nodeId],
  );
  return rows[0];
}

export async function replaceSettings(
  db: Queryable,
  record: { nodeId: string; orgId: string; retention: RetentionRule[]; sensitivity: Sensitivity; auditRowDays: number; personId: string | null; tokenId: string },
): Promise<void> {
  await db.query(
    `INSERT INTO hive.node_settings (node_id, org_id, retention, sensitivity, audit_row_days, updated_by, updated_token)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (node_id) DO UPDATE SET retention = EXCLUDED.retention, sensitivity = EXCLUDED.sensitivity, audit_row_days = EXCLUDED.audit_row_days,
       updated_at = now(), updated_by = EXCLUDED.updated_by, updated_token = EXCLUDED.updated_token`,
    [record.nodeId, record.orgId, JSON.stringify(record.retention), record.sensitivity, record.auditRowDays, record.personId, record.tokenId],
  );
}

// ---------------------------------------------------------------- holds

export interface HoldRow {
  id: string;
  org_id: string;
  node_id: string;
  node_path: string;
  reason: string;
  placed_at: Date;
  placed_by: string | null;
  lifted_at: Date | null;
  lifted_by: string | null;
}

const HOLD_COLUMNS = `h.id, h.org_id, h.node_id, n.name_path AS node_path, h.reason, h.placed_at, h.placed_by, h.lifted_at, h.lifted_by`;

/** A hold under the id its request chose; false when that id is placed already (a retried step). */
export async function insertHold(db: Queryable, hold: { id: string; orgId: string; nodeId: string; reason: string; personId: string | null; tokenId: string }): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO hive.legal_holds (id, org_id, node_id, reason, placed_by, placed_token) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
    [hold.id, hold.orgId, hold.nodeId, hold.reason, hold.personId, hold.tokenId],
  );
  return rowCount === 1;
}

/** The active hold the same token placed on the node for the same reason, if one stands (the oldest). */
export async function activeHoldPlacedAlike(db: Queryable, hold: { orgId: string; nodeId: string; reason: string; tokenId: string }): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM hive.legal_holds
      WHERE org_id = $1 AND node_id = $2 AND reason = $3 AND placed_token = $4 AND lifted_at IS NULL
      ORDER BY placed_at, id LIMIT 1`,
    [hold.orgId, hold.nodeId, hold.reason, hold.tokenId],
  );
  return rows[0]?.id;
}

export async function holdById(db: Queryable, orgId: string, id: string, lock = false): Promise<HoldRow | undefined> {
  const { rows } = await db.query<HoldRow>(
    `SELECT ${HOLD_COLUMNS} FROM hive.legal_holds h JOIN hive.nodes n ON n.id = h.node_id WHERE h.id = $1 AND h.org_id = $2 ${lock ? 'FOR UPDATE OF h' : ''}`,
    [id, orgId],
  );
  return rows[0];
}

export async function liftHold(db: Queryable, id: string, by: { personId: string | null; tokenId: string }): Promise<void> {
  await db.query(`UPDATE hive.legal_holds SET lifted_at = now(), lifted_by = $2, lifted_token = $3 WHERE id = $1 AND lifted_at IS NULL`, [id, by.personId, by.tokenId]);
}

export async function holdsOf(db: Queryable, orgId: string, includeLifted: boolean): Promise<HoldRow[]> {
  const { rows } = await db.query<HoldRow>(
    `SELECT ${HOLD_COLUMNS} FROM hive.legal_holds h JOIN hive.nodes n ON n.id = h.node_id
      WHERE h.org_id = $1 AND ($2 OR h.lifted_at IS NULL) ORDER BY h.placed_at, h.id`,
    [orgId, includeLifted],
  );
  return rows;
}

// ---------------------------------------------------------------- jobs

export type JobKind = 'retention' | 'erasure' | 'embed';
export type JobStatus = 'running' | 'queued' | 'completed';

export interface JobRow {
  id: string;
  org_id: string | null;
  kind: JobKind;
  apply: boolean;
  status: JobStatus;
  subject_person_id: string | null;
  requested_by: string | null;
  planned: boolean;
  pages: number;
  workflow_started: boolean;
  result: Record<string, unknown> | null;
  as_of: Date;
  created_at: Date;
  finished_at: Date | null;
}

export async function insertJob(
  db: Queryable,
  job: { id: string; orgId: string | null; kind: JobKind; apply: boolean; status?: JobStatus; subjectPersonId?: string | null; personId: string | null; tokenId: string | null; workflowStarted?: boolean },
): Promise<JobRow> {
  const { rows } = await db.query<JobRow>(
    `INSERT INTO hive.compliance_jobs (id, org_id, kind, apply, status, subject_person_id, requested_by, requested_token, workflow_started)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id
     RETURNING *`,
    [job.id, job.orgId, job.kind, job.apply, job.status ?? 'running', job.subjectPersonId ?? null, job.personId, job.tokenId, job.workflowStarted ?? false],
  );
  return rows[0]!;
}

export async function jobById(db: Queryable, id: string, lock = false): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRow>(`SELECT * FROM hive.compliance_jobs WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`, [id]);
  return rows[0];
}

export async function setJobStatus(db: Queryable, id: string, status: JobStatus): Promise<void> {
  await db.query(`UPDATE hive.compliance_jobs SET status = $2, updated_at = now() WHERE id = $1 AND status <> 'completed'`, [id, status]);
}

export async function markPlanned(db: Queryable, id: string, pages: number): Promise<void> {
  await db.query(`UPDATE hive.compliance_jobs SET planned = true, pages = $2, updated_at = now() WHERE id = $1`, [id, pages]);
}

export async function completeJob(db: Queryable, id: string, result: Record<string, unknown>): Promise<void> {
  await db.query(
    `UPDATE hive.compliance_jobs SET status = 'completed', result = $2, finished_at = now(), updated_at = now() WHERE id = $1 AND status <> 'completed'`,
    [id, JSON.stringify(result)],
  );
}

export async function markWorkflowStarted(db: Queryable, id: string): Promise<void> {
  await db.query(`UPDATE hive.compliance_jobs SET workflow_started = true WHERE id = $1 AND NOT workflow_started`, [id]);
}

/** Jobs not completed whose workflow was never started (Temporal away, or the API died, after the commit), oldest first. */
export async function unstartedJobs(db: Queryable, olderThanSeconds: number, limit = 100): Promise<JobRow[]> {
  const { rows } = await db.query<JobRow>(
    `SELECT * FROM hive.compliance_jobs
      WHERE NOT workflow_started AND status <> 'completed' AND created_at < now() - make_interval(secs => $1)
      ORDER BY created_at LIMIT $2`,
    [olderThanSeconds, limit],
  );
  return rows;
}

export async function queuedErasures(db: Queryable, orgId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM hive.compliance_jobs WHERE org_id = $1 AND kind = 'erasure' AND status = 'queued' ORDER BY created_at`, [orgId]);
  return rows.map((row) => row.id);
}

// ---------------------------------------------------------------- items

export interface ItemRow {
  memory_id: string;
  page: number;
  org_id: string;
  node_id: string;
  node_path: string;
  scope: string;
  kind: string;
  written_at: Date;
  max_age_days: number | null;
  action: 'delete' | 'anonymise' | 'keep';
  reason: string | null;
  outcome: 'deleted' | 'anonymised' | 'kept' | 'gone' | null;
  /** The memory's title while it exists (a dry run names what would go); null once gone. */
  title: string | null;
}

/** Why a memory `m` a retention rule has expired stays: a legal hold (`held`, an SQL boolean), or a supersession or pin it is part of. */
const RETENTION_KEEP_REASON = (held: string) => `CASE WHEN ${held} THEN 'legal_hold'
  WHEN EXISTS (SELECT 1 FROM hive.memories o WHERE o.superseded_by = m.id) THEN 'supersedes'
  WHEN m.superseded_by IS NOT NULL THEN 'superseded'
  WHEN m.pinned THEN 'pinned' END`;

/**
 * Plans a retention sweep: every memory of the job's organisation (every organisation: null) that
 * a rule in force on its node has expired as of the job's `as_of`, each with the action the sweep
 * takes (`delete`, or `keep` with why). With `dryRunId`, only what that dry run named is deleted:
 * a memory expired since is kept (`not_in_dry_run`). Deletions are numbered into pages of
 * `pageSize` by id. Answers the number of pages.
 */
export async function planRetention(db: Queryable, job: Pick<JobRow, 'id' | 'org_id' | 'as_of'>, pageSize: number, dryRunId: string | null = null): Promise<number> {
  await db.query(
    `INSERT INTO hive.compliance_items (job_id, memory_id, page, org_id, node_id, node_path, scope, kind, written_at, max_age_days, action, reason)
     SELECT $1, c.id,
            CASE WHEN c.reason IS NULL THEN (row_number() OVER (PARTITION BY c.reason IS NULL ORDER BY c.id) - 1) / $3 ELSE -1 END,
            c.org_id, c.node_id, c.name_path, c.scope, c.kind, c.updated_at, c.max_age_days,
            CASE WHEN c.reason IS NULL THEN 'delete' ELSE 'keep' END, c.reason
       FROM (
         SELECT m.id, m.org_id, m.node_id, rn.name_path, m.scope, m.kind, m.updated_at, r.max_age_days,
                coalesce(${RETENTION_KEEP_REASON('rn.held')}, CASE WHEN $5::text IS NOT NULL AND NOT EXISTS (
                  SELECT 1 FROM hive.compliance_items d WHERE d.job_id = $5 AND d.memory_id = m.id AND d.action = 'delete') THEN 'not_in_dry_run' END) AS reason
           FROM (
             -- The rules and the hold of each node, worked out once per node rather than per memory.
             SELECT n.id, n.name_path, s.retention, ${HELD('n')} AS held
               FROM hive.nodes n CROSS JOIN LATERAL ${SETTINGS_IN_FORCE('n')} s
              WHERE ($2::text IS NULL OR n.org_id = $2) AND jsonb_array_length(s.retention) > 0
           ) rn
           JOIN hive.memories m ON m.node_id = rn.id
           CROSS JOIN LATERAL (
             SELECT min((rule ->> 'max_age_days')::int) AS max_age_days FROM jsonb_array_elements(rn.retention) rule
              WHERE (rule ->> 'kind' IS NULL OR rule ->> 'kind' = m.kind)
                AND (rule ->> 'scope' IS NULL OR m.scope = rule ->> 'scope' OR starts_with(m.scope, (rule ->> 'scope') || '/'))
           ) r
          WHERE r.max_age_days IS NOT NULL
            AND m.updated_at < $4::timestamptz - make_interval(days => r.max_age_days)
       ) c
     ON CONFLICT DO NOTHING`,
    [job.id, job.org_id, pageSize, job.as_of, dryRunId],
  );
  return pagesOf(db, job.id);
}

/**
 * Plans an erasure of `personId`: every memory of the organisation the person created or wrote a
 * version of, verified or forgot. A memory the person created alone and that retracts nothing is
 * deleted; one that retracts another (others point at it as their replacement) is anonymised, as is
 * one others wrote too (its content is theirs as well). Answers the number of pages.
 */
export async function planErasure(db: Queryable, job: Pick<JobRow, 'id' | 'org_id'>, personId: string, pageSize: number): Promise<number> {
  await db.query(
    `INSERT INTO hive.compliance_items (job_id, memory_id, page, org_id, node_id, node_path, scope, kind, written_at, action, reason)
     SELECT $1, c.id, (row_number() OVER (ORDER BY c.id) - 1) / $4, c.org_id, c.node_id, c.name_path, c.scope, c.kind, c.updated_at,
            CASE WHEN c.reason IS NULL THEN 'delete' ELSE 'anonymise' END, c.reason
       FROM (
         SELECT m.id, m.org_id, m.node_id, n.name_path, m.scope, m.kind, m.updated_at, ${ANONYMISE_REASON('$3')} AS reason
           FROM hive.memories m JOIN hive.nodes n ON n.id = m.node_id
          WHERE m.org_id = $2 AND (${WRITTEN_BY('$3')})
       ) c
     ON CONFLICT DO NOTHING`,
    [job.id, job.org_id, personId, pageSize],
  );
  return pagesOf(db, job.id);
}

/** A memory `m` the person (the parameter `p`) touched: created, wrote a version of, verified, forgot. */
const WRITTEN_BY = (p: string) => `m.created_by = ${p} OR m.updated_by = ${p} OR m.verified_by = ${p} OR m.forgotten_by = ${p}
  OR EXISTS (SELECT 1 FROM hive.memory_versions v WHERE v.memory_id = m.id AND v.written_by = ${p})`;

/** Why a memory `m` the person (`p`) touched is anonymised rather than deleted; null: it is deleted. */
const ANONYMISE_REASON = (p: string) => `CASE
  WHEN m.created_by IS DISTINCT FROM ${p} THEN 'created_by_another'
  WHEN EXISTS (SELECT 1 FROM hive.memories o WHERE o.superseded_by = m.id) THEN 'retracts'
  WHEN m.updated_by IS DISTINCT FROM ${p} OR EXISTS (SELECT 1 FROM hive.memory_versions v WHERE v.memory_id = m.id AND v.written_by IS DISTINCT FROM ${p}) THEN 'others_wrote'
  END`;

async function pagesOf(db: Queryable, jobId: string): Promise<number> {
  const { rows } = await db.query<{ pages: number }>(`SELECT coalesce(max(page) + 1, 0)::int AS pages FROM hive.compliance_items WHERE job_id = $1`, [jobId]);
  return rows[0]!.pages;
}

/** A page's items not yet settled, locked for settling. */
export async function unsettledItems(db: Queryable, jobId: string, page: number): Promise<ItemRow[]> {
  const { rows } = await db.query<ItemRow>(
    `SELECT i.*, NULL::text AS title FROM hive.compliance_items i
      WHERE i.job_id = $1 AND i.page = $2 AND i.action <> 'keep' AND i.outcome IS NULL
      ORDER BY i.memory_id FOR UPDATE`,
    [jobId, page],
  );
  return rows;
}

export async function settleItems(db: Queryable, jobId: string, outcomes: { memoryId: string; outcome: NonNullable<ItemRow['outcome']>; reason?: string | null }[]): Promise<void> {
  if (outcomes.length === 0) return;
  await db.query(
    `UPDATE hive.compliance_items i SET outcome = o.outcome, reason = coalesce(o.reason, i.reason)
       FROM unnest($2::text[], $3::text[], $4::text[]) AS o(memory_id, outcome, reason)
      WHERE i.job_id = $1 AND i.memory_id = o.memory_id`,
    [jobId, outcomes.map((o) => o.memoryId), outcomes.map((o) => o.outcome), outcomes.map((o) => o.reason ?? null)],
  );
}

/** A job's items with the memory's title while it still exists, at most `limit`, by id. */
export async function itemsOf(db: Queryable, jobId: string, limit: number): Promise<ItemRow[]> {
  const { rows } = await db.query<ItemRow>(
    `SELECT i.*, m.title FROM hive.compliance_items i LEFT JOIN hive.memories m ON m.id = i.memory_id
      WHERE i.job_id = $1 ORDER BY i.memory_id LIMIT $2`,
    [jobId, limit],
  );
  return rows;
}

export type ItemCount = Pick<ItemRow, 'action' | 'outcome' | 'reason'> & { n: number };

export async function itemCounts(db: Queryable, jobId: string): Promise<ItemCount[]> {
  const { rows } = await db.query<ItemCount>(
    `SELECT action, outcome, reason, count(*)::int AS n FROM hive.compliance_items WHERE job_id = $1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    [jobId],
  );
  return rows;
}

// ---------------------------------------------------------------- the memories a page settles

export interface MemoryState {
  id: string;
  org_id: string;
  node_id: string;
  updated_at: Date;
  held: boolean;
  /** Retention: why it must stay now; erasure: why it is anonymised rather than deleted. */
  reason: string | null;
}

/** The memories of a retention page as they stand, locked. */
export async function lockForRetention(db: Queryable, ids: string[]): Promise<MemoryState[]> {
  const { rows } = await db.query<MemoryState>(
    `SELECT m.id, m.org_id, m.node_id, m.updated_at, ${HELD('n')} AS held, ${RETENTION_KEEP_REASON(HELD('n'))} AS reason
       FROM hive.memories m JOIN hive.nodes n ON n.id = m.node_id
      WHERE m.id = ANY($1::text[]) ORDER BY m.id FOR UPDATE OF m`,
    [ids],
  );
  return rows;
}

/** The memories of an erasure page as they stand for the person `personId`, locked. */
export async function lockForErasure(db: Queryable, ids: string[], personId: string): Promise<MemoryState[]> {
  const { rows } = await db.query<MemoryState>(
    `SELECT m.id, m.org_id, m.node_id, m.updated_at, ${HELD('n')} AS held, ${ANONYMISE_REASON('$2')} AS reason
       FROM hive.memories m JOIN hive.nodes n ON n.id = m.node_id
      WHERE m.id = ANY($1::text[]) ORDER BY m.id FOR UPDATE OF m`,
    [ids, personId],
  );
  return rows;
}

/** Deletes memories outright (their versions go with them); tasks and trait evidence about them lose the link. */
export async function deleteMemories(db: Queryable, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query(`UPDATE hive.tasks SET memory_id = NULL WHERE memory_id = ANY($1::text[])`, [ids]);
  await db.query(`UPDATE hive.trait_evidence SET memory_id = NULL WHERE memory_id = ANY($1::text[])`, [ids]);
  await db.query(`UPDATE hive.memories SET superseded_by = NULL WHERE superseded_by = ANY($1::text[])`, [ids]);
  await db.query(`DELETE FROM hive.memories WHERE id = ANY($1::text[])`, [ids]);
}

/** Takes the person's name (and token and source) off memories and every version of them they wrote; the content stays. */
export async function anonymiseMemories(db: Queryable, ids: string[], personId: string): Promise<void> {
  if (ids.length === 0) return;
  await db.query(
    `UPDATE hive.memories SET
        created_token  = CASE WHEN created_by = $2 THEN NULL ELSE created_token END,
        created_source = CASE WHEN created_by = $2 THEN NULL ELSE created_source END,
        created_by     = CASE WHEN created_by = $2 THEN NULL ELSE created_by END,
        updated_token  = CASE WHEN updated_by = $2 THEN NULL ELSE updated_token END,
        updated_source = CASE WHEN updated_by = $2 THEN NULL ELSE updated_source END,
        updated_by     = CASE WHEN updated_by = $2 THEN NULL ELSE updated_by END,
        verified_token = CASE WHEN verified_by = $2 THEN NULL ELSE verified_token END,
        verified_by    = CASE WHEN verified_by = $2 THEN NULL ELSE verified_by END,
        forgotten_token = CASE WHEN forgotten_by = $2 THEN NULL ELSE forgotten_token END,
        forgotten_by    = CASE WHEN forgotten_by = $2 THEN NULL ELSE forgotten_by END
      WHERE id = ANY($1::text[])`,
    [ids, personId],
  );
  await db.query(
    `UPDATE hive.memory_versions SET written_by = NULL, written_token = NULL, source = NULL WHERE memory_id = ANY($1::text[]) AND written_by = $2`,
    [ids, personId],
  );
}

// ---------------------------------------------------------------- the rest of an erasure

/** Whether any of the person's events in the organisation lies under an active hold. */
export async function personEventsHeld(db: Queryable, orgId: string, personId: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM hive.events e JOIN hive.nodes n ON n.id = e.node_id WHERE e.org_id = $1 AND e.person_id = $2 AND ${HELD('n')} LIMIT 1`,
    [orgId, personId],
  );
  return rows.length > 0;
}

/** Active holds covering any node where the person wrote a memory or an event. */
export async function holdsCoveringPerson(db: Queryable, orgId: string, personId: string): Promise<{ id: string; node_path: string }[]> {
  const { rows } = await db.query<{ id: string; node_path: string }>(
    `SELECT DISTINCT h.id, hn.name_path AS node_path
       FROM hive.legal_holds h JOIN hive.nodes hn ON hn.id = h.node_id
       JOIN hive.nodes n ON n.org_id = h.org_id AND (n.id = hn.id OR starts_with(n.path, hn.path || '/'))
      WHERE h.org_id = $1 AND h.lifted_at IS NULL
        AND (EXISTS (SELECT 1 FROM hive.memories m WHERE m.node_id = n.id AND (${WRITTEN_BY('$2')}))
          OR EXISTS (SELECT 1 FROM hive.events e WHERE e.node_id = n.id AND e.person_id = $2))
      ORDER BY h.id`,
    [orgId, personId],
  );
  return rows;
}

export async function countPersonData(db: Queryable, orgId: string, personId: string): Promise<{ events: number; traits: number; evidence: number }> {
  const { rows } = await db.query<{ events: number; traits: number; evidence: number }>(
    `SELECT (SELECT count(*)::int FROM hive.events WHERE org_id = $1 AND person_id = $2) AS events,
            (SELECT count(*)::int FROM hive.traits WHERE org_id = $1 AND person_id = $2) AS traits,
            (SELECT count(*)::int FROM hive.trait_evidence te JOIN hive.traits t ON t.id = te.trait_id WHERE t.org_id = $1 AND te.recorded_by = $2 AND t.person_id <> $2) AS evidence`,
    [orgId, personId],
  );
  return rows[0]!;
}

/** Deletes up to `limit` of the person's events; answers how many went, grouped by node. */
export async function deletePersonEvents(db: Queryable, orgId: string, personId: string, limit: number): Promise<{ node_id: string; ids: string[] }[]> {
  const { rows } = await db.query<{ id: string; node_id: string }>(
    `SELECT id, node_id FROM hive.events WHERE org_id = $1 AND person_id = $2 ORDER BY id LIMIT $3 FOR UPDATE`,
    [orgId, personId, limit],
  );
  const ids = rows.map((row) => row.id);
  if (ids.length === 0) return [];
  await db.query(`UPDATE hive.trait_evidence SET event_id = NULL WHERE event_id = ANY($1::text[])`, [ids]);
  await db.query(`DELETE FROM hive.events WHERE id = ANY($1::text[])`, [ids]);
  const byNode = new Map<string, string[]>();
  for (const row of rows) byNode.set(row.node_id, [...(byNode.get(row.node_id) ?? []), row.id]);
  return [...byNode].map(([node_id, nodeIds]) => ({ node_id, ids: nodeIds }));
}

/**
 * The last of an erasure: the person's traits (their user model), evidence they recorded on
 * others' traits, and their name on tasks, sessions, nodes, grants and tokens they made.
 */
export async function erasePersonRemainder(db: Queryable, orgId: string, personId: string): Promise<{ traits: number; evidence: number; attributions: number }> {
  const traits = await db.query(`DELETE FROM hive.traits WHERE org_id = $1 AND person_id = $2`, [orgId, personId]);
  const evidence = await db.query(`DELETE FROM hive.trait_evidence te USING hive.traits t WHERE t.id = te.trait_id AND t.org_id = $1 AND te.recorded_by = $2`, [orgId, personId]);
  let attributions = 0;
  const statements = [
    `UPDATE hive.tasks SET created_by = NULL, created_token = NULL WHERE org_id = $1 AND created_by = $2`,
    `UPDATE hive.tasks SET closed_by = NULL, closed_token = NULL WHERE org_id = $1 AND closed_by = $2`,
    `UPDATE hive.tasks SET assignee_id = NULL WHERE org_id = $1 AND assignee_id = $2`,
    `UPDATE hive.sessions SET person_id = NULL WHERE org_id = $1 AND person_id = $2`,
    `UPDATE hive.nodes SET created_by = NULL WHERE org_id = $1 AND created_by = $2`,
    `UPDATE hive.role_grants rg SET granted_by = NULL FROM hive.nodes n WHERE n.id = rg.node_id AND n.org_id = $1 AND rg.granted_by = $2`,
    `UPDATE hive.tokens SET created_by = NULL WHERE org_id = $1 AND created_by = $2`,
  ];
  for (const statement of statements) attributions += (await db.query(statement, [orgId, personId])).rowCount ?? 0;
  return { traits: traits.rowCount ?? 0, evidence: evidence.rowCount ?? 0, attributions };
}

// ---------------------------------------------------------------- audit

export interface AuditEntry {
  orgId: string;
  nodeId: string;
  action: string;
  jobId?: string | null;
  personId: string | null;
  tokenId: string | null;
  detail?: Record<string, unknown>;
}

/** Whether an audit row already records the change `changeId` (a step run again finds it). */
export async function auditedChange(db: Queryable, orgId: string, changeId: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM hive.audit_log WHERE org_id = $1 AND detail->>'change' = $2 LIMIT 1`, [orgId, changeId]);
  return rows.length > 0;
}

export async function insertAudit(db: Queryable, entries: AuditEntry[]): Promise<void> {
  for (const entry of entries) {
    await db.query(
      `INSERT INTO hive.audit_log (id, org_id, node_id, action, job_id, person_id, token_id, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [newId('aud_'), entry.orgId, entry.nodeId, entry.action, entry.jobId ?? null, entry.personId, entry.tokenId, JSON.stringify(entry.detail ?? {})],
    );
  }
}

/**
 * Deletes up to `limit` audit rows older than the audit-row lifetime in force on their node (of
 * one organisation, or all: null), except under a legal hold; answers how many went.
 */
export async function deleteExpiredAudit(db: Queryable, orgId: string | null, at: Date, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM hive.audit_log WHERE id IN (
       SELECT a.id
         FROM (
           -- Each node's lifetime, unless it is held, worked out once per node rather than per row.
           SELECT n.id, coalesce(s.audit_row_days, $4) AS days
             FROM hive.nodes n LEFT JOIN LATERAL ${SETTINGS_IN_FORCE('n')} s ON true
            WHERE ($1::text IS NULL OR n.org_id = $1) AND NOT ${HELD('n')}
         ) life
         JOIN hive.audit_log a ON a.node_id = life.id
        WHERE a.created_at < $2::timestamptz - make_interval(days => life.days)
        LIMIT $3)`,
    [orgId, at, limit, DEFAULT_AUDIT_ROW_DAYS],
  );
  return rowCount ?? 0;
}

/**
 * Deletes up to `limit` completed jobs (their items with them) of one organisation, or all: null,
 * that finished longer ago than the audit-row lifetime in force on their organisation's root;
 * answers how many went. Queued and running jobs stay, whatever their age.
 */
export async function deleteExpiredJobs(db: Queryable, orgId: string | null, at: Date, except: string, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM hive.compliance_jobs WHERE id IN (
       SELECT j.id FROM hive.compliance_jobs j
         LEFT JOIN hive.nodes n ON n.org_id = j.org_id AND n.parent_id IS NULL
         LEFT JOIN LATERAL ${SETTINGS_IN_FORCE('n')} s ON true
        WHERE ($1::text IS NULL OR j.org_id = $1) AND j.status = 'completed' AND j.id <> $3
          AND j.finished_at < $2::timestamptz - make_interval(days => coalesce(s.audit_row_days, $5))
        LIMIT $4)`,
    [orgId, at, except, limit, DEFAULT_AUDIT_ROW_DAYS],
  );
  return rowCount ?? 0;
}

export async function rootNodeOf(db: Queryable, orgId: string): Promise<{ id: string; name_path: string }> {
  const { rows } = await db.query<{ id: string; name_path: string }>(`SELECT id, name_path FROM hive.nodes WHERE org_id = $1 AND parent_id IS NULL`, [orgId]);
  return rows[0]!;
}

export async function personInOrg(db: Queryable, orgId: string, ref: string): Promise<{ id: string; email: string } | undefined> {
  const { rows } = await db.query<{ id: string; email: string }>(`SELECT id, email FROM hive.people WHERE org_id = $1 AND (id = $2 OR email = $2)`, [orgId, ref]);
  return rows[0];
}

// ---------------------------------------------------------------- the embedding sweep

export interface UnembeddedRow {
  id: string;
  version: number;
}

/** The next memories after `after` (by id) with no vector of their current version from `model`. */
export async function unembeddedAfter(db: Queryable, orgId: string | null, after: string, model: string, limit: number): Promise<UnembeddedRow[]> {
  const { rows } = await db.query<UnembeddedRow>(
    `SELECT id, version FROM hive.memories
      WHERE ($1::text IS NULL OR org_id = $1) AND id > $2 AND forgotten_at IS NULL
        AND (embedded_version IS DISTINCT FROM version OR embedding_model IS DISTINCT FROM $3)
      ORDER BY id LIMIT $4`,
    [orgId, after, model, limit],
  );
  return rows;
}

/** Whether any live memory has waited `seconds` for the vector of its current version (its queued job was lost). */
export async function anyLeftUnembedded(db: Queryable, seconds: number): Promise<boolean> {
  const { rows } = await db.query<{ left: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM hive.memories
                     WHERE forgotten_at IS NULL AND embedded_version IS DISTINCT FROM version AND updated_at < now() - make_interval(secs => $1)) AS left`,
    [seconds],
  );
  return rows[0]!.left;
}

/** Events an erasure job deleted, as its audit rows record them. */
export async function auditedEventCount(db: Queryable, jobId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT coalesce(sum(jsonb_array_length(detail -> 'event_ids')), 0)::int AS n FROM hive.audit_log WHERE job_id = $1 AND action = 'erasure.events'`,
    [jobId],
  );
  return rows[0]!.n;
}
