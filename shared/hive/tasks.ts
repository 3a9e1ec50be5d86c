import type { Queryable } from '../db/pool.js';
import { withTransaction, type Db } from '../db/pool.js';
import { newId } from '../ids.js';
import { nodeWithRole, requireRank, type HiveCredential } from './access.js';
import { hiveError } from './errors.js';
import { memoryInReach } from './memory-repository.js';
import { requireNotSuspended } from './metering.js';
import type { TaskInput } from './schemas.js';
import * as repo from './task-repository.js';

/**
 * Tasks (POST /v1/task): open on a node until done or dropped. Readers list them and see what is
 * due; members add, close and snooze them. Snoozing moves the due date (the first one is kept);
 * a closed task stays closed: closing or snoozing it again is refused with 409.
 */
export async function taskAction(db: Db, credential: HiveCredential, input: TaskInput) {
  if (input.action !== 'list' && input.action !== 'due') await requireNotSuspended(db, credential.orgId);
  switch (input.action) {
    case 'add':
      return addTask(db, credential, input);
    case 'list':
      return listTasks(db, credential, { node: input.node, statuses: input.status === 'all' ? ['open', 'done', 'dropped'] : [input.status], assignee: input.assignee, dueBy: null, limit: input.limit });
    case 'due':
      return listTasks(db, credential, { node: input.node, statuses: ['open'], assignee: input.assignee, dueBy: new Date(Date.now() + input.within_hours * 3_600_000), limit: input.limit });
    case 'done':
    case 'drop':
      return closeTask(db, credential, input.id, input.action === 'done' ? 'done' : 'dropped', input.note);
    case 'snooze':
      return snoozeTask(db, credential, input.id, input.until ? new Date(input.until) : new Date(Date.now() + input.hours! * 3_600_000));
  }
}

async function addTask(db: Db, credential: HiveCredential, input: Extract<TaskInput, { action: 'add' }>) {
  const node = await nodeWithRole(db, credential, input.node, 'member');
  const assigneeId = input.assignee ? await assignee(db, credential, input.assignee) : null;
  if (input.memory) {
    const memory = await memoryInReach(db, credential.tokenId, input.memory);
    if (!memory || memory.forgotten_at) throw hiveError(404, `No memory ${input.memory}.`);
  }
  const id = newId('tsk_');
  await repo.insertTask(db, {
    id, orgId: node.org_id, nodeId: node.id, title: input.title, body: input.body, dueAt: input.due ?? null,
    assigneeId, memoryId: input.memory ?? null, personId: credential.personId, tokenId: credential.tokenId,
  });
  return formatTask((await repo.taskInReach(db, credential.tokenId, id))!);
}

export interface TaskListInput {
  node?: string;
  statuses: string[];
  assignee?: string;
  dueBy: Date | null;
  limit: number;
}

/** Tasks in the reach (or below `node`), newest first; with `dueBy`, open ones due by then, soonest first. */
export async function listTasks(db: Queryable, credential: HiveCredential, input: TaskListInput) {
  const path = input.node ? (await nodeWithRole(db, credential, input.node, 'reader')).path : null;
  const assigneeId = input.assignee ? await assignee(db, credential, input.assignee) : null;
  const rows = await repo.tasksInReach(db, credential.tokenId, { path, statuses: input.statuses, assigneeId, dueBy: input.dueBy, limit: input.limit });
  return { object: 'list', data: rows.map(formatTask) };
}

async function closeTask(db: Db, credential: HiveCredential, id: string, status: 'done' | 'dropped', note: string | undefined) {
  await withTransaction(db, async (client) => {
    const task = await openTask(client, credential, id);
    await repo.closeTask(client, task.id, { status, note: note ?? null, personId: credential.personId, tokenId: credential.tokenId });
  });
  return formatTask((await repo.taskInReach(db, credential.tokenId, id))!);
}

async function snoozeTask(db: Db, credential: HiveCredential, id: string, until: Date) {
  if (until.getTime() <= Date.now()) throw hiveError(400, 'until: a snooze ends in the future.');
  await withTransaction(db, async (client) => {
    const task = await openTask(client, credential, id);
    await repo.snoozeTask(client, task.id, until);
  });
  return formatTask((await repo.taskInReach(db, credential.tokenId, id))!);
}

/** An open task the caller may change, locked; 404 outside the reach (as for no task at all), 409 once closed. */
async function openTask(db: Queryable, credential: HiveCredential, id: string): Promise<repo.TaskRow> {
  const task = await repo.taskInReach(db, credential.tokenId, id, true);
  if (!task) throw hiveError(404, `No task ${id}.`);
  requireRank(task.rank, 'member', `node ${task.node_path}`);
  if (task.status !== 'open') throw hiveError(409, `Task ${id} is already ${task.status}.`);
  return task;
}

/** `me` (the token's person) or an address of the caller's organisation. */
async function assignee(db: Queryable, credential: HiveCredential, who: string): Promise<string> {
  if (who === 'me') {
    if (!credential.personId) throw hiveError(400, 'assignee: "me" needs a token of a person; this one carries a grant of its own.');
    return credential.personId;
  }
  const id = await repo.personInOrganisation(db, credential.orgId, who);
  if (!id) throw hiveError(404, `No person ${who} in this organisation.`);
  return id;
}

/** A task as routes answer it; `due` says whether it is due now. */
export function formatTask(task: Omit<repo.TaskRow, 'rank'>) {
  return {
    id: task.id,
    object: 'task',
    node: { id: task.node_id, path: task.node_path },
    title: task.title,
    body: task.body,
    status: task.status,
    due_at: task.due_at?.toISOString() ?? null,
    first_due_at: task.first_due_at?.toISOString() ?? null,
    due: task.status === 'open' && task.due_at !== null && task.due_at.getTime() <= Date.now(),
    snoozes: task.snoozes,
    assignee: task.assignee_id ? { id: task.assignee_id, email: task.assignee_email } : null,
    memory_id: task.memory_id,
    created: { by: task.created_by, token_id: task.created_token, at: task.created_at.toISOString() },
    closed: task.closed_at ? { by: task.closed_by, token_id: task.closed_token, at: task.closed_at.toISOString(), note: task.close_note } : null,
    updated_at: task.updated_at.toISOString(),
  };
}
