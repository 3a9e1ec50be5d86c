import type { Queryable } from '../db/pool.js';
import { REACH_CTE } from './repository.js';

/** SQL of the per-person user model: traits and the evidence each rests on. */

export interface TraitRow {
  id: string;
  trait: string;
  created_at: Date;
  updated_at: Date;
  evidence: { id: string; text: string; memory_id: string | null; event_id: string | null; source: string | null; recorded_at: string; recorded_by: string | null; recorded_token: string | null }[];
}

/** The trait of this text for the person, made if new; its id. */
export async function upsertTrait(db: Queryable, trait: { id: string; orgId: string; personId: string; trait: string; traitKey: string }): Promise<{ id: string; created: boolean }> {
  const { rows } = await db.query<{ id: string; created: boolean }>(
    `INSERT INTO hive.traits (id, org_id, person_id, trait, trait_key) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (person_id, trait_key) DO UPDATE SET trait = EXCLUDED.trait, updated_at = now()
     RETURNING id, (xmax = 0) AS created`,
    [trait.id, trait.orgId, trait.personId, trait.trait, trait.traitKey],
  );
  return rows[0]!;
}

export async function insertEvidence(
  db: Queryable,
  evidence: { id: string; traitId: string; text: string; memoryId: string | null; eventId: string | null; source: string | null; personId: string | null; tokenId: string },
): Promise<void> {
  await db.query(
    `INSERT INTO hive.trait_evidence (id, trait_id, text, memory_id, event_id, source, recorded_by, recorded_token) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [evidence.id, evidence.traitId, evidence.text, evidence.memoryId, evidence.eventId, evidence.source, evidence.personId, evidence.tokenId],
  );
}

/** Every trait of a person with its evidence, oldest evidence first. */
export async function traitsOfPerson(db: Queryable, personId: string, traitId?: string): Promise<TraitRow[]> {
  const { rows } = await db.query<TraitRow>(
    `SELECT t.id, t.trait, t.created_at, t.updated_at,
            coalesce((SELECT json_agg(json_build_object('id', e.id, 'text', e.text, 'memory_id', e.memory_id, 'event_id', e.event_id, 'source', e.source,
                                                        'recorded_at', e.recorded_at, 'recorded_by', e.recorded_by, 'recorded_token', e.recorded_token)
                                      ORDER BY e.recorded_at, e.id)
                        FROM hive.trait_evidence e WHERE e.trait_id = t.id), '[]'::json) AS evidence
       FROM hive.traits t
      WHERE t.person_id = $1 AND ($2::text IS NULL OR t.id = $2)
      ORDER BY t.created_at, t.id`,
    [personId, traitId ?? null],
  );
  return rows;
}

export async function deleteTrait(db: Queryable, personId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM hive.traits WHERE id = $2 AND person_id = $1`, [personId, id]);
  return rowCount === 1;
}

/** Whether an event lies in the token's reach (evidence may point at one). */
export async function eventInReach(db: Queryable, tokenId: string, id: string): Promise<boolean> {
  const { rows } = await db.query(`WITH ${REACH_CTE} SELECT 1 FROM hive.events e JOIN reach ON reach.node_id = e.node_id WHERE e.id = $2`, [tokenId, id]);
  return rows.length > 0;
}
