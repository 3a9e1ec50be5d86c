import type { Queryable } from '../db/pool.js';
import type { ProfileRule } from './dynamic-profiles.js';

/** SQL of the developer's own model definitions: slot aliases and dynamic profiles (migration 012). */
export interface SlotRow {
  name: string;
  target: string;
  description: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface ProfileRow {
  name: string;
  description: string | null;
  rules: ProfileRule[];
  default_model: string;
  created_at: Date;
  updated_at: Date;
}

const SLOT_COLUMNS = 'name, target, description, created_at, updated_at';
const PROFILE_COLUMNS = 'name, description, rules, default_model, created_at, updated_at';

/** Creates or replaces a slot; `created` says which. */
export async function upsertSlot(q: Queryable, developerId: string, name: string, values: { target: string; description: string | null }): Promise<SlotRow & { created: boolean }> {
  const { rows } = await q.query<SlotRow & { created: boolean }>(
    `INSERT INTO model_slots (developer_id, name, target, description) VALUES ($1, $2, $3, $4)
     ON CONFLICT (developer_id, name) DO UPDATE SET target = EXCLUDED.target, description = EXCLUDED.description, updated_at = now()
     RETURNING ${SLOT_COLUMNS}, (xmax = 0) AS created`,
    [developerId, name, values.target, values.description],
  );
  return rows[0]!;
}

export async function findSlot(q: Queryable, developerId: string, name: string): Promise<SlotRow | undefined> {
  const { rows } = await q.query<SlotRow>(`SELECT ${SLOT_COLUMNS} FROM model_slots WHERE developer_id = $1 AND name = $2`, [developerId, name]);
  return rows[0];
}

export async function deleteSlot(q: Queryable, developerId: string, name: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM model_slots WHERE developer_id = $1 AND name = $2', [developerId, name]);
  return (rowCount ?? 0) > 0;
}

/** In name order, seeking past `after`; `limit + 1` rows are asked for by the caller. */
export async function listSlots(q: Queryable, developerId: string, after: string | undefined, limit: number): Promise<SlotRow[]> {
  const { rows } = await q.query<SlotRow>(
    `SELECT ${SLOT_COLUMNS} FROM model_slots WHERE developer_id = $1 AND ($2::text IS NULL OR name > $2) ORDER BY name LIMIT $3`,
    [developerId, after ?? null, limit],
  );
  return rows;
}

export async function upsertProfile(
  q: Queryable,
  developerId: string,
  name: string,
  values: { description: string | null; rules: ProfileRule[]; default_model: string },
): Promise<ProfileRow & { created: boolean }> {
  const { rows } = await q.query<ProfileRow & { created: boolean }>(
    `INSERT INTO dynamic_profiles (developer_id, name, description, rules, default_model) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (developer_id, name) DO UPDATE SET description = EXCLUDED.description, rules = EXCLUDED.rules, default_model = EXCLUDED.default_model, updated_at = now()
     RETURNING ${PROFILE_COLUMNS}, (xmax = 0) AS created`,
    [developerId, name, values.description, JSON.stringify(values.rules), values.default_model],
  );
  return rows[0]!;
}

export async function findProfile(q: Queryable, developerId: string, name: string): Promise<ProfileRow | undefined> {
  const { rows } = await q.query<ProfileRow>(`SELECT ${PROFILE_COLUMNS} FROM dynamic_profiles WHERE developer_id = $1 AND name = $2`, [developerId, name]);
  return rows[0];
}

export async function deleteProfile(q: Queryable, developerId: string, name: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM dynamic_profiles WHERE developer_id = $1 AND name = $2', [developerId, name]);
  return (rowCount ?? 0) > 0;
}

export async function listProfiles(q: Queryable, developerId: string, after: string | undefined, limit: number): Promise<ProfileRow[]> {
  const { rows } = await q.query<ProfileRow>(
    `SELECT ${PROFILE_COLUMNS} FROM dynamic_profiles WHERE developer_id = $1 AND ($2::text IS NULL OR name > $2) ORDER BY name LIMIT $3`,
    [developerId, after ?? null, limit],
  );
  return rows;
}
