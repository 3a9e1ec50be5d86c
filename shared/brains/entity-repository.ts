import type { Queryable } from '../db/pool.js';
import { likePrefix, scopeSql, type ScopeFilter } from './repository.js';

/** SQL of a brain's entity graph: entities, their links to entries and the edges between them (migrations/024_brain_learning.sql). */
export interface EntityRow {
  id: string;
  brain_id: string;
  scope: string;
  name: string;
  normalized: string;
  aliases: string[];
  created_at: Date;
  updated_at: Date;
}

/** An entity with the number of current entries linked to it. */
export interface ListedEntityRow extends EntityRow {
  entries: number;
}

/**
 * The entities of a scope that a new mention resolves to, locked: same normalized name, the name
 * among their aliases, or their name among the mention's aliases. Best match first.
 */
export async function matchingEntities(q: Queryable, brainId: string, scope: string, normalized: string, aliases: string[]): Promise<EntityRow[]> {
  const { rows } = await q.query<EntityRow>(
    `SELECT * FROM brain_entities
     WHERE brain_id = $1 AND scope = $2 AND (normalized = $3 OR $3 = ANY(aliases) OR normalized = ANY($4::text[]))
     ORDER BY (normalized = $3) DESC, ($3 = ANY(aliases)) DESC, created_at, id
     FOR UPDATE`,
    [brainId, scope, normalized, aliases],
  );
  return rows;
}

/** A new entity, or the one a concurrent writer inserted under the same name first (then undefined). */
export async function insertEntity(q: Queryable, entity: Pick<EntityRow, 'id' | 'brain_id' | 'scope' | 'name' | 'normalized' | 'aliases'>): Promise<EntityRow | undefined> {
  const { rows } = await q.query<EntityRow>(
    `INSERT INTO brain_entities (id, brain_id, scope, name, normalized, aliases) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (brain_id, scope, normalized) DO NOTHING RETURNING *`,
    [entity.id, entity.brain_id, entity.scope, entity.name, entity.normalized, entity.aliases],
  );
  return rows[0];
}

export async function setEntityAliases(q: Queryable, entityId: string, aliases: string[]): Promise<void> {
  await q.query(`UPDATE brain_entities SET aliases = $2, updated_at = now() WHERE id = $1`, [entityId, aliases]);
}

export async function linkEntity(q: Queryable, brainId: string, entityId: string, entryId: string): Promise<void> {
  await q.query(`INSERT INTO brain_entity_links (brain_id, entity_id, entry_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [brainId, entityId, entryId]);
}

/** An edge as first stated: a restatement (by this entry or another) leaves it as it is. */
export async function insertEdge(q: Queryable, brainId: string, edge: { from: string; relation: string; to: string; entryId: string }): Promise<void> {
  await q.query(
    `INSERT INTO brain_edges (brain_id, from_entity, relation, to_entity, entry_id) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
    [brainId, edge.from, edge.relation, edge.to, edge.entryId],
  );
}

/** The current entries linked to an entity, counted. */
const LINKED_ENTRIES = `(SELECT count(*) FROM brain_entity_links l
    JOIN brain_entries x ON x.brain_id = l.brain_id AND x.entry_id = l.entry_id AND x.valid_to IS NULL
    WHERE l.entity_id = e.id)::int AS entries`;

/** Entities at or below `scope`, optionally only those a normalized name or alias resolves to, by scope then name. */
export async function listEntities(q: Queryable, brainId: string, scope: string, normalized: string | null, limit: number, offset: number): Promise<ListedEntityRow[]> {
  const { rows } = await q.query<ListedEntityRow>(
    `SELECT e.*, ${LINKED_ENTRIES} FROM brain_entities e
     WHERE e.brain_id = $1 AND ($2 = '/' OR e.scope = $2 OR e.scope LIKE $3)
       AND ($4::text IS NULL OR e.normalized = $4 OR $4 = ANY(e.aliases))
     ORDER BY e.scope, e.normalized, e.id LIMIT $5 OFFSET $6`,
    [brainId, scope, `${likePrefix(scope)}/%`, normalized, limit + 1, offset],
  );
  return rows;
}

export async function findEntity(q: Queryable, brainId: string, entityId: string): Promise<ListedEntityRow | undefined> {
  const { rows } = await q.query<ListedEntityRow>(`SELECT e.*, ${LINKED_ENTRIES} FROM brain_entities e WHERE e.brain_id = $1 AND e.id = $2`, [brainId, entityId]);
  return rows[0];
}

export interface EntityRelationRow {
  direction: 'to' | 'from';
  relation: string;
  id: string;
  name: string;
}

/** An entity's edges: those it states (to another entity) first, then those naming it (from another). */
export async function entityRelations(q: Queryable, brainId: string, entityId: string): Promise<EntityRelationRow[]> {
  const { rows } = await q.query<EntityRelationRow>(
    `SELECT 'to' AS direction, g.relation, t.id, t.name FROM brain_edges g JOIN brain_entities t ON t.id = g.to_entity
     WHERE g.brain_id = $1 AND g.from_entity = $2
     UNION ALL
     SELECT 'from' AS direction, g.relation, f.id, f.name FROM brain_edges g JOIN brain_entities f ON f.id = g.from_entity
     WHERE g.brain_id = $1 AND g.to_entity = $2
     ORDER BY direction DESC, relation, name, id`,
    [brainId, entityId],
  );
  return rows;
}

/** Entities in the recall's scopes whose normalized name or an alias is one of `names`. */
export async function entitiesNamed(q: Queryable, brainId: string, filter: ScopeFilter, names: string[]): Promise<EntityRow[]> {
  const scopes = scopeSql(filter, 3, 'e.scope');
  const { rows } = await q.query<EntityRow>(
    `SELECT e.* FROM brain_entities e
     WHERE e.brain_id = $1 AND (e.normalized = ANY($2::text[]) OR e.aliases && $2::text[]) AND ${scopes.sql}
     ORDER BY e.scope, e.normalized, e.id`,
    [brainId, names, ...scopes.params],
  );
  return rows;
}

/**
 * In one query, what the graph factor of a recall needs: whether any entity in the recall's
 * scopes is among `names`, the entries linked to those entities, and the entries linked to an
 * entity one edge away from one of them (either direction).
 */
export async function namedEntityLinks(q: Queryable, brainId: string, filter: ScopeFilter, names: string[]): Promise<{ named: boolean; namedEntries: string[]; neighbourEntries: string[] }> {
  const scopes = scopeSql(filter, 3, 'e.scope');
  // Named, so each connection plans each of the three scope filters' texts once: planned afresh,
  // it took 0.5 ms of PostgreSQL's CPU a recall (pg_stat_statements), ten times its execution.
  const { rows } = await q.query<{ named: boolean; named_entries: string[]; neighbour_entries: string[] }>({
    name: `brain-named-entity-links-${scopes.params.length}`,
    text: `WITH named AS (
       SELECT e.id FROM brain_entities e
       WHERE e.brain_id = $1 AND (e.normalized = ANY($2::text[]) OR e.aliases && $2::text[]) AND ${scopes.sql}
     ), neighbours AS (
       SELECT g.to_entity AS id FROM brain_edges g WHERE g.brain_id = $1 AND g.from_entity IN (SELECT id FROM named)
       UNION
       SELECT g.from_entity FROM brain_edges g WHERE g.brain_id = $1 AND g.to_entity IN (SELECT id FROM named)
     )
     SELECT EXISTS (SELECT 1 FROM named) AS named,
       ARRAY(SELECT DISTINCT l.entry_id FROM brain_entity_links l WHERE l.entity_id IN (SELECT id FROM named)) AS named_entries,
       ARRAY(SELECT DISTINCT l.entry_id FROM brain_entity_links l WHERE l.entity_id IN (SELECT id FROM neighbours)) AS neighbour_entries`,
    values: [brainId, names, ...scopes.params],
  });
  const row = rows[0]!;
  return { named: row.named, namedEntries: row.named_entries, neighbourEntries: row.neighbour_entries };
}

/** The entities a forget names, locked: by id, or (any scope) by normalized name or alias. */
export async function entitiesToForget(q: Queryable, brainId: string, by: { id: string } | { normalized: string }): Promise<string[]> {
  const { rows } = 'id' in by
    ? await q.query<{ id: string }>(`SELECT id FROM brain_entities WHERE brain_id = $1 AND id = $2 ORDER BY id FOR UPDATE`, [brainId, by.id])
    : await q.query<{ id: string }>(`SELECT id FROM brain_entities WHERE brain_id = $1 AND (normalized = $2 OR $2 = ANY(aliases)) ORDER BY id FOR UPDATE`, [brainId, by.normalized]);
  return rows.map((row) => row.id);
}

/** Deletes entities; their links and edges go with them (foreign keys cascade). */
export async function deleteEntities(q: Queryable, brainId: string, entityIds: string[]): Promise<void> {
  if (entityIds.length === 0) return;
  await q.query(`DELETE FROM brain_entities WHERE brain_id = $1 AND id = ANY($2)`, [brainId, entityIds]);
}
