import type { Queryable } from '../db/pool.js';

/** The version of the hive's tables, as the last migration that changed them set it (migration 018 on). */
export async function readSchemaVersion(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ version: string }>('SELECT version FROM hive.schema_info');
  if (!rows[0]) throw new Error('hive.schema_info holds no version row');
  return rows[0].version;
}
