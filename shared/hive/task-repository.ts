import type { Queryable } from '../db/pool.js';
import { REACH_CTE } from './repository.js';

/**
 * SQL of tasks. Reads start from the token's reach (REACH_CTE, `$1` the token id), so a task on a
 * node outside it is never loaded.
 */

export interface TaskRow {
  id: string;
  org_id: string;
  node_id: string;
  node_path: string;
  title: string;
  body: string;
  status: 'open' | 'done' | 'dropped';
  due_at: Date | null;
  first_due_at: Date | null;
  snoozes: number;
  assignee_id: string | null;
  assignee_email: string | null;
  memory_id: string | null;
  created_at: Date;
  created_by: string | null;
  created_token: string | null;
  updated_at: Date;
  closed_at: Date | null;
  closed_by: string | null;
  closed_token: string | null;
  close_note: string | null;
  /** The caller's rank on the task's node. */
  rank: number;
}

const TASK_COLUMNS = `t.id, t.org_id, t.node_id, n.name_path AS node_path, t.title, t.body, t.status, t.due_at, t.first_due_at,
  t.snoozes, t.assignee_id, a.email AS assignee_email, t.memory_id, t.created_at, t.created_by, t.created_token, t.updated_at,
  t.closed_at, t.closed_by, t.closed_token, t.close_note, reach.rank`;
const TASK_FROM = `hive.tasks t JOIN reach ON reach.node_id = t.node_id JOIN hive.nodes n ON n.id = t.node_id
  LEFT JOIN hive.people a ON a.id = t.assignee_id`;

export interface NewTask {
  id: string;
  orgId: string;
  nodeId: string;
  title: string;
  body: string;
  dueAt: string | null;
  assigneeId: string | null;
  memoryId: string | null;
  personId: string | null;
  tokenId: string;
}

export async function insertTask(db: Queryable, task: NewTask): Promise<void> {
  await db.query(
    `INSERT INTO hive.tasks (id, org_id, node_id, title, body, due_at, first_due_at, assignee_id, memory_id, created_by, created_token)
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9, $10)`,
    [task.id, task.orgId, task.nodeId, task.title, task.body, task.dueAt, task.assigneeId, task.memoryId, task.personId, task.tokenId],
  );
}

export async function taskInReach(db: Queryable, tokenId: string, id: string, lock = false): Promise<TaskRow | undefined> {
  const { rows } = await db.query<TaskRow>(`WITH ${REACH_CTE} SELECT ${TASK_COLUMNS} FROM ${TASK_FROM} WHERE t.id = $2 ${lock ? 'FOR UPDATE OF t' : ''}`, [tokenId, id]);
  return rows[0];
}

export interface TaskFilter {
  /** `path` of a node: it and what lies below it; null for the whole reach. */
  path: string | null;
  statuses: string[];
  assigneeId: string | null;
  /** Only open tasks due at or before this instant, soonest first; null: every task, newest first. */
  dueBy: Date | null;
  limit: number;
}

export async function tasksInReach(db: Queryable, tokenId: string, filter: TaskFilter): Promise<TaskRow[]> {
  const { rows } = await db.query<TaskRow>(
    `WITH ${REACH_CTE}
     SELECT ${TASK_COLUMNS} FROM ${TASK_FROM}
      WHERE ($2::text IS NULL OR n.path = $2 OR starts_with(n.path, $2 || '/'))
        AND t.status = ANY($3::text[])
        AND ($4::text IS NULL OR t.assignee_id = $4)
        AND ($5::timestamptz IS NULL OR t.due_at <= $5)
      ORDER BY CASE WHEN $5::timestamptz IS NULL THEN NULL ELSE t.due_at END ASC, t.created_at DESC, t.id
      LIMIT $6`,
    [tokenId, filter.path, filter.statuses, filter.assigneeId, filter.dueBy, filter.limit],
  );
  return rows;
}

export async function closeTask(db: Queryable, id: string, close: { status: 'done' | 'dropped'; note: string | null; personId: string | null; tokenId: string }): Promise<void> {
  await db.query(
    `UPDATE hive.tasks SET status = $2, close_note = $3, closed_at = now(), closed_by = $4, closed_token = $5, updated_at = now() WHERE id = $1`,
    [id, close.status, close.note, close.personId, close.tokenId],
  );
}

export async function snoozeTask(db: Queryable, id: string, until: Date): Promise<void> {
  await db.query(`UPDATE hive.tasks SET due_at = $2, snoozes = snoozes + 1, updated_at = now() WHERE id = $1`, [id, until]);
}

/** A person of the organisation by address (an assignee). */
export async function personInOrganisation(db: Queryable, orgId: string, email: string): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM hive.people WHERE org_id = $1 AND email = $2`, [orgId, email]);
  return rows[0]?.id;
}
