import type { QueryResult } from 'pg';
import { partitionName } from '../db/partitions.js';
import { withTransaction, type Db, type Queryable } from '../db/pool.js';
import { vectorCast } from '../vector-stores/repository.js';
import type { MemoryPolicy } from './policy.js';
import type { OwnerSource } from './row-cache.js';

/** SQL of brains, their entry versions and chunks (migrations/022_brains.sql). */
export interface BrainRow {
  id: string;
  developer_id: string;
  name: string;
  embedding_model: string;
  embedding_dims: number;
  encryption: 'none' | 'standard' | 'strict';
  wrapped_data_key: Buffer | null;
  tuning: 'auto' | 'manual';
  autotune_frozen: boolean;
  memory_policy: MemoryPolicy;
  active_space: number;
  write_seq: string;
  /** Grows when learning counts uses or autotune moves weights (caches of the brain's rows refresh on it). */
  usage_seq: string;
  /** Autotune's multiplier per tier over the taxonomy's weights (missing tiers: 1). */
  tier_multipliers: Partial<Record<'A' | 'B' | 'C' | 'D', number>>;
  prior_tier_multipliers: Partial<Record<'A' | 'B' | 'C' | 'D', number>> | null;
  state: 'active' | 'deleting';
  created_at: Date;
  updated_at: Date;
}

export interface EntryRow {
  version_id: string;
  brain_id: string;
  entry_id: string;
  scope: string;
  class: 'reference' | 'memory' | 'policy';
  type: string | null;
  title: string | null;
  body: string | null;
  title_sealed: Buffer | null;
  body_sealed: Buffer | null;
  body_bytes: string;
  trust: 'high' | 'low';
  origin: 'native' | 'reference';
  source_mount_id: string | null;
  source: string | null;
  use_count: number;
  last_used: Date | null;
  created_at: Date;
  updated_at: Date;
  valid_from: Date;
  valid_to: Date | null;
  chunks: number;
}

/** A brain's ids are checked by the table's CHECK (brn_ and 24 base62 characters), so they are safe to name in DDL. */
const BRAIN_ID = /^brn_[0-9A-Za-z]{24}$/;
export const partitionOf = (brainId: string): string => partitionName('brain_chunks', brainId, BRAIN_ID, 4);

/**
 * HNSW over the current chunks of one space: as_of reads scan history exactly instead. A search
 * keeps `efSearch` candidates in its beam (or as many as it is asked for, up to pgvector's 1,000).
 * Recall ranks by the composite, so it reads deeper than a top 10 by cosine; at 30,000 entries
 * m 32 / ef_construction 128 / beam 300 gave recall@10 0.988 at p95 32.9 ms, against 0.958 at
 * 37.0 ms for m 16 / 64 / 500 (the graph costs 2.8 times as long to build). At 100,000 entries
 * m 16 / 128 over halfvec (vector stores' graph) built in 261-288 s against 869 s but needed a beam
 * of 700 for recall@10 0.978-0.987 (0.965 at 300), where this graph gives 0.98 to 0.985 at 300.
 * Built in memory (INDEX_BUILD_MEMORY_MB) with ef_construction 128, 100,000-entry graphs gave
 * 0.980 at 300 and 0.980 to 0.987 at 400, and a wider beam no longer helped (0.986 at 500): the
 * misses were near chunks that a walk reached only after its first beam (found 400 to 1,600 rows
 * in), the graph's paths to them too few. With ef_construction 256 the same brain gives 0.9975 at
 * 400 (0.9965 at 300, 0.9945 at 200) for a build of 101 s against 79 s, and an insert of about
 * 5 to 7 ms at 100,000 chunks. The beam stays 400: a recall's second draw reads it (nextDraw in
 * recall.ts), and at 300 more recalls walk on (p95 +1.3 to 3 ms, p50 -0.7 to 1.1 ms).
 */
export const BRAIN_HNSW = { m: 32, efConstruction: 256, efSearch: 400, firstDraw: 256 };

/**
 * A small space is searched with a narrower beam, and recall draws fewer chunks first. At 10,000
 * entries a beam of 100 and a first draw of 64 found 99.4 % of the top 8 that a beam of 300 and a
 * first draw of 256 found, at p50 11.5 ms against 18.6 and p95 17.2 against 23.9 (200 queries).
 * At 100,000 the narrower search was no faster (most recalls draw past 256 there) and a large
 * graph needs the wide beam for recall@10 0.98.
 */
export const SMALL_SPACE = { rows: 20_000, beam: 100, firstDraw: 64 };

/**
 * A chunk row that fits a page is stored as written, its vector uncompressed (migration 036):
 * every candidate a search returns has its cosine computed from the row, and a compressed vector
 * cost 8.2 us to open against 0.5 us whole.
 */
export const CHUNK_PARTITION_STORAGE = 'toast_tuple_target = 8160';

export async function insertBrain(q: Queryable, brain: Omit<BrainRow, 'active_space' | 'write_seq' | 'usage_seq' | 'tier_multipliers' | 'prior_tier_multipliers' | 'state' | 'created_at' | 'updated_at' | 'autotune_frozen'>, hnsw: boolean): Promise<BrainRow> {
  const { rows } = await q.query<BrainRow>(
    `INSERT INTO brains (id, developer_id, name, embedding_model, embedding_dims, encryption, wrapped_data_key, tuning, memory_policy)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
    [brain.id, brain.developer_id, brain.name, brain.embedding_model, brain.embedding_dims, brain.encryption, brain.wrapped_data_key, brain.tuning, JSON.stringify(brain.memory_policy)],
  );
  await q.query(`CREATE TABLE ${partitionOf(brain.id)} PARTITION OF brain_chunks FOR VALUES IN ('${brain.id}') WITH (${CHUNK_PARTITION_STORAGE})`);
  await q.query(`CREATE INDEX ON ${partitionOf(brain.id)} (space, version_id)`);
  if (hnsw) await createSpaceIndex(q, brain.id, 1, brain.embedding_dims);
  return rows[0]!;
}

export async function createSpaceIndex(q: Queryable, brainId: string, space: number, dims: number): Promise<void> {
  const { cast, ops } = vectorCast(dims);
  await q.query(
    `CREATE INDEX IF NOT EXISTS ${partitionOf(brainId)}_s${Number(space)}_hnsw ON ${partitionOf(brainId)} USING hnsw ((embedding::${cast}) ${ops})
     WITH (m = ${BRAIN_HNSW.m}, ef_construction = ${BRAIN_HNSW.efConstruction}) WHERE space = ${Number(space)} AND valid_to IS NULL`,
  );
}

export async function dropSpace(q: Queryable, brainId: string, space: number): Promise<void> {
  await dropSpaceIndex(q, brainId, space);
  await q.query(`DELETE FROM ${partitionOf(brainId)} WHERE space = $1`, [space]);
}

/** Takes the brain's chunk partition whole until the transaction ends (ACCESS EXCLUSIVE): readers of the brain wait too. */
export async function dropSpaceIndex(q: Queryable, brainId: string, space: number): Promise<void> {
  await q.query(`DROP INDEX IF EXISTS ${partitionOf(brainId)}_s${Number(space)}_hnsw`);
}

/**
 * A brain's writers serialize on its row with FOR NO KEY UPDATE: as strong among themselves as FOR
 * UPDATE, but not blocked by the key-share locks that inserts of its entries and chunks take, so a
 * long import (a materialize mount's transaction) that inserts first and locks the brain last
 * cannot deadlock with a writer that queued for the row in between.
 */
const BRAIN_LOCK = ' FOR NO KEY UPDATE';

export async function findBrain(q: Queryable, developerId: string, id: string, lock?: 'update'): Promise<BrainRow | undefined> {
  const { rows } = await q.query<BrainRow>(
    `SELECT * FROM brains WHERE id = $1 AND developer_id = $2 AND state = 'active'${lock ? BRAIN_LOCK : ''}`,
    [id, developerId],
  );
  return rows[0];
}

/**
 * The brain a recall reads (findBrain's row), and whether the brain has any entity. One that has
 * none gives every entry a graph factor of 1 whatever the query names, so its recall neither
 * takes the query's names apart nor looks them up: 280 names for a query of 75 words, a fifth of
 * what a recall allocated and a statement beside its embedding.
 */
export async function findRecalledBrain(q: Queryable, developerId: string, id: string): Promise<(BrainRow & { has_entities: boolean }) | undefined> {
  const { rows } = await q.query<BrainRow & { has_entities: boolean }>({
    name: 'brain-recalled',
    text: `SELECT b.*, EXISTS (SELECT 1 FROM brain_entities e WHERE e.brain_id = b.id) AS has_entities
           FROM brains b WHERE b.id = $1 AND b.developer_id = $2 AND b.state = 'active'`,
    values: [id, developerId],
  });
  return rows[0];
}

/** A brain by id alone (the workflow's activities know the brain from their job), unless it is being deleted. */
export async function activeBrainById(q: Queryable, id: string, lock?: 'update'): Promise<BrainRow | undefined> {
  const { rows } = await q.query<BrainRow>(`SELECT * FROM brains WHERE id = $1 AND state = 'active'${lock ? BRAIN_LOCK : ''}`, [id]);
  return rows[0];
}

export async function listBrains(q: Queryable, developerId: string, limit: number, offset: number): Promise<BrainRow[]> {
  const { rows } = await q.query<BrainRow>(
    `SELECT * FROM brains WHERE developer_id = $1 AND state = 'active' ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`,
    [developerId, limit + 1, offset],
  );
  return rows;
}

export async function updateBrain(q: Queryable, id: string, fields: { name?: string; encryption?: BrainRow['encryption']; wrapped_data_key?: Buffer | null; memory_policy?: MemoryPolicy; tuning?: string }): Promise<BrainRow> {
  const { rows } = await q.query<BrainRow>(
    `UPDATE brains SET name = coalesce($2, name),
       encryption = coalesce($3, encryption),
       wrapped_data_key = CASE WHEN $3::text IS NULL THEN wrapped_data_key ELSE $4 END,
       memory_policy = coalesce($5::jsonb, memory_policy),
       tuning = coalesce($6, tuning),
       updated_at = now()
     WHERE id = $1 RETURNING *`,
    [id, fields.name ?? null, fields.encryption ?? null, fields.wrapped_data_key ?? null, fields.memory_policy ? JSON.stringify(fields.memory_policy) : null, fields.tuning ?? null],
  );
  return rows[0]!;
}

export async function markDeleting(q: Queryable, id: string): Promise<void> {
  await q.query(`UPDATE brains SET state = 'deleting', updated_at = now() WHERE id = $1`, [id]);
}

/** Removes a deleting brain's content: its partition, then its rows (entries and jobs cascade). */
export async function purgeBrain(q: Queryable, id: string): Promise<void> {
  await q.query(`DROP TABLE IF EXISTS ${partitionOf(id)}`);
  await q.query(`DELETE FROM brains WHERE id = $1 AND state = 'deleting'`, [id]);
}

export async function hasEntries(q: Queryable, brainId: string): Promise<boolean> {
  const { rows } = await q.query(`SELECT 1 FROM brain_entries WHERE brain_id = $1 LIMIT 1`, [brainId]);
  return rows.length > 0;
}

/** Current memories of these types: what a policy change re-ranks. */
export async function countMemoriesOfTypes(q: Queryable, brainId: string, types: string[]): Promise<number> {
  const { rows } = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM brain_entries WHERE brain_id = $1 AND valid_to IS NULL AND class = 'memory' AND type = ANY($2)`,
    [brainId, types],
  );
  return rows[0]!.n;
}

export async function bumpWriteSeq(q: Queryable, brainId: string): Promise<void> {
  await q.query(`UPDATE brains SET write_seq = write_seq + 1 WHERE id = $1`, [brainId]);
}

export async function currentEntry(q: Queryable, brainId: string, entryId: string, lock?: 'update'): Promise<EntryRow | undefined> {
  const { rows } = await q.query<EntryRow>(
    `SELECT * FROM brain_entries WHERE brain_id = $1 AND entry_id = $2 AND valid_to IS NULL${lock ? ' FOR UPDATE' : ''}`,
    [brainId, entryId],
  );
  return rows[0];
}

/** Current entries' titles (as stored: sealed or not) and the normalised names of the entities linked to each: what finds a pack row's native twin. */
export async function currentTitlesAndNames(q: Queryable, brainId: string, entryIds: string[]): Promise<(Pick<EntryRow, 'entry_id' | 'title' | 'title_sealed'> & { names: string[] })[]> {
  const { rows } = await q.query({
    name: 'brain-current-titles-and-names',
    text: `SELECT e.entry_id, e.title, e.title_sealed,
             coalesce((SELECT array_agg(DISTINCT n) FROM brain_entity_links l JOIN brain_entities en ON en.id = l.entity_id, unnest(array_prepend(en.normalized, en.aliases)) AS n
                       WHERE l.brain_id = e.brain_id AND l.entry_id = e.entry_id), '{}') AS names
           FROM brain_entries e WHERE e.brain_id = $1 AND e.entry_id = ANY($2::text[]) AND e.valid_to IS NULL`,
    values: [brainId, entryIds],
  });
  return rows;
}

export async function nextVersionId(q: Queryable): Promise<string> {
  const { rows } = await q.query<{ id: string }>(`SELECT nextval('brain_entries_version_id_seq')::text AS id`);
  return rows[0]!.id;
}

export type NewEntryVersion = Omit<EntryRow, 'valid_from' | 'valid_to' | 'updated_at'>;

/** Writes a version valid from now; `created_at` is the entry's first write. */
export async function insertEntryVersion(q: Queryable, entry: NewEntryVersion): Promise<EntryRow> {
  const { rows } = await q.query<EntryRow>(
    `INSERT INTO brain_entries (version_id, brain_id, entry_id, scope, class, type, title, body, title_sealed, body_sealed, body_bytes, trust, origin,
       source_mount_id, source, use_count, last_used, created_at, updated_at, valid_from, chunks)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, now(), now(), $19) RETURNING *`,
    [
      entry.version_id, entry.brain_id, entry.entry_id, entry.scope, entry.class, entry.type, entry.title, entry.body, entry.title_sealed, entry.body_sealed,
      entry.body_bytes, entry.trust, entry.origin, entry.source_mount_id, entry.source, entry.use_count, entry.last_used, entry.created_at, entry.chunks,
    ],
  );
  return rows[0]!;
}

/** Ends a version (an update or delete): it stays readable as of the instants it was valid. */
export async function closeVersion(q: Queryable, brainId: string, versionId: string): Promise<void> {
  await q.query(`UPDATE brain_entries SET valid_to = now() WHERE version_id = $1 AND valid_to IS NULL`, [versionId]);
  await q.query(`UPDATE ${partitionOf(brainId)} SET valid_to = now() WHERE version_id = $1 AND valid_to IS NULL`, [versionId]);
}

export interface NewChunk {
  chunk_index: number;
  content: string | null;
  content_sealed: Buffer | null;
  /** pgvector text form, or null when sealed. */
  embedding: string | null;
  embedding_sealed: Buffer | null;
}

export async function insertChunks(q: Queryable, brainId: string, space: number, version: Pick<EntryRow, 'version_id' | 'entry_id' | 'scope'>, chunks: NewChunk[]): Promise<void> {
  const batch = 500;
  for (let start = 0; start < chunks.length; start += batch) {
    const slice = chunks.slice(start, start + batch);
    await q.query(
      `INSERT INTO ${partitionOf(brainId)} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)
       SELECT $1, $2, $3, c.chunk_index, $4, $5, c.content, c.content_sealed, c.embedding::vector, c.embedding_sealed, now()
       FROM unnest($6::int[], $7::text[], $8::bytea[], $9::text[], $10::bytea[]) AS c(chunk_index, content, content_sealed, embedding, embedding_sealed)`,
      [
        brainId, space, version.version_id, version.entry_id, version.scope,
        slice.map((chunk) => chunk.chunk_index), slice.map((chunk) => chunk.content), slice.map((chunk) => chunk.content_sealed),
        slice.map((chunk) => chunk.embedding), slice.map((chunk) => chunk.embedding_sealed),
      ],
    );
  }
}

/** A scope-only move: the new version gets the old one's chunks (every space) as they are, under its scope. */
export async function copyChunks(q: Queryable, brainId: string, fromVersion: string, to: Pick<EntryRow, 'version_id' | 'scope'>): Promise<void> {
  await q.query(
    `INSERT INTO ${partitionOf(brainId)} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)
     SELECT brain_id, space, $2, chunk_index, entry_id, $3, content, content_sealed, embedding, embedding_sealed, now()
     FROM ${partitionOf(brainId)} WHERE version_id = $1`,
    [fromVersion, to.version_id, to.scope],
  );
}

export async function listEntries(q: Queryable, brainId: string, filter: { scope?: string; class?: string }, limit: number, offset: number): Promise<EntryRow[]> {
  const { rows } = await q.query<EntryRow>(
    `SELECT * FROM brain_entries WHERE brain_id = $1 AND valid_to IS NULL
       AND ($2::text IS NULL OR scope = $2) AND ($3::text IS NULL OR class = $3)
     ORDER BY updated_at DESC, version_id DESC LIMIT $4 OFFSET $5`,
    [brainId, filter.scope ?? null, filter.class ?? null, limit + 1, offset],
  );
  return rows;
}

/** Scopes at or below `scope` that hold current entries, with their counts. */
export async function listScopes(q: Queryable, brainId: string, scope: string, limit: number, offset: number): Promise<{ scope: string; entries: number }[]> {
  const { rows } = await q.query<{ scope: string; entries: string }>(
    `SELECT scope, count(*) AS entries FROM brain_entries
     WHERE brain_id = $1 AND valid_to IS NULL AND ($2 = '/' OR scope = $2 OR scope LIKE $3)
     GROUP BY scope ORDER BY scope LIMIT $4 OFFSET $5`,
    [brainId, scope, `${likePrefix(scope)}/%`, limit + 1, offset],
  );
  return rows.map((row) => ({ scope: row.scope, entries: Number(row.entries) }));
}

/** A scope as a LIKE prefix (its _ and % escaped). */
export const likePrefix = (scope: string) => scope.replace(/[\\_%]/g, (char) => `\\${char}`);

export interface ChunkCandidate {
  version_id: string;
  chunk_index: number;
  entry_id: string;
  scope: string;
  cosine: number;
}

/** Where recall looks: these scopes exactly, and everything beneath `subtreeOf` when set. */
export interface ScopeFilter {
  scopes: string[];
  subtreeOf: string | null;
}

/** The same rule as scopeSql, for chunks ranked outside PostgreSQL (strict brains). */
export function scopeMatches(filter: ScopeFilter, scope: string): boolean {
  if (filter.subtreeOf === '/') return true;
  return filter.scopes.includes(scope) || (filter.subtreeOf !== null && scope.startsWith(`${filter.subtreeOf}/`));
}

/** The scope filter as SQL over `column` (a chunk's scope unless said), its parameters numbered from `firstParam`. */
export function scopeSql(filter: ScopeFilter, firstParam: number, column = 'c.scope'): { sql: string; params: unknown[] } {
  if (filter.subtreeOf === '/') return { sql: 'true', params: [] };
  if (filter.subtreeOf !== null) return { sql: `(${column} = ANY($${firstParam}) OR ${column} LIKE $${firstParam + 1})`, params: [filter.scopes, `${likePrefix(filter.subtreeOf)}/%`] };
  return { sql: `${column} = ANY($${firstParam})`, params: [filter.scopes] };
}

/**
 * A nearest-first search held open on its own connection, inside its own transaction, until
 * closed. `draw(total)` fetches what is missing of the first `total` rows (fewer when the search
 * has no more) and returns every row drawn so far, nearest first.
 */
export interface NearestCursor<Row extends { cosine: number }> {
  draw(total: number): Promise<Row[]>;
  /** How many to draw first: fewer in a small space. */
  firstDraw: number;
  /** The candidates the search's first walk holds (hnsw.ef_search): a draw up to it reads them; past it the walk goes on. */
  beam: number;
  /** The cursor's connection, for reads inside its transaction. */
  client: Queryable;
  close(): Promise<void>;
}

/**
 * Opens `select` (rows with a `cosine`, ordered by distance to the query, LIMIT included) as a
 * cursor over pgvector's iterative HNSW scan: a deeper draw resumes the graph walk where the last
 * batch stopped, where a second query with a larger LIMIT walked the graph again from its entry
 * point (p95 53.7 -> 28.1 ms at 100,000 entries). The LIMIT bounds the plan's cost too:
 * unbounded, the estimate passed PostgreSQL's JIT threshold and each search spent about 5 ms
 * compiling. `table`'s size picks the beam and the first draw (SMALL_SPACE). `exact` (a scan of
 * history, which has no graph) leaves the plan to PostgreSQL. With `prefetch` the first draw is
 * fetched as the cursor opens.
 */
export async function openNearestCursor<Row extends { cosine: number }>(
  db: Db,
  search: { table: string; select: string; params: unknown[]; exact?: boolean },
  options: { prefetch?: boolean } = {},
): Promise<NearestCursor<Row>> {
  const client = await db.connect();
  const drawn: Row[] = [];
  let exhausted = false;
  const take = (rows: Row[], wanted: number) => {
    exhausted = rows.length < wanted;
    for (const row of rows) drawn.push({ ...row, cosine: Number(row.cosine) });
    // An iterative scan returns its rows nearly in order; callers rely on exactly.
    drawn.sort((a, b) => b.cosine - a.cosine);
  };
  let firstDraw: number;
  let beam: number;
  try {
    // The HNSW index is the plan: without these PostgreSQL reads every row of the space through a
    // btree and sorts it whenever it asks for more than a few dozen (measured 32 ms against 4 ms at
    // 5,000 chunks). Where a space has no graph (a pack version built with its publish call, or one
    // whose index is still building) the scan and sort stay, their cost inflated by the disabled
    // plans past PostgreSQL's JIT threshold: JIT is off, or each search of a 1,000-chunk version
    // spent 220 ms compiling a 2 ms scan.
    const planner = search.exact ? '' : 'SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off;';
    const begin = `BEGIN; SET LOCAL jit = off; ${planner} SET LOCAL hnsw.iterative_scan = relaxed_order;`;
    // The space's size as last reckoned: then the transaction, its settings, the cursor and its
    // first draw go in one round trip (one simple query of several statements, the parameters
    // inlined as literals); else the size is reckoned first, in the transaction's own round trip.
    let opening = begin;
    let small: boolean;
    const known = spaceSizes.smallness(search.table);
    if (known === undefined) {
      const sized = (await client.query(
        `${begin} SELECT coalesce((${ESTIMATED_ROWS}), 'Infinity') <= ${SMALL_SPACE.rows} AS small FROM (SELECT ${client.escapeLiteral(search.table)} AS name) t`,
      )) as unknown as QueryResult<{ small: boolean }>[];
      small = sized.at(-1)!.rows[0]!.small;
      spaceSizes.remember(search.table, small);
      opening = '';
    } else {
      small = known;
    }
    firstDraw = small ? SMALL_SPACE.firstDraw : BRAIN_HNSW.firstDraw;
    beam = small ? SMALL_SPACE.beam : BRAIN_HNSW.efSearch;
    const statements = [
      opening,
      `SET LOCAL hnsw.ef_search = ${beam};`,
      `DECLARE nearest NO SCROLL CURSOR FOR ${inlineParameters(client, search.select, search.params)};`,
      options.prefetch ? `FETCH FORWARD ${firstDraw} FROM nearest` : '',
    ];
    const opened = (await client.query(statements.join(' '))) as unknown as QueryResult<Row>[];
    if (options.prefetch) take(opened.at(-1)!.rows, firstDraw);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
    throw error;
  }
  return {
    firstDraw,
    beam,
    client,
    async draw(total) {
      const wanted = Math.floor(total) - drawn.length;
      if (exhausted || wanted <= 0) return drawn.slice(0, total);
      const { rows } = await client.query<Row>(`FETCH FORWARD ${wanted} FROM nearest`);
      take(rows, wanted);
      return [...drawn];
    },
    // Read-only: COMMIT ends it, and a connection that cannot is dropped rather than reused.
    close: () => client.query('COMMIT').then(() => client.release(), (error: Error) => client.release(error)),
  };
}

/**
 * Whether each searched space is small (SMALL_SPACE.rows), as reckoned within the last minute:
 * a space grows or shrinks by writes, and a minute-old answer only picks a beam. Bounded: past
 * MAX_SPACES remembered it starts over.
 */
const spaceSizes = (() => {
  const TTL_MS = 60_000;
  const MAX_SPACES = 10_000;
  const sizes = new Map<string, { small: boolean; until: number }>();
  return {
    smallness(table: string): boolean | undefined {
      const known = sizes.get(table);
      return known && known.until > Date.now() ? known.small : undefined;
    },
    remember(table: string, small: boolean): void {
      if (sizes.size >= MAX_SPACES) sizes.clear();
      sizes.set(table, { small, until: Date.now() + TTL_MS });
    },
  };
})();

/**
 * A query vector as a search inlines it: made once per recall, however many searches (the brain's
 * own and each reference mount's) inline it, and not passed through the driver's escaping, which
 * a literal of numbers does not need: at 1,536 dimensions pgvector's toSql took about 0.3 ms and
 * each escape as long again, once for each of the two places a search names the query (stage marks
 * over 200 recalls at 100,000 entries: the native search's SQL built in 0.5 ms at p50, now 0.06).
 */
export class VectorLiteral {
  readonly sql: string;
  constructor(vector: readonly number[]) {
    // A number's text is digits, a sign, a point, an exponent, or NaN / Infinity (which pgvector refuses): never a quote.
    this.sql = `'[${vector.join(',')}]'`;
  }
}

/**
 * `sql` with each $n replaced by parameter n as a literal, for a statement sent in a simple query
 * (which takes no parameters): strings (escaped by the driver), arrays of strings, instants,
 * finite numbers and query vectors, which are all a search passes.
 */
function inlineParameters(client: { escapeLiteral(value: string): string }, sql: string, params: unknown[]): string {
  const literal = (value: unknown): string => {
    if (value instanceof VectorLiteral) return value.sql;
    if (typeof value === 'string') return client.escapeLiteral(value);
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
    if (value instanceof Date) return `${client.escapeLiteral(value.toISOString())}::timestamptz`;
    if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return `ARRAY[${value.map(literal).join(', ')}]::text[]`;
    throw new TypeError(`a search parameter of type ${typeof value} cannot be inlined`);
  };
  return sql.replace(/\$(\d+)/g, (_, n: string) => {
    if (Number(n) < 1 || Number(n) > params.length) throw new RangeError(`the search has no parameter $${n}`);
    return literal(params[Number(n) - 1]);
  });
}

/** The chunks nearest the query among the current chunks of a space (HNSW), or, as of an instant, among the chunks valid then (an exact scan: history has no index). */
export function openNearestChunks(db: Db, brain: Pick<BrainRow, 'id' | 'embedding_dims'>, space: number, query: VectorLiteral, filter: ScopeFilter, asOf: Date | null, most: number): Promise<NearestCursor<ChunkCandidate>> {
  const { cast } = vectorCast(brain.embedding_dims);
  const scopes = scopeSql(filter, 2);
  const at = 2 + scopes.params.length;
  const validity = asOf === null ? 'c.valid_to IS NULL' : `c.valid_from <= $${at} AND (c.valid_to IS NULL OR c.valid_to > $${at})`;
  return openNearestCursor<ChunkCandidate>(db, {
    table: partitionOf(brain.id),
    select: `SELECT c.version_id, c.chunk_index, c.entry_id, c.scope, 1 - (c.embedding::${cast} <=> $1::${cast}) AS cosine
       FROM ${partitionOf(brain.id)} c
       WHERE c.space = ${Number(space)} AND ${validity} AND ${scopes.sql}
       ORDER BY c.embedding::${cast} <=> $1::${cast} LIMIT ${Number(most)}`,
    params: [query, ...scopes.params, ...(asOf === null ? [] : [asOf])],
    exact: asOf !== null,
  }, { prefetch: true });
}

/**
 * Rows in the table `t.name` as the planner reckons them: the density of its last statistics (an
 * analyze, a vacuum or an index build) over its current size in blocks. Without statistics (a
 * partition written since its empty index was built, until autovacuum's first analyze) the density
 * is unknown, and so is the size: null, which searches as a large space does.
 */
const ESTIMATED_ROWS = `SELECT CASE WHEN c.relpages > 0 AND c.reltuples >= 0
                                   THEN c.reltuples / c.relpages * pg_relation_size(c.oid) / current_setting('block_size')::int END
                         FROM pg_class c WHERE c.oid = to_regclass(t.name)`;

export interface SealedChunk {
  version_id: string;
  chunk_index: number;
  entry_id: string;
  scope: string;
  embedding_sealed: Buffer;
}

/** A strict brain's sealed vectors in the recall's scopes as of an instant, to be opened and scored in the CPU pool. */
export async function sealedChunks(q: Queryable, brainId: string, space: number, filter: ScopeFilter, asOf: Date): Promise<SealedChunk[]> {
  const scopes = scopeSql(filter, 1);
  const at = 1 + scopes.params.length;
  const { rows } = await q.query<SealedChunk>(
    `SELECT c.version_id, c.chunk_index, c.entry_id, c.scope, c.embedding_sealed FROM ${partitionOf(brainId)} c
     WHERE c.space = ${Number(space)} AND c.valid_from <= $${at} AND (c.valid_to IS NULL OR c.valid_to > $${at}) AND ${scopes.sql}`,
    [...scopes.params, asOf],
  );
  return rows;
}

/** What recall ranks, filters and labels a hit by: an entry version's ranking fields, without its text. */
export type RankedVersion = Pick<EntryRow, 'version_id' | 'entry_id' | 'scope' | 'class' | 'type' | 'trust' | 'source_mount_id' | 'source' | 'use_count' | 'last_used' | 'created_at' | 'updated_at'>;

/** A RankedVersion's columns, its instants as epoch milliseconds: the driver's parse of 768 timestamps a draw took about 0.4 ms. */
const RANKED_COLUMNS = `version_id, entry_id, scope, class, type, trust, source_mount_id, source, use_count,
  (extract(epoch FROM last_used) * 1000)::float8 AS last_used_ms, (extract(epoch FROM created_at) * 1000)::float8 AS created_ms,
  (extract(epoch FROM updated_at) * 1000)::float8 AS updated_ms`;
type RankedRow = Omit<RankedVersion, 'last_used' | 'created_at' | 'updated_at'> & { last_used_ms: number | null; created_ms: number; updated_ms: number };

/** Each version spelled out: a rest and a spread of every row cost 1.4 ms of a 100,000-entry recall's CPU (profile). */
const rankedVersionsOf = (rows: RankedRow[]): Map<string, RankedVersion> =>
  new Map(
    rows.map((row) => [
      String(row.version_id),
      {
        version_id: row.version_id, entry_id: row.entry_id, scope: row.scope, class: row.class, type: row.type, trust: row.trust,
        source_mount_id: row.source_mount_id, source: row.source, use_count: row.use_count,
        last_used: row.last_used_ms === null ? null : new Date(row.last_used_ms), created_at: new Date(row.created_ms), updated_at: new Date(row.updated_ms),
      },
    ]),
  );

/**
 * A prepared statement (named, so each connection plans it once): recall reads a few hundred
 * versions each draw, and planning it afresh cost about a millisecond at 256 ids.
 */
export async function versionsByIds(q: Queryable, versionIds: string[]): Promise<Map<string, RankedVersion>> {
  if (versionIds.length === 0) return new Map();
  const { rows } = await q.query<RankedRow>({
    name: 'brain-ranked-versions',
    text: `SELECT ${RANKED_COLUMNS} FROM brain_entries WHERE version_id = ANY($1::bigint[])`,
    values: [versionIds],
  });
  return rankedVersionsOf(rows);
}

/** A brain's ranked versions as a cache keeps them whole (RowCache.keepWhole): all its current ones, and those whose use moved since a usage_seq. */
export const rankedVersionSource = (q: Queryable, brainId: string): OwnerSource<RankedVersion> => ({
  pages: (most) => currentVersionPages(q, brainId, most),
  changedSince: (since) => versionsUsedSince(q, brainId, since),
});

/** The brain's versions (current or not) whose use moved after its usage_seq was `since`: what a cache of its rows as of `since` must catch up on. */
export async function versionsUsedSince(q: Queryable, brainId: string, since: bigint): Promise<Map<string, RankedVersion>> {
  const { rows } = await q.query<RankedRow>({
    name: 'brain-versions-used-since',
    text: `SELECT ${RANKED_COLUMNS} FROM brain_entries WHERE brain_id = $1 AND used_seq > $2`,
    values: [brainId, String(since)],
  });
  return rankedVersionsOf(rows);
}

/**
 * A brain's current entry versions, a page at a time in entry order (each page its own statement
 * on the brain's current-entries index, so no connection is held between pages and the caller's
 * event loop turns between them), at most `most` in all.
 */
export async function* currentVersionPages(q: Queryable, brainId: string, most: number, pageSize = 1_000): AsyncGenerator<Map<string, RankedVersion>> {
  let after = '';
  for (let read = 0; read < most; ) {
    const { rows } = await q.query<RankedRow>({
      name: 'brain-current-ranked-versions',
      text: `SELECT ${RANKED_COLUMNS} FROM brain_entries WHERE brain_id = $1 AND valid_to IS NULL AND entry_id > $2 ORDER BY entry_id LIMIT $3`,
      values: [brainId, after, Math.min(pageSize, most - read)],
    });
    if (rows.length === 0) return;
    read += rows.length;
    after = rows.at(-1)!.entry_id;
    yield rankedVersionsOf(rows);
    if (rows.length < pageSize) return;
  }
}

export async function chunkContents(q: Queryable, brainId: string, space: number, keys: { version_id: string; chunk_index: number }[]): Promise<Map<string, { content: string | null; content_sealed: Buffer | null }>> {
  if (keys.length === 0) return new Map();
  const { rows } = await q.query<{ version_id: string; chunk_index: number; content: string | null; content_sealed: Buffer | null }>(
    `SELECT c.version_id, c.chunk_index, c.content, c.content_sealed FROM ${partitionOf(brainId)} c
     JOIN unnest($2::bigint[], $3::int[]) AS k(version_id, chunk_index) ON k.version_id = c.version_id AND k.chunk_index = c.chunk_index
     WHERE c.space = $1`,
    [space, keys.map((key) => key.version_id), keys.map((key) => key.chunk_index)],
  );
  return new Map(rows.map((row) => [`${row.version_id}:${row.chunk_index}`, row]));
}

/** What a forget selects: the entries of a scope and its descendants, those learned from a source, or those linked to entities. */
export type ForgetSelector = { scope: string } | { source: string } | { entityIds: string[] };

export interface ForgetTarget {
  entry_id: string;
  version_id: string;
  origin: EntryRow['origin'];
  live: boolean;
}

/**
 * The entries a forget selects, by their newest version: live entries, and entries deleted
 * earlier whose history still holds their text. Locked, so the set cannot move under the delete.
 */
export async function forgetTargets(q: Queryable, brainId: string, selector: ForgetSelector): Promise<ForgetTarget[]> {
  const [match, params] = 'scope' in selector
    ? [selector.scope === '/' ? 'true' : `(e.scope = $2 OR e.scope LIKE $3)`, selector.scope === '/' ? [] : [selector.scope, `${likePrefix(selector.scope)}/%`]]
    : 'source' in selector
      ? ['e.source = $2', [selector.source]]
      : ['e.entry_id IN (SELECT l.entry_id FROM brain_entity_links l WHERE l.brain_id = $1 AND l.entity_id = ANY($2))', [selector.entityIds]];
  const { rows } = await q.query<ForgetTarget>(
    `SELECT e.entry_id, e.version_id::text AS version_id, e.origin, e.valid_to IS NULL AS live FROM brain_entries e
     WHERE e.brain_id = $1 AND ${match}
       AND NOT EXISTS (SELECT 1 FROM brain_entries n WHERE n.brain_id = e.brain_id AND n.entry_id = e.entry_id AND n.version_id > e.version_id)
     ORDER BY e.entry_id FOR UPDATE OF e`,
    [brainId, ...params],
  );
  return rows;
}

/**
 * Erases entries with every version and chunk of theirs (every space): as_of cannot bring them
 * back. Their entity links and the edges they stated go too; the entities stay.
 */
export async function eraseEntries(q: Queryable, brainId: string, entryIds: string[]): Promise<void> {
  if (entryIds.length === 0) return;
  await q.query(`DELETE FROM ${partitionOf(brainId)} WHERE entry_id = ANY($1)`, [entryIds]);
  await q.query(`DELETE FROM brain_entries WHERE brain_id = $1 AND entry_id = ANY($2)`, [brainId, entryIds]);
  await q.query(`DELETE FROM brain_entity_links WHERE brain_id = $1 AND entry_id = ANY($2)`, [brainId, entryIds]);
  // Edges are keyed by their entities (no index by brain): found through the brain's entities.
  await q.query(`DELETE FROM brain_edges WHERE from_entity IN (SELECT id FROM brain_entities WHERE brain_id = $1) AND entry_id = ANY($2)`, [brainId, entryIds]);
}

export interface ReindexJobRow {
  id: string;
  brain_id: string;
  developer_id: string;
  payer_account_id: string;
  customer_id: string | null;
  from_model: string;
  from_dims: number;
  from_space: number;
  to_model: string;
  to_dims: number;
  to_space: number;
  started_write_seq: string;
  completed_write_seq: string | null;
  status: 'pending' | 'in_progress' | 'completed' | 'failed' | 'rolling_back' | 'rolled_back';
  chunks_total: number;
  chunks_done: number;
  failure_reason: string | null;
  completed_at: Date | null;
  rollback_expires_at: Date | null;
  rolled_back_at: Date | null;
  prior_space_dropped_at: Date | null;
  created_at: Date;
}

export async function insertReindexJob(
  q: Queryable,
  job: Pick<ReindexJobRow, 'id' | 'brain_id' | 'developer_id' | 'payer_account_id' | 'customer_id' | 'from_model' | 'from_dims' | 'from_space' | 'to_model' | 'to_dims' | 'started_write_seq'>,
): Promise<ReindexJobRow> {
  // A new space number every time, past every space an earlier job of this brain used.
  const { rows } = await q.query<ReindexJobRow>(
    `INSERT INTO brain_reindex_jobs (id, brain_id, developer_id, payer_account_id, customer_id, from_model, from_dims, from_space, to_model, to_dims, to_space, started_write_seq)
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
            greatest($8, (SELECT max(greatest(from_space, to_space)) FROM brain_reindex_jobs WHERE brain_id = $2)) + 1, $11
     RETURNING *`,
    [job.id, job.brain_id, job.developer_id, job.payer_account_id, job.customer_id, job.from_model, job.from_dims, job.from_space, job.to_model, job.to_dims, job.started_write_seq],
  );
  return rows[0]!;
}

export async function findReindexJob(q: Queryable, brainId: string, jobId: string, lock?: 'update'): Promise<ReindexJobRow | undefined> {
  const { rows } = await q.query<ReindexJobRow>(`SELECT * FROM brain_reindex_jobs WHERE id = $1 AND brain_id = $2${lock ? ' FOR UPDATE' : ''}`, [jobId, brainId]);
  return rows[0];
}

export async function reindexJobById(q: Queryable, jobId: string, lock?: 'update'): Promise<ReindexJobRow | undefined> {
  const { rows } = await q.query<ReindexJobRow>(`SELECT * FROM brain_reindex_jobs WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [jobId]);
  return rows[0];
}

export async function updateReindexJob(q: Queryable, jobId: string, fields: Partial<Pick<ReindexJobRow, 'status' | 'chunks_total' | 'chunks_done' | 'failure_reason' | 'completed_at' | 'rollback_expires_at' | 'rolled_back_at' | 'completed_write_seq' | 'prior_space_dropped_at'>>): Promise<void> {
  const names = Object.keys(fields);
  if (names.length === 0) return;
  await q.query(
    `UPDATE brain_reindex_jobs SET ${names.map((name, i) => `${name} = $${i + 2}`).join(', ')} WHERE id = $1`,
    [jobId, ...names.map((name) => fields[name as keyof typeof fields])],
  );
}

/** The brain serves another space: its model, dimensions and space change together. */
export async function switchSpace(q: Queryable, brainId: string, to: { model: string; dims: number; space: number }): Promise<BrainRow> {
  const { rows } = await q.query<BrainRow>(
    `UPDATE brains SET embedding_model = $2, embedding_dims = $3, active_space = $4, updated_at = now() WHERE id = $1 RETURNING *`,
    [brainId, to.model, to.dims, to.space],
  );
  return rows[0]!;
}

/** A chunk of one space that another space lacks, with what its vector is of. */
export interface MissingChunk {
  version_id: string;
  chunk_index: number;
  entry_id: string;
  scope: string;
  content: string | null;
  content_sealed: Buffer | null;
  valid_from: Date;
  valid_to: Date | null;
  title: string | null;
  title_sealed: Buffer | null;
}

/** Chunk rows (current and history) of space `from` that space `to` does not hold yet, in key order. */
export async function chunksMissingIn(q: Queryable, brainId: string, from: number, to: number, limit: number): Promise<MissingChunk[]> {
  const { rows } = await q.query<MissingChunk>(
    `SELECT c.version_id::text AS version_id, c.chunk_index, c.entry_id, c.scope, c.content, c.content_sealed, c.valid_from, c.valid_to, e.title, e.title_sealed
     FROM ${partitionOf(brainId)} c JOIN brain_entries e ON e.version_id = c.version_id
     WHERE c.space = $1 AND NOT EXISTS (SELECT 1 FROM ${partitionOf(brainId)} t WHERE t.space = $2 AND t.version_id = c.version_id AND t.chunk_index = c.chunk_index)
     ORDER BY c.version_id, c.chunk_index LIMIT $3`,
    [from, to, limit],
  );
  return rows;
}

export async function countSpaces(q: Queryable, brainId: string, from: number, to: number): Promise<{ source: number; copied: number }> {
  const { rows } = await q.query<{ source: number; copied: number }>(
    `SELECT count(*) FILTER (WHERE space = $1)::int AS source, count(*) FILTER (WHERE space = $2)::int AS copied FROM ${partitionOf(brainId)} WHERE space IN ($1, $2)`,
    [from, to],
  );
  return rows[0]!;
}

/** Chunk rows copied into another space with their own validity; a row already there is left as it is (a retried batch). */
export async function insertSpaceRows(q: Queryable, brainId: string, space: number, rows: (MissingChunk & { embedding: string | null; embedding_sealed: Buffer | null })[]): Promise<void> {
  if (rows.length === 0) return;
  await q.query(
    `INSERT INTO ${partitionOf(brainId)} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from, valid_to)
     SELECT $1, $2, c.version_id, c.chunk_index, c.entry_id, c.scope, c.content, c.content_sealed, c.embedding::vector, c.embedding_sealed, c.valid_from, c.valid_to
     FROM unnest($3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[], $8::bytea[], $9::text[], $10::bytea[], $11::timestamptz[], $12::timestamptz[])
       AS c(version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from, valid_to)
     ON CONFLICT DO NOTHING`,
    [
      brainId, space,
      rows.map((row) => row.version_id), rows.map((row) => row.chunk_index), rows.map((row) => row.entry_id), rows.map((row) => row.scope),
      rows.map((row) => row.content), rows.map((row) => row.content_sealed), rows.map((row) => row.embedding), rows.map((row) => row.embedding_sealed),
      rows.map((row) => row.valid_from), rows.map((row) => row.valid_to),
    ],
  );
}

/** What a reindex would embed: every chunk row of the space (history too, so as_of keeps working), and about how many characters. */
export async function spaceSize(q: Queryable, brainId: string, space: number): Promise<{ chunks: number; chars: number }> {
  const { rows } = await q.query<{ chunks: number; chars: string | null }>(
    `SELECT count(*)::int AS chunks, sum(coalesce(length(content), octet_length(content_sealed) - 29)) AS chars FROM ${partitionOf(brainId)} WHERE space = $1`,
    [space],
  );
  return { chunks: rows[0]!.chunks, chars: Number(rows[0]!.chars ?? 0) };
}

export interface ChunkKey {
  version_id: string;
  chunk_index: number;
}

/** A current chunk's key and what ranks it (its entry's class, type, anchors and use). */
export interface RankedChunkKey extends ChunkKey, Pick<EntryRow, 'class' | 'type' | 'use_count' | 'created_at' | 'updated_at' | 'last_used' | 'source_mount_id'> {}

/** The keys of a space's current chunks with what ranks them (what a strict brain's opened vectors must hold). */
export async function currentChunkKeys(q: Queryable, brainId: string, space: number): Promise<RankedChunkKey[]> {
  const { rows } = await q.query<RankedChunkKey>(
    `SELECT c.version_id::text AS version_id, c.chunk_index, e.class, e.type, e.use_count, e.created_at, e.updated_at, e.last_used, e.source_mount_id
     FROM ${partitionOf(brainId)} c JOIN brain_entries e ON e.version_id = c.version_id
     WHERE c.space = $1 AND c.valid_to IS NULL`,
    [space],
  );
  return rows;
}

/** The sealed vectors of these chunks, a page at a time. */
export async function* sealedVectorsOf(q: Queryable, brainId: string, space: number, keys: ChunkKey[], pageSize = 2_000): AsyncGenerator<SealedChunk[]> {
  for (let start = 0; start < keys.length; start += pageSize) {
    const page = keys.slice(start, start + pageSize);
    const { rows } = await q.query<SealedChunk>(
      `SELECT c.version_id::text AS version_id, c.chunk_index, c.entry_id, c.scope, c.embedding_sealed FROM ${partitionOf(brainId)} c
       JOIN unnest($2::bigint[], $3::int[]) AS k(version_id, chunk_index) ON k.version_id = c.version_id AND k.chunk_index = c.chunk_index
       WHERE c.space = $1`,
      [space, page.map((key) => key.version_id), page.map((key) => key.chunk_index)],
    );
    yield rows;
  }
}
