import type { z } from 'zod';
import type { Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import type { QueryGraph } from '../scoring/composite.js';
import { brainOf, type BrainServices } from './brains.js';
import * as entityRepo from './entity-repository.js';
import type { ScopeFilter } from './repository.js';
import type { entityListQuery } from './schemas.js';

/**
 * A brain's entities (spec 2): the people, things and places its memories name, extracted by the
 * learn pass and unique per brain and scope under a normalised name (case, whitespace, leading
 * articles, a possessive, surrounding punctuation). Other spellings resolve through aliases.
 * Entries link to the entities they mention; edges relate entities as an entry stated. Recall's
 * graph factor favours entries linked to the entities a query names, and forget by entity erases
 * an entity with everything linked to it.
 */
const PAGE = { defaultLimit: 100, maxLimit: 500 };
/** The longest name a query is searched for, in words. */
const MAX_NAME_WORDS = 4;
const ENTITY_ID = /^bent_[0-9A-Za-z]{24}$/;

const LEADING_PUNCTUATION = /^[\s"'`“”‘’«»‹›([{<¡¿,;:*_]+/u;
const TRAILING_PUNCTUATION = /[\s"'`“”‘’«»‹›)\]}>.,;:!?*_]+$/u;
const LEADING_ARTICLE = /^(?:the|a|an) (?=\S)/u;
const POSSESSIVE = /(?<=\S)['’]s$/u;

/** The form names are compared in: NFKC, lower case, single spaces, no leading article, possessive or surrounding punctuation. */
export function normalizeEntityName(name: string): string {
  let text = name.normalize('NFKC').toLowerCase().replace(/\s+/gu, ' ').trim();
  for (let previous = ''; previous !== text; ) {
    previous = text;
    text = text.replace(LEADING_PUNCTUATION, '').replace(TRAILING_PUNCTUATION, '').replace(LEADING_ARTICLE, '').replace(POSSESSIVE, '');
  }
  return text;
}

export interface EntityMention {
  name: string;
  aliases?: string[];
}

export interface EntityRelation {
  from: string;
  relation: string;
  to: string;
}

/**
 * Files what one entry mentions (the learn pass calls it in its transaction, for each memory it
 * writes): each entity is found in (brain, scope) by its normalised name or an alias, else made;
 * aliases learned are merged; the entity is linked to the entry; and each relation whose ends
 * name entities of this call becomes an edge, stated by the entry. Idempotent. Returns the ids
 * of the entities linked, in the order of `entities`.
 */
export async function linkEntities(q: Queryable, brainId: string, scope: string, entryId: string, entities: EntityMention[], relations: EntityRelation[]): Promise<string[]> {
  const linked: string[] = [];
  /** Every normalised name and alias of this call's entities, to the entity it resolved to. */
  const byName = new Map<string, string>();
  for (const mention of entities) {
    const normalized = normalizeEntityName(mention.name);
    if (normalized === '') continue;
    const aliases = unique((mention.aliases ?? []).map(normalizeEntityName)).filter((alias) => alias !== '' && alias !== normalized);
    const entity = await resolveEntity(q, brainId, scope, displayName(mention.name), normalized, aliases);
    if (!linked.includes(entity.id)) linked.push(entity.id);
    await entityRepo.linkEntity(q, brainId, entity.id, entryId);
    for (const name of [entity.normalized, ...entity.aliases, normalized, ...aliases]) if (!byName.has(name)) byName.set(name, entity.id);
  }
  for (const stated of relations) {
    const from = byName.get(normalizeEntityName(stated.from));
    const to = byName.get(normalizeEntityName(stated.to));
    const relation = stated.relation.normalize('NFKC').toLowerCase().replace(/\s+/gu, ' ').trim();
    if (from === undefined || to === undefined || from === to || relation === '') continue;
    await entityRepo.insertEdge(q, brainId, { from, relation, to, entryId });
  }
  return linked;
}

/** The entity a mention names in (brain, scope), its aliases merged in; made when none matches. */
async function resolveEntity(q: Queryable, brainId: string, scope: string, name: string, normalized: string, aliases: string[]): Promise<entityRepo.EntityRow> {
  for (;;) {
    const existing = (await entityRepo.matchingEntities(q, brainId, scope, normalized, aliases))[0];
    if (existing) {
      const merged = unique([...existing.aliases, normalized, ...aliases]).filter((alias) => alias !== existing.normalized);
      if (merged.length !== existing.aliases.length) {
        await entityRepo.setEntityAliases(q, existing.id, merged);
        return { ...existing, aliases: merged };
      }
      return existing;
    }
    const inserted = await entityRepo.insertEntity(q, { id: newId('bent_'), brain_id: brainId, scope, name, normalized, aliases });
    // Undefined: another transaction made the same name meanwhile; it matches on the next look.
    if (inserted) return inserted;
  }
}

/**
 * Entities of the brain in the recall's scopes that the query names: whose normalised name or an
 * alias is a run of one to four whole words of the query.
 */
export async function entitiesNamedIn(q: Queryable, brainId: string, filter: ScopeFilter, queryText: string): Promise<entityRepo.EntityRow[]> {
  const names = namesIn(queryText);
  return names.length === 0 ? [] : entityRepo.entitiesNamed(q, brainId, filter, names);
}

/**
 * What recall's graph factor needs to know of a query, in one query: the entries linked to the
 * entities it names and to their neighbours; null when it names no entity of the brain.
 */
export async function queryGraph(q: Queryable, brainId: string, filter: ScopeFilter, queryText: string): Promise<QueryGraph | null> {
  const names = namesIn(queryText);
  if (names.length === 0) return null;
  const links = await entityRepo.namedEntityLinks(q, brainId, filter, names);
  if (!links.named) return null;
  return { named: new Set(links.namedEntries), neighbours: new Set(links.neighbourEntries) };
}

/** Each run of one to four whitespace-separated words of the text, normalised as a name. */
export function namesIn(text: string): string[] {
  const words = text.normalize('NFKC').toLowerCase().split(/\s+/u).filter((word) => word !== '');
  const names = new Set<string>();
  for (let start = 0; start < words.length; start++) {
    for (let length = 1; length <= MAX_NAME_WORDS && start + length <= words.length; length++) {
      const name = normalizeEntityName(words.slice(start, start + length).join(' '));
      if (name !== '') names.add(name);
    }
  }
  return [...names];
}

/** The entity ids a forget's `entity` names: an id, or a name (normalised, any scope); 404 when none. */
export async function entitiesToForget(q: Queryable, brainId: string, entity: string): Promise<string[]> {
  const normalized = normalizeEntityName(entity);
  const ids = ENTITY_ID.test(entity)
    ? await entityRepo.entitiesToForget(q, brainId, { id: entity })
    : normalized === '' ? [] : await entityRepo.entitiesToForget(q, brainId, { normalized });
  if (ids.length === 0) throw serviceError('not_found', { param: 'entity', message: 'No such entity in this brain.' });
  return ids;
}

export async function listEntities(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string, query: z.output<typeof entityListQuery>) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const limit = Math.min(query.limit ?? PAGE.defaultLimit, PAGE.maxLimit);
  const offset = query.offset ?? 0;
  const name = query.name === undefined ? null : normalizeEntityName(query.name);
  const rows = await entityRepo.listEntities(platform.db, brain.id, query.scope, name, limit, offset);
  return { object: 'list' as const, data: rows.slice(0, limit).map((row) => formatEntity(row)), has_more: rows.length > limit, limit, offset };
}

export async function getEntity(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string, entityId: string) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const entity = ENTITY_ID.test(entityId) ? await entityRepo.findEntity(platform.db, brain.id, entityId) : undefined;
  if (!entity) throw serviceError('not_found', { message: 'No such entity in this brain.' });
  const relations = await entityRepo.entityRelations(platform.db, brain.id, entity.id);
  return formatEntity(entity, relations);
}

function formatEntity(entity: entityRepo.ListedEntityRow, relations?: entityRepo.EntityRelationRow[]) {
  return {
    object: 'brain.entity' as const,
    id: entity.id,
    brain_id: entity.brain_id,
    scope: entity.scope,
    name: entity.name,
    aliases: entity.aliases,
    entries: entity.entries,
    ...(relations && {
      relations: relations.map((edge) => (edge.direction === 'to' ? { relation: edge.relation, to: { id: edge.id, name: edge.name } } : { relation: edge.relation, from: { id: edge.id, name: edge.name } })),
    }),
    created_at: entity.created_at.toISOString(),
    updated_at: entity.updated_at.toISOString(),
  };
}

/** The name as learning wrote it, in single spaces. */
const displayName = (name: string) => name.normalize('NFKC').replace(/\s+/gu, ' ').trim();
const unique = (values: string[]) => [...new Set(values)];
