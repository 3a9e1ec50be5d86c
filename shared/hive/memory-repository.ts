import type { Queryable } from '../db/pool.js';
import { REACH_CTE } from './repository.js';
import type { MemoryKind } from './schemas.js';

/**
 * SQL of memories. Every read by id or by query starts from the token's reach (REACH_CTE, `$1`
 * the token id), so a memory outside it is never loaded: it is simply not there.
 */

export interface MemoryRow {
  id: string;
  org_id: string;
  node_id: string;
  node_path: string;
  scope: string;
  title: string;
  title_key: string;
  body: string;
  kind: MemoryKind;
  pinned: boolean;
  version: number;
  superseded_by: string | null;
  created_at: Date;
  created_by: string | null;
  created_token: string | null;
  created_source: string | null;
  updated_at: Date;
  updated_by: string | null;
  updated_token: string | null;
  updated_source: string | null;
  verified_at: Date | null;
  verified_by: string | null;
  verified_token: string | null;
  forgotten_at: Date | null;
  forgotten_by: string | null;
  forgotten_token: string | null;
  embedded_version: number | null;
  /** The caller's rank on the memory's node. */
  rank: number;
}

export const MEMORY_COLUMNS = `m.id, m.org_id, m.node_id, n.name_path AS node_path, m.scope, m.title, m.title_key, m.body, m.kind, m.pinned,
  m.version, m.superseded_by, m.created_at, m.created_by, m.created_token, m.created_source, m.updated_at, m.updated_by,
  m.updated_token, m.updated_source, m.verified_at, m.verified_by, m.verified_token, m.forgotten_at, m.forgotten_by,
  m.forgotten_token, m.embedded_version`;

/** One memory in the token's reach (a tombstone included), locked when asked. */
export async function memoryInReach(db: Queryable, tokenId: string, id: string, lock = false): Promise<MemoryRow | undefined> {
  const { rows } = await db.query<MemoryRow>(
    `WITH ${REACH_CTE}
     SELECT ${MEMORY_COLUMNS}, reach.rank
       FROM hive.memories m JOIN reach ON reach.node_id = m.node_id JOIN hive.nodes n ON n.id = m.node_id
      WHERE m.id = $2 ${lock ? 'FOR UPDATE OF m' : ''}`,
    [tokenId, id],
  );
  return rows[0];
}

/** Memories in the token's reach by id (lookups of several, as recall's resolution needs). */
export async function memoriesInReach(db: Queryable, tokenId: string, ids: string[]): Promise<MemoryRow[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<MemoryRow>(
    `WITH ${REACH_CTE}
     SELECT ${MEMORY_COLUMNS}, reach.rank
       FROM hive.memories m JOIN reach ON reach.node_id = m.node_id JOIN hive.nodes n ON n.id = m.node_id
      WHERE m.id = ANY($2::text[])`,
    [tokenId, ids],
  );
  return rows;
}

/** The live memory of an identity, locked (the caller has already checked its grant on the node). */
export async function memoryByIdentityForUpdate(db: Queryable, identity: { nodeId: string; scope: string; titleKey: string }): Promise<Omit<MemoryRow, 'rank'> | undefined> {
  const { rows } = await db.query<Omit<MemoryRow, 'rank'>>(
    `SELECT ${MEMORY_COLUMNS} FROM hive.memories m JOIN hive.nodes n ON n.id = m.node_id
      WHERE m.node_id = $1 AND m.scope = $2 AND m.title_key = $3 AND m.forgotten_at IS NULL
      FOR UPDATE OF m`,
    [identity.nodeId, identity.scope, identity.titleKey],
  );
  return rows[0];
}

/** Another live memory holding this identity (a rename's target), if any. */
export async function identityHolder(db: Queryable, identity: { nodeId: string; scope: string; titleKey: string }, except: string): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM hive.memories WHERE node_id = $1 AND scope = $2 AND title_key = $3 AND forgotten_at IS NULL AND id <> $4`,
    [identity.nodeId, identity.scope, identity.titleKey, except],
  );
  return rows[0]?.id;
}

/** Whether live memories point at this one as their replacement. */
export async function supersedesOthers(db: Queryable, id: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM hive.memories WHERE superseded_by = $1 AND forgotten_at IS NULL LIMIT 1`, [id]);
  return rows.length > 0;
}

/** Ids of the live memories this one replaced. */
export async function supersededIds(db: Queryable, id: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM hive.memories WHERE superseded_by = $1 AND forgotten_at IS NULL ORDER BY created_at`, [id]);
  return rows.map((row) => row.id);
}

export interface Authorship {
  personId: string | null;
  tokenId: string;
  source: string | null;
}

export interface NewMemory {
  id: string;
  orgId: string;
  nodeId: string;
  scope: string;
  title: string;
  titleKey: string;
  body: string;
  kind: MemoryKind;
  pinned: boolean;
}

/** Inserts a memory and answers its row as written; undefined when a live memory already holds the identity. */
export async function insertMemory(db: Queryable, memory: NewMemory, by: Authorship): Promise<Omit<MemoryRow, 'rank'> | undefined> {
  const { rows } = await db.query<Omit<MemoryRow, 'rank'>>({
    name: 'hive-insert-memory',
    text: `WITH m AS (
       INSERT INTO hive.memories (id, org_id, node_id, scope, title, title_key, body, kind, pinned,
                                  created_by, created_token, created_source, updated_by, updated_token, updated_source)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $10, $11, $12)
       ON CONFLICT (node_id, scope, title_key) WHERE forgotten_at IS NULL DO NOTHING
       RETURNING *
     )
     SELECT ${MEMORY_COLUMNS} FROM m JOIN hive.nodes n ON n.id = m.node_id`,
    values: [memory.id, memory.orgId, memory.nodeId, memory.scope, memory.title, memory.titleKey, memory.body, memory.kind, memory.pinned, by.personId, by.tokenId, by.source],
  });
  return rows[0];
}

export interface MemoryContent {
  scope: string;
  title: string;
  titleKey: string;
  body: string;
  kind: MemoryKind;
}

/**
 * A new version of a memory: the current one is kept in hive.memory_versions as it stood, the row
 * takes the new content, and its vector goes until the new content is embedded.
 */
export async function writeNewVersion(db: Queryable, id: string, content: MemoryContent, pinned: boolean, by: Authorship): Promise<number> {
  await db.query(
    `INSERT INTO hive.memory_versions (memory_id, version, scope, title, body, kind, written_at, written_by, written_token, source)
     SELECT id, version, scope, title, body, kind, updated_at, updated_by, updated_token, updated_source FROM hive.memories WHERE id = $1`,
    [id],
  );
  const { rows } = await db.query<{ version: number }>(
    `UPDATE hive.memories
        SET scope = $2, title = $3, title_key = $4, body = $5, kind = $6, pinned = $7, version = version + 1,
            updated_at = now(), updated_by = $8, updated_token = $9, updated_source = $10,
            embedding = NULL, embedding_model = NULL, embedded_version = NULL
      WHERE id = $1 RETURNING version`,
    [id, content.scope, content.title, content.titleKey, content.body, content.kind, pinned, by.personId, by.tokenId, by.source],
  );
  return rows[0]!.version;
}

export async function setPinned(db: Queryable, id: string, pinned: boolean): Promise<void> {
  await db.query(`UPDATE hive.memories SET pinned = $2 WHERE id = $1`, [id, pinned]);
}

export async function markSuperseded(db: Queryable, ids: string[], by: string): Promise<void> {
  await db.query(`UPDATE hive.memories SET superseded_by = $2 WHERE id = ANY($1::text[])`, [ids, by]);
}

/** Forget: the content, its history and its vector go; the row stays as the tombstone (identity, who, when). */
export async function tombstone(db: Queryable, id: string, by: Authorship): Promise<void> {
  await db.query(`DELETE FROM hive.memory_versions WHERE memory_id = $1`, [id]);
  await db.query(
    `UPDATE hive.memories
        SET body = '', pinned = false, embedding = NULL, embedding_model = NULL, embedded_version = NULL,
            forgotten_at = now(), forgotten_by = $2, forgotten_token = $3
      WHERE id = $1`,
    [id, by.personId, by.tokenId],
  );
}

export async function markVerified(db: Queryable, id: string, by: Authorship): Promise<void> {
  await db.query(`UPDATE hive.memories SET verified_at = now(), verified_by = $2, verified_token = $3 WHERE id = $1`, [id, by.personId, by.tokenId]);
}

export interface VersionRow {
  version: number;
  scope: string;
  title: string;
  body: string;
  kind: MemoryKind;
  written_at: Date;
  written_by: string | null;
  written_token: string | null;
  source: string | null;
}

export async function versionsOf(db: Queryable, id: string): Promise<VersionRow[]> {
  const { rows } = await db.query<VersionRow>(
    `SELECT version, scope, title, body, kind, written_at, written_by, written_token, source
       FROM hive.memory_versions WHERE memory_id = $1 ORDER BY version DESC`,
    [id],
  );
  return rows;
}

export async function emailsOf(db: Queryable, personIds: string[]): Promise<Map<string, string>> {
  if (personIds.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; email: string }>(`SELECT id, email FROM hive.people WHERE id = ANY($1::text[])`, [personIds]);
  return new Map(rows.map((row) => [row.id, row.email]));
}

/** What the embedding job needs: the content of the version it was queued for, if still current. */
export async function contentToEmbed(db: Queryable, id: string): Promise<{ orgId: string; version: number; title: string; body: string; forgotten: boolean } | undefined> {
  const { rows } = await db.query<{ orgId: string; version: number; title: string; body: string; forgotten: boolean }>(
    `SELECT org_id AS "orgId", version, title, body, forgotten_at IS NOT NULL AS forgotten FROM hive.memories WHERE id = $1`,
    [id],
  );
  return rows[0];
}

/** Stores a vector for the version it was computed from; a newer version since then keeps none. */
export async function storeEmbedding(db: Queryable, id: string, version: number, model: string, vector: number[]): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE hive.memories SET embedding = $4::vector, embedding_model = $3, embedded_version = $2
      WHERE id = $1 AND version = $2 AND forgotten_at IS NULL`,
    [id, version, model, `[${vector.join(',')}]`],
  );
  return rowCount === 1;
}

/** Where a recall looks: the token's reach, narrowed by nodes, scope and kinds. */
export interface RecallReach {
  tokenId: string;
  /** Paths (`path` column) of the nodes to search below; null: the whole reach. */
  nodePaths: string[] | null;
  scope: string | null;
  kinds: string[] | null;
}

/** A memory one side of recall (text or meaning) ranked, with what the boosts read. */
export interface SideHit {
  id: string;
  /** 1 for the side's best match. */
  rnk: number;
  similarity: number | null;
  superseded_by: string | null;
  pinned: boolean;
  updated_at: Date;
  verified_at: Date | null;
}

/**
 * How many memories recall scores by their exact cosine after the sign-bit ranking: at least
 * SHORTLIST_FLOOR, else SHORTLIST_PER_PLACE for each place of the pool. Wider finds more of the
 * exact nearest (bench/hive.ts measures how many) at one out-of-line vector read per memory.
 */
const SHORTLIST_FLOOR = 200;
const SHORTLIST_PER_PLACE = 4;
export const shortlistSize = (pool: number): number => Math.max(SHORTLIST_FLOOR, SHORTLIST_PER_PLACE * pool);

/** How far a memory's sign signature (migration 032's generated column) is from that of the vector parameter `vector` (e.g. `$6`). */
export const signsDistanceSql = (vector: string): string =>
  `m.embedding_signs <%> (binary_quantize(${vector}::vector)::bit varying || binary_quantize((${vector}::vector - ${vector}::vector) - ${vector}::vector)::bit varying)`;

/** The reach's nodes under the recall's node paths (`$1` the token, `$2` the paths), and the filters every side applies (`$3` scope, `$4` kinds). */
const SCOPED_CTE = `${REACH_CTE},
     scoped AS (
       SELECT reach.node_id FROM reach JOIN hive.nodes n ON n.id = reach.node_id
        WHERE $2::text[] IS NULL OR EXISTS (SELECT 1 FROM unnest($2::text[]) p WHERE n.path = p OR starts_with(n.path, p || '/'))
     )`;
const RECALL_FILTERS = `m.forgotten_at IS NULL
    AND ($3::text IS NULL OR m.scope = $3 OR starts_with(m.scope, $3 || '/'))
    AND ($4::text[] IS NULL OR m.kind = ANY($4::text[]))`;
const reachParams = (reach: RecallReach) => [reach.tokenId, reach.nodePaths, reach.scope, reach.kinds];
const BOOST_COLUMNS = 'm.superseded_by, m.pinned, m.updated_at, m.verified_at';

/**
 * The best `pool` full-text matches inside the reach (websearch syntax: every word, "quoted
 * phrases", `or`, `-word`). Superseded memories are candidates too: the caller resolves them onto
 * what replaced them. The text index is searched once and its matches kept if their node is in
 * scope: joined to `scoped` (estimated at one row) the planner searched it once a node (100
 * searches, 23 of 32 ms at the bench's p95).
 */
export async function textHits(db: Queryable, reach: RecallReach, text: string, pool: number): Promise<SideHit[]> {
  const { rows } = await db.query<SideHit>(
    `WITH ${SCOPED_CTE}
     SELECT m.id, row_number() OVER (ORDER BY ts_rank_cd(m.search, q) DESC, m.id)::int AS rnk, NULL::float8 AS similarity, ${BOOST_COLUMNS}
       FROM hive.memories m, websearch_to_tsquery('english', $5) q
      WHERE ${RECALL_FILTERS} AND m.search @@ q AND m.node_id = ANY (ARRAY(SELECT node_id FROM scoped))
      ORDER BY rnk LIMIT $6`,
    [...reachParams(reach), text, pool],
  );
  return rows;
}

/**
 * The nearest `pool` memories above the similarity floor inside the reach, in two steps (migration
 * 032): the reachable memories embedded with the query's model, ordered by the Jaccard distance of
 * their sign signatures to the query's (read from an index alone), then the nearest few hundred
 * scored by their exact cosine. Only those few vectors are read.
 */
export async function meaningHits(db: Queryable, reach: RecallReach, search: { vector: number[]; model: string; meaningFloor: number; pool: number }): Promise<SideHit[]> {
  const { rows } = await db.query<SideHit>(
    `WITH ${SCOPED_CTE},
     shortlist AS (
       SELECT m.id
         FROM hive.memories m JOIN scoped s ON s.node_id = m.node_id
        WHERE m.embedding_model = $6 AND length(m.embedding_signs) = 2 * vector_dims($5::vector) AND ${RECALL_FILTERS}
        ORDER BY ${signsDistanceSql('$5')}, m.id
        LIMIT $9
     )
     SELECT id, row_number() OVER (ORDER BY similarity DESC, id)::int AS rnk, similarity, superseded_by, pinned, updated_at, verified_at
       FROM (SELECT m.id, 1 - (m.embedding <=> $5::vector) AS similarity, ${BOOST_COLUMNS} FROM shortlist c JOIN hive.memories m ON m.id = c.id) v
      WHERE similarity >= $7
      ORDER BY rnk LIMIT $8`,
    [...reachParams(reach), `[${search.vector.join(',')}]`, search.model, search.meaningFloor, search.pool, shortlistSize(search.pool)],
  );
  return rows;
}
