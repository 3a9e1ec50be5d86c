import { toSql } from 'pgvector';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { blindTerms, openText, textAad, vectorAad, openVectorInto, type StoreKeys } from './crypto.js';
import { filterSql } from './filters.js';
import { embedTexts } from './ingest.js';
import * as repo from './repository.js';
import type { SearchBody } from './schemas.js';
import { assertNotSuspended, readableStore, searchIndexOf, type VectorStoreCaller } from './common.js';

/**
 * Hybrid search of one store: for each query, the nearest chunks by vector (PostgreSQL's HNSW
 * index, or an exact scan of sealed vectors in the CPU pool) and the best chunks by words
 * (PostgreSQL full-text ranking, or the blind index of a sealed store) are fused by reciprocal
 * rank, so an exact identifier or a rare word is found even when its embedding is not near.
 * Only chunks of completed files are searched; filters apply to the files' attributes.
 */
const DEFAULT_RESULTS = 10;
/** Reciprocal rank fusion's constant (Cormack et al.): a result at rank r adds 1 / (60 + r). */
const RRF_K = 60;
/** Candidates each method contributes per query. */
const CANDIDATES = (k: number) => Math.max(40, k * 4);

export interface Candidate {
  file_id: string;
  chunk_index: number;
}

export async function searchVectorStore(platform: GatewayServices, caller: VectorStoreCaller, call: MeteredCall, storeId: string, body: SearchBody, options: { billingKey?: string } = {}) {
  const store = await readableStore(platform.db, caller.developerId, storeId);
  await assertNotSuspended(platform, store, call.payerAccountId);
  const keys = await platform.vectorStoreKeys.keys(store, caller.passphrase);
  const queries = typeof body.query === 'string' ? [body.query] : body.query;
  const k = body.max_num_results ?? DEFAULT_RESULTS;
  const params: unknown[] = [];
  const filter = body.filters ? filterSql(body.filters, 'f.attributes', params) : 'true';

  // A billing key makes the query's embedding charge once-only (a run's file_search step run again).
  const vectors = await embedTexts(platform, call, store, queries, options.billingKey);
  const fused = new Map<string, { candidate: Candidate; score: number }>();
  const add = (list: Candidate[]) =>
    list.forEach((candidate, rank) => {
      const id = `${candidate.file_id}\u0000${candidate.chunk_index}`;
      const entry = fused.get(id) ?? { candidate, score: 0 };
      entry.score += 1 / (RRF_K + rank + 1);
      fused.set(id, entry);
    });
  for (const [i, query] of queries.entries()) {
    add(await nearestByVector(platform, store, keys, vectors[i]!, CANDIDATES(k), filter, params));
    add(await bestByWords(platform.db, store, keys, query, CANDIDATES(k), filter, params));
  }

  // Normalised so a chunk ranked first by both methods for every query scores 1.
  const best = (queries.length * 2) / (RRF_K + 1);
  const threshold = body.ranking_options?.score_threshold ?? 0;
  const ranked = [...fused.values()]
    .map((entry) => ({ ...entry, score: entry.score / best }))
    .filter((entry) => entry.score >= threshold)
    .sort((a, b) => b.score - a.score)
    .slice(0, k);
  const data = await resultsOf(platform.db, store, keys, ranked);
  await repo.touchStore(platform.db, store.id);
  return { object: 'vector_store.search_results.page' as const, search_query: queries, data, has_more: false, next_page: null };
}

/**
 * The `limit` nearest chunks of completed files to `vector` in the store's active space, best
 * first; `filter` is SQL over the file row `f` (from filterSql) with its parameters.
 */
export async function nearestByVector(platform: GatewayServices, store: repo.VectorStoreRow, keys: StoreKeys | null, vector: number[], limit: number, filter = 'true', filterParams: unknown[] = []): Promise<Candidate[]> {
  const index = searchIndexOf(store);
  const partition = repo.partitionOf(store.id);
  const space = Number(store.active_space);
  if (index === 'hnsw' || (index === 'flat' && store.vector_sealing !== 'full')) {
    // The HNSW graph is searched in its own precision; a flat plaintext store is scored exactly.
    const { cast } = index === 'hnsw' ? repo.hnswCast(store, store.dimensions) : repo.vectorCast(store.dimensions);
    const params = [...filterParams, toSql(vector), limit];
    const sql = `SELECT c.file_id, c.chunk_index FROM ${partition} c
       JOIN vector_store_files f ON f.vector_store_id = '${store.id}' AND f.file_id = c.file_id AND f.status = 'completed'
       WHERE c.space = ${space} AND c.embedding IS NOT NULL AND (${filter})
       ORDER BY c.embedding::${cast} <=> $${params.length - 1}::${cast} LIMIT $${params.length}`;
    return withTransaction(platform.db, async (client) => {
      // Filtered HNSW scans keep going until enough rows pass the filter (pgvector 0.8's iterative scans).
      // Between about 6k and 40k chunks PostgreSQL costs a sequential scan and sort below the index
      // (the vectors are TOASTed, so the table looks cheap to read): measured 96 ms against 2.8 ms.
      const planner = index === 'hnsw' ? 'SET LOCAL enable_seqscan = off;' : '';
      await client.query(`${planner} SET LOCAL hnsw.ef_search = ${Math.max(platform.config.VECTOR_STORE_HNSW_EF_SEARCH, limit)}; SET LOCAL hnsw.iterative_scan = relaxed_order`);
      return (await client.query<Candidate>(sql, params)).rows;
    });
  }
  // Sealed vectors: opened under the store's key and scored in the CPU pool (exactly, or over the nearest IVF lists).
  const allowed = filter === 'true' ? null : await filesAllowed(platform.db, store.id, filter, filterParams);
  return platform.sealedSpaces.nearest(store, keys!, vector, limit, allowed);
}

async function filesAllowed(db: Queryable, storeId: string, filter: string, filterParams: unknown[]): Promise<Set<string>> {
  const params = [...filterParams, storeId];
  const { rows } = await db.query<{ file_id: string }>(
    `SELECT f.file_id FROM vector_store_files f WHERE f.vector_store_id = $${params.length} AND f.status = 'completed' AND (${filter})`,
    params,
  );
  return new Set(rows.map((row) => row.file_id));
}

const WORD = /[\p{L}\p{N}]+/gu;

async function bestByWords(db: Queryable, store: repo.VectorStoreRow, keys: StoreKeys | null, query: string, limit: number, filter: string, filterParams: unknown[]): Promise<Candidate[]> {
  const partition = repo.partitionOf(store.id);
  const space = Number(store.active_space);
  const join = `JOIN vector_store_files f ON f.vector_store_id = '${store.id}' AND f.file_id = c.file_id AND f.status = 'completed'`;
  if (!keys) {
    const words = [...new Set(query.toLowerCase().match(WORD) ?? [])].slice(0, 64);
    if (words.length === 0) return [];
    const params = [...filterParams, words, limit];
    // Any of the query's words (OR), ranked by cover density: the rarer and closer together, the higher.
    const { rows } = await db.query<Candidate>(
      `WITH q AS (SELECT to_tsquery('english', string_agg(quote_literal(w), ' | ')) AS tsq FROM unnest($${params.length - 1}::text[]) w)
       SELECT c.file_id, c.chunk_index FROM ${partition} c ${join}, q
       WHERE c.space = ${space} AND q.tsq IS NOT NULL AND c.tsv @@ q.tsq AND (${filter})
       ORDER BY ts_rank_cd(c.tsv, q.tsq) DESC, c.file_id, c.chunk_index LIMIT $${params.length}`,
      params,
    );
    return rows;
  }
  const terms = blindTerms(keys, query).slice(0, 64);
  if (terms.length === 0) return [];
  const params = [...filterParams, terms, limit];
  const { rows } = await db.query<Candidate>(
    `SELECT c.file_id, c.chunk_index FROM ${partition} c ${join}
     WHERE c.space = ${space} AND c.terms && $${params.length - 1}::text[] AND (${filter})
     ORDER BY (SELECT count(*) FROM unnest(c.terms) t WHERE t = ANY($${params.length - 1}::text[])) DESC, c.file_id, c.chunk_index
     LIMIT $${params.length}`,
    params,
  );
  return rows;
}

async function resultsOf(db: Queryable, store: repo.VectorStoreRow, keys: StoreKeys | null, ranked: { candidate: Candidate; score: number }[]) {
  if (ranked.length === 0) return [];
  const space = Number(store.active_space);
  const { rows } = await db.query<Candidate & { text: string | null; text_sealed: Buffer | null; filename: string; attributes: Record<string, string | number | boolean> | null }>(
    `SELECT c.file_id, c.chunk_index, c.text, c.text_sealed, fl.filename, f.attributes
     FROM ${repo.partitionOf(store.id)} c
     JOIN vector_store_files f ON f.vector_store_id = c.vector_store_id AND f.file_id = c.file_id
     JOIN files fl ON fl.id = c.file_id
     JOIN unnest($1::text[], $2::int[]) AS wanted(file_id, chunk_index) ON wanted.file_id = c.file_id AND wanted.chunk_index = c.chunk_index
     WHERE c.space = ${space}`,
    [ranked.map((entry) => entry.candidate.file_id), ranked.map((entry) => entry.candidate.chunk_index)],
  );
  const byId = new Map(rows.map((row) => [`${row.file_id}\u0000${row.chunk_index}`, row]));
  const facts = store.graphrag_enabled ? await factsOf(db, store.id, ranked.map((entry) => entry.candidate)) : undefined;
  return ranked.flatMap(({ candidate, score }) => {
    const row = byId.get(`${candidate.file_id}\u0000${candidate.chunk_index}`);
    if (!row) return [];
    const text = row.text ?? openText(keys!, row.text_sealed!, textAad(store.id, row.file_id, row.chunk_index));
    return [
      {
        file_id: row.file_id,
        filename: row.filename,
        score: Math.round(score * 1e6) / 1e6,
        attributes: row.attributes ?? {},
        content: [{ type: 'text' as const, text }],
        ...(facts && { facts: facts.get(`${row.file_id}\u0000${row.chunk_index}`) ?? [] }),
      },
    ];
  });
}

async function factsOf(db: Queryable, storeId: string, chunks: Candidate[]) {
  const { rows } = await db.query<Candidate & { subject: string; predicate: string; object: string }>(
    `SELECT f.file_id, f.chunk_index, f.subject, f.predicate, f.object FROM vector_store_facts f
     JOIN unnest($2::text[], $3::int[]) AS wanted(file_id, chunk_index) ON wanted.file_id = f.file_id AND wanted.chunk_index = f.chunk_index
     WHERE f.vector_store_id = $1`,
    [storeId, chunks.map((chunk) => chunk.file_id), chunks.map((chunk) => chunk.chunk_index)],
  );
  const byChunk = new Map<string, { subject: string; predicate: string; object: string }[]>();
  for (const row of rows) {
    const id = `${row.file_id}\u0000${row.chunk_index}`;
    byChunk.set(id, [...(byChunk.get(id) ?? []), { subject: row.subject, predicate: row.predicate, object: row.object }]);
  }
  return byChunk;
}
