import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';

/** All SQL of files. Every query is filtered by developer: another developer's file is simply not found. */

export interface FileRow {
  id: string;
  developer_id: string;
  purpose: string;
  filename: string;
  bytes: string;
  sha256: string;
  storage_key: string;
  created_at: Date;
}

const COLUMNS = 'id, developer_id, purpose, filename, bytes, sha256, storage_key, created_at';

export interface NewFile {
  id: string;
  purpose: string;
  filename: string;
  bytes: number;
  sha256: string;
  storageKey: string;
}

export async function insertFile(q: Queryable, developerId: string, file: NewFile): Promise<FileRow> {
  const { rows } = await q.query<FileRow>(
    `INSERT INTO files (id, developer_id, purpose, filename, bytes, sha256, storage_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (id) DO UPDATE SET bytes = EXCLUDED.bytes, sha256 = EXCLUDED.sha256
     RETURNING ${COLUMNS}`,
    [file.id, developerId, file.purpose, file.filename, file.bytes, file.sha256, file.storageKey],
  );
  return rows[0]!;
}

export async function findFile(q: Queryable, developerId: string, id: string): Promise<FileRow | undefined> {
  const { rows } = await q.query<FileRow>(`SELECT ${COLUMNS} FROM files WHERE developer_id = $1 AND id = $2 AND deleted_at IS NULL`, [developerId, id]);
  return rows[0];
}

/** The developer's live files among `ids`, by id. */
export async function findFiles(q: Queryable, developerId: string, ids: string[]): Promise<Map<string, FileRow>> {
  const { rows } = await q.query<FileRow>(`SELECT ${COLUMNS} FROM files WHERE developer_id = $1 AND id = ANY($2) AND deleted_at IS NULL`, [developerId, ids]);
  return new Map(rows.map((row) => [row.id, row]));
}

/** Newest first, as callers polling their uploads expect. */
export async function listFiles(q: Queryable, developerId: string, page: { limit: number; after: CursorPosition | undefined }, purpose: string | undefined): Promise<FileRow[]> {
  const { rows } = await q.query<FileRow>(
    `SELECT ${COLUMNS} FROM files
     WHERE developer_id = $1 AND deleted_at IS NULL
       AND ($2::text IS NULL OR purpose = $2)
       AND ($3::text IS NULL OR (created_at, id) < (SELECT f.created_at, f.id FROM files f WHERE f.developer_id = $1 AND f.id = $3))
     ORDER BY created_at DESC, id DESC
     LIMIT $4`,
    [developerId, purpose ?? null, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

export async function markFileDeleted(q: Queryable, developerId: string, id: string): Promise<FileRow | undefined> {
  const { rows } = await q.query<FileRow>(
    `UPDATE files SET deleted_at = now() WHERE developer_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [developerId, id],
  );
  return rows[0];
}
