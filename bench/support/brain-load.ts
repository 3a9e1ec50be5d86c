import { toSql } from 'pgvector';
import { bodyAad, chunkAad, vectorAad } from '../../shared/brains/aad.js';
import { brainKeys } from '../../shared/brains/brains.js';
import { rankingOf } from '../../shared/brains/policy.js';
import * as repo from '../../shared/brains/repository.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { withIndexBuildMemory } from '../../shared/db/pool.js';
import { sealText, sealVector, type StoreKeys } from '../../shared/vector-stores/crypto.js';
import { mulberry32, type Corpus } from './corpus.js';

/**
 * A brain filled straight through its tables, for the benchmarks that read brains (brains,
 * packs): one-chunk memories and references over the taxonomy's tiers, written over the last 120
 * days with some use, so recency, tier and usage move the ranking away from plain cosine order.
 */
const DAY_MS = 86_400_000;
const LOAD_BATCH = 1_000;
/** One-chunk entries by class and memory type, in these shares. */
const MIX: { class: 'memory' | 'reference'; type: string | null; share: number }[] = [
  { class: 'reference', type: null, share: 0.3 },
  { class: 'memory', type: 'decision', share: 0.1 },
  { class: 'memory', type: 'fact', share: 0.2 },
  { class: 'memory', type: 'procedure', share: 0.1 },
  { class: 'memory', type: 'observation', share: 0.2 },
  { class: 'memory', type: 'status', share: 0.1 },
];

/** What the loader wrote for each row: what the exact ranking needs. */
export interface Loaded {
  brain: repo.BrainRow;
  entries: number;
  loadSeconds: number;
  indexSeconds: number | null;
  /** One a loaded row, in corpus order from the first row loaded. */
  rankings: { weight: number; halfLifeDays: number | null; anchorAt: number; useCount: number }[];
}

/**
 * Writes corpus rows first..first+size-1 as one-chunk entries of the brain (entry id `e<row>`,
 * sealed as the brain says), in batches, then builds the plaintext brain's HNSW index once over
 * them, as a bulk load should, with the memory the platform's own builds take.
 */
export async function loadBrain(platform: GatewayServices, developerId: string, brainId: string, corpus: Corpus, size: number, now: number, first = 0): Promise<Loaded> {
  const brain = (await repo.findBrain(platform.db, developerId, brainId))!;
  const keys = await brainKeys(platform, brain);
  const strict = brain.encryption === 'strict';
  const partition = repo.partitionOf(brain.id);
  const space = brain.active_space;
  const dims = brain.embedding_dims;
  const rankings: Loaded['rankings'] = [];
  const random = mulberry32(7);
  const started = performance.now();
  if (!strict) await platform.db.query(`DROP INDEX IF EXISTS ${partition}_s${space}_hnsw`);
  for (let from = first; from < first + size; from += LOAD_BATCH) {
    const to = Math.min(first + size, from + LOAD_BATCH);
    const { rows: ids } = await platform.db.query<{ id: string }>(`SELECT nextval('brain_entries_version_id_seq')::text AS id FROM generate_series(1, $1)`, [to - from]);
    const entry = { version: [] as string[], id: [] as string[], cls: [] as string[], type: [] as (string | null)[], body: [] as (string | null)[], sealed: [] as (Buffer | null)[], bytes: [] as number[], uses: [] as number[], lastUsed: [] as (Date | null)[], created: [] as Date[], updated: [] as Date[] };
    const chunk = { content: [] as (string | null)[], sealed: [] as (Buffer | null)[], embedding: [] as (string | null)[], vectorSealed: [] as (Buffer | null)[] };
    for (let row = from; row < to; row++) {
      const entryId = `e${row}`;
      const kind = pick(random());
      const created = now - random() * 120 * DAY_MS;
      const updated = created + random() * (now - created);
      const uses = random() < 0.5 ? 0 : Math.floor(random() * 6);
      const lastUsed = uses > 0 ? updated + random() * (now - updated) : null;
      const text = corpus.texts[row]!;
      const vector = corpus.vectors.subarray(row * dims, (row + 1) * dims);
      entry.version.push(ids[row - from]!.id);
      entry.id.push(entryId);
      entry.cls.push(kind.class);
      entry.type.push(kind.type);
      entry.body.push(keys ? null : text);
      entry.sealed.push(keys ? sealText(keys, text, bodyAad(brain.id, entryId)) : null);
      entry.bytes.push(Buffer.byteLength(text));
      entry.uses.push(uses);
      entry.lastUsed.push(lastUsed === null ? null : new Date(lastUsed));
      entry.created.push(new Date(created));
      entry.updated.push(new Date(updated));
      chunk.content.push(keys ? null : text);
      chunk.sealed.push(keys ? sealText(keys, text, chunkAad(brain.id, entryId, 0)) : null);
      chunk.embedding.push(strict ? null : toSql(Array.from(vector)));
      chunk.vectorSealed.push(strict ? sealVector(keys as StoreKeys, vector, vectorAad(brain.id, space, entryId, 0)) : null);
      const ranking = rankingOf(brain.memory_policy, kind.class, kind.type);
      const anchor = ranking.anchor === 'created' ? created : ranking.anchor === 'updated' ? updated : (lastUsed ?? updated);
      rankings.push({ weight: ranking.weight, halfLifeDays: ranking.halfLifeDays, anchorAt: anchor, useCount: uses });
    }
    await platform.db.query(
      `INSERT INTO brain_entries (version_id, brain_id, entry_id, scope, class, type, body, body_sealed, body_bytes, use_count, last_used, created_at, updated_at, valid_from, chunks)
       SELECT u.version_id, $1, u.entry_id, '/', u.class, u.type, u.body, u.body_sealed, u.bytes, u.uses, u.last_used, u.created_at, u.updated_at, u.updated_at, 1
       FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::bigint[], $9::int[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[])
         AS u(version_id, entry_id, class, type, body, body_sealed, bytes, uses, last_used, created_at, updated_at)`,
      [brain.id, entry.version, entry.id, entry.cls, entry.type, entry.body, entry.sealed, entry.bytes, entry.uses, entry.lastUsed, entry.created, entry.updated],
    );
    await platform.db.query(
      `INSERT INTO ${partition} (brain_id, space, version_id, chunk_index, entry_id, scope, content, content_sealed, embedding, embedding_sealed, valid_from)
       SELECT $1, $2, u.version_id, 0, u.entry_id, '/', u.content, u.content_sealed, u.embedding::vector, u.embedding_sealed, u.valid_from
       FROM unnest($3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::bytea[], $9::timestamptz[]) AS u(version_id, entry_id, content, content_sealed, embedding, embedding_sealed, valid_from)`,
      [brain.id, space, entry.version, entry.id, chunk.content, chunk.sealed, chunk.embedding, chunk.vectorSealed, entry.updated],
    );
  }
  await repo.bumpWriteSeq(platform.db, brain.id);
  const loadSeconds = (performance.now() - started) / 1000;
  let indexSeconds: number | null = null;
  if (!strict) {
    const indexStarted = performance.now();
    await withIndexBuildMemory(platform.db, platform.config.INDEX_BUILD_MEMORY_MB, (client) => repo.createSpaceIndex(client, brain.id, space, brain.embedding_dims));
    indexSeconds = (performance.now() - indexStarted) / 1000;
  }
  // What the server would do over the next minutes, while the timed recalls ran: autovacuum's
  // visibility map and statistics, and the checkpointer's writing of the load's dirty pages (at
  // 100,000 entries about 1.5 GB of rows and graph, spread over several minutes).
  await platform.db.query(`VACUUM (ANALYZE) ${partition}`);
  await platform.db.query(`ANALYZE brain_entries`);
  await platform.db.query('CHECKPOINT');
  return { brain, entries: size, loadSeconds, indexSeconds, rankings };
}

function pick(r: number): (typeof MIX)[number] {
  let sum = 0;
  for (const kind of MIX) if (r < (sum += kind.share)) return kind;
  return MIX[MIX.length - 1]!;
}
