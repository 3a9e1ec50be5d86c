import type pg from 'pg';
import { REACH_CTE } from './repository.js';

/**
 * SQL of the export: server-side cursors (DECLARE … FETCH) over one REPEATABLE READ snapshot, so
 * a project of any size streams out a page at a time and every line comes from the same instant.
 * DECLARE takes no bind parameters: the token and the subtree are handed over as transaction-local
 * settings, and the reach is computed from them inside each cursor's query like any scoped read.
 */
const TOKEN = `current_setting('hive.export_token')`;
const PATH = `current_setting('hive.export_path')`;
const EXPORT_REACH = `WITH ${REACH_CTE.replaceAll('$1', TOKEN)},
  subtree AS (
    SELECT n.id, n.name_path FROM reach JOIN hive.nodes n ON n.id = reach.node_id
     WHERE n.path = ${PATH} OR starts_with(n.path, ${PATH} || '/')
  )`;

/** One cursor per kind of record, in the order the export writes them. */
export const EXPORT_CURSORS = {
  node: `SELECT n.id, n.name, n.name_path AS path, n.parent_id, n.depth, n.created_at, n.created_by
           FROM subtree s JOIN hive.nodes n ON n.id = s.id ORDER BY n.depth, n.name_path`,
  memory: `SELECT m.id, m.node_id, s.name_path AS node_path, m.scope, m.title, m.title_key, m.body, m.kind, m.pinned, m.version,
                  CASE WHEN m.forgotten_at IS NOT NULL THEN 'forgotten' WHEN m.superseded_by IS NOT NULL THEN 'superseded' ELSE 'active' END AS status,
                  m.superseded_by, m.created_at, m.created_by, m.created_token, m.created_source, m.updated_at, m.updated_by, m.updated_token,
                  m.updated_source, m.verified_at, m.verified_by, m.verified_token, m.forgotten_at, m.forgotten_by, m.forgotten_token,
                  m.embedding_model, m.embedded_version
             FROM subtree s JOIN hive.memories m ON m.node_id = s.id ORDER BY m.created_at, m.id`,
  memory_version: `SELECT v.memory_id, v.version, v.scope, v.title, v.body, v.kind, v.written_at, v.written_by, v.written_token, v.source, v.replaced_at
                     FROM subtree s JOIN hive.memories m ON m.node_id = s.id JOIN hive.memory_versions v ON v.memory_id = m.id
                    ORDER BY v.memory_id, v.version`,
  link: `SELECT 'supersedes' AS relation, m.superseded_by AS from_id, m.id AS to_id
           FROM subtree s JOIN hive.memories m ON m.node_id = s.id WHERE m.superseded_by IS NOT NULL
         UNION ALL
         SELECT 'task_about', t.id, t.memory_id FROM subtree s JOIN hive.tasks t ON t.node_id = s.id WHERE t.memory_id IS NOT NULL
         ORDER BY 1, 2, 3`,
  event: `SELECT e.id, e.node_id, s.name_path AS node_path, e.kind, e.text, e.data, e.person_id, e.token_id, e.created_at
            FROM subtree s JOIN hive.events e ON e.node_id = s.id ORDER BY e.created_at, e.id`,
  task: `SELECT t.id, t.node_id, s.name_path AS node_path, t.title, t.body, t.status, t.due_at, t.first_due_at, t.snoozes, t.assignee_id,
                t.memory_id, t.created_at, t.created_by, t.created_token, t.updated_at, t.closed_at, t.closed_by, t.closed_token, t.close_note
           FROM subtree s JOIN hive.tasks t ON t.node_id = s.id ORDER BY t.created_at, t.id`,
} as const;
export type ExportRecordType = keyof typeof EXPORT_CURSORS;

/** Starts the export's snapshot on `client`: read-only, one instant for every cursor. */
export async function beginExport(client: pg.PoolClient, tokenId: string, path: string): Promise<void> {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  await client.query(`SELECT set_config('hive.export_token', $1, true), set_config('hive.export_path', $2, true)`, [tokenId, path]);
}

/** Rows of one cursor, `pageSize` at a time, closed when read to the end (or abandoned with the transaction). */
export async function* cursorPages(client: pg.PoolClient, type: ExportRecordType, pageSize: number): AsyncGenerator<Record<string, unknown>[]> {
  const cursor = `hive_export_${type}`;
  await client.query(`DECLARE ${cursor} NO SCROLL CURSOR FOR ${EXPORT_REACH} ${EXPORT_CURSORS[type]}`);
  for (;;) {
    const { rows } = await client.query<Record<string, unknown>>(`FETCH ${pageSize} FROM ${cursor}`);
    if (rows.length === 0) break;
    yield rows;
    if (rows.length < pageSize) break;
  }
  await client.query(`CLOSE ${cursor}`);
}
