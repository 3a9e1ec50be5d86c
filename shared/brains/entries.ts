import { toSql } from 'pgvector';
import type { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { planEmbeddings, startEmbeddings } from '../inference/embeddings.js';
import { openText, sealText, sealVector, type StoreKeys } from '../vector-stores/crypto.js';
import { embedTexts } from '../vector-stores/ingest.js';
import { brainKeys, brainOf, type BrainServices } from './brains.js';
import { bodyAad, chunkAad, titleAad, vectorAad } from './aad.js';
import { chunkParagraphs } from './chunking.js';
import * as repo from './repository.js';
import type { entryListQuery, patchEntryBody, putEntryBody } from './schemas.js';

/**
 * Entries of a brain (spec 2). A write embeds synchronously in the request, billed through the
 * gateway's metering (to the developer, or the customer of Svc-Customer / `user`), and lands as
 * a new version in one transaction: the previous version's validity ends at that instant, so
 * recall as of any earlier time still sees it. Reference entries are chunked by paragraph;
 * memory and policy entries are one chunk each.
 */
export const MAX_ENTRY_BODY_BYTES = 100 * 1024 * 1024;
/** The JSON of an entry write: its body plus room for escapes and the other fields. */
export const MAX_ENTRY_REQUEST_BYTES = 128 * 1024 * 1024;
const EMBED_BATCH = 256;
const PAGE = { defaultLimit: 100, maxLimit: 500 };

export type EntryServices = BrainServices & Pick<GatewayServices, 'redis'>;

export function putEntry(platform: GatewayServices, developerId: string, call: MeteredCall, brainId: string, body: z.output<typeof putEntryBody>) {
  return againIfSwapped(() => writeEntry(platform, developerId, call, brainId, body));
}

async function writeEntry(platform: GatewayServices, developerId: string, call: MeteredCall, brainId: string, body: z.output<typeof putEntryBody>) {
  checkBodySize(body.body);
  const brain = await brainOf(platform.db, developerId, brainId);
  const entryClass = body.class ?? 'reference';
  const type = entryClass === 'memory' ? checkType(brain, body.type ?? null) : (body.type ?? null);
  const scope = body.scope ?? '/';
  const title = body.title ?? null;
  const chunks = chunksOf(brain, entryClass, title, body.body);
  const vectors = await embed(platform, call, brain, chunks.map((chunk) => chunk.embedText), `brain:${brain.id}:${call.requestId}`);
  const keys = await brainKeys(platform, brain);

  const entry = await withTransaction(platform.db, async (client) => {
    const locked = await brainOf(client, developerId, brainId, 'update');
    if (locked.active_space !== brain.active_space) throw new SpaceSwapped();
    const version = await storeVersion(client, locked, keys, {
      entryId: body.entry_id ?? newId('ent_'), scope, class: entryClass, type, title, body: body.body, trust: body.trust, source: undefined, chunks, vectors,
    });
    await repo.bumpWriteSeq(client, brain.id);
    return version;
  });
  return { ...formatEntry(entry, title, body.body), chunks: chunks.length };
}

/**
 * Only the fields sent change. Title, body or class re-embed (reindexed true); a move of scope
 * alone takes the chunks as they are (every space) under the new scope.
 */
export function patchEntry(platform: GatewayServices, developerId: string, call: MeteredCall, brainId: string, entryId: string, body: z.output<typeof patchEntryBody>) {
  return againIfSwapped(() => changeEntry(platform, developerId, call, brainId, entryId, body));
}

async function changeEntry(platform: GatewayServices, developerId: string, call: MeteredCall, brainId: string, entryId: string, body: z.output<typeof patchEntryBody>) {
  if (body.body !== undefined) checkBodySize(body.body);
  const brain = await brainOf(platform.db, developerId, brainId);
  const keys = await brainKeys(platform, brain);
  const current = await entryOf(platform, brain, entryId);
  if (current.origin === 'reference') throw serviceError('entry_read_only');
  const { title: oldTitle, body: oldBody } = openEntry(keys, current);
  const entryClass = body.class ?? current.class;
  const type = body.type !== undefined ? (entryClass === 'memory' ? checkType(brain, body.type) : body.type) : current.type;
  const title = body.title !== undefined ? body.title : oldTitle;
  const text = body.body ?? oldBody;
  const reindex = (body.title !== undefined && body.title !== oldTitle) || (body.body !== undefined && body.body !== oldBody) || entryClass !== current.class;
  const chunks = reindex ? chunksOf(brain, entryClass, title, text) : [];
  const vectors = reindex ? await embed(platform, call, brain, chunks.map((chunk) => chunk.embedText), `brain:${brain.id}:${call.requestId}`) : [];

  const entry = await withTransaction(platform.db, async (client) => {
    const locked = await brainOf(client, developerId, brainId, 'update');
    if (locked.active_space !== brain.active_space) throw new SpaceSwapped();
    const previous = await repo.currentEntry(client, brain.id, entryId, 'update');
    if (!previous) throw serviceError('not_found', { message: 'No such entry in this brain.' });
    await repo.closeVersion(client, brain.id, previous.version_id);
    const version = await repo.insertEntryVersion(client, {
      ...previous,
      version_id: await repo.nextVersionId(client),
      scope: body.scope ?? previous.scope, class: entryClass, type,
      ...sealedFields(keys, brain.id, entryId, title, text),
      body_bytes: String(Buffer.byteLength(text)), trust: body.trust ?? previous.trust,
      chunks: reindex ? chunks.length : previous.chunks,
    });
    if (reindex) await repo.insertChunks(client, brain.id, locked.active_space, version, chunkRows(brain, keys, locked.active_space, entryId, chunks, vectors));
    else await repo.copyChunks(client, brain.id, previous.version_id, version);
    await repo.bumpWriteSeq(client, brain.id);
    return version;
  });
  return { ...formatEntry(entry, title, text), reindexed: reindex, chunks: entry.chunks };
}

export async function getEntry(platform: BrainServices, developerId: string, brainId: string, entryId: string) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const entry = await entryOf(platform, brain, entryId);
  const { title, body } = openEntry(await brainKeys(platform, brain), entry);
  return formatEntry(entry, title, body);
}

export async function listEntries(platform: BrainServices, developerId: string, brainId: string, query: z.output<typeof entryListQuery>) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const keys = await brainKeys(platform, brain);
  const limit = Math.min(query.limit ?? PAGE.defaultLimit, PAGE.maxLimit);
  const offset = query.offset ?? 0;
  const rows = await repo.listEntries(platform.db, brain.id, { ...(query.scope && { scope: query.scope }), ...(query.class && { class: query.class }) }, limit, offset);
  const data = rows.slice(0, limit).map((entry) => {
    const { title, body } = openEntry(keys, entry);
    return formatEntry(entry, title, body);
  });
  return { object: 'list' as const, data, has_more: rows.length > limit, limit, offset };
}

export async function deleteEntry(platform: BrainServices, developerId: string, brainId: string, entryId: string) {
  await withTransaction(platform.db, async (client) => {
    const brain = await brainOf(client, developerId, brainId, 'update');
    const entry = await repo.currentEntry(client, brain.id, entryId, 'update');
    if (!entry) throw serviceError('not_found', { message: 'No such entry in this brain.' });
    if (entry.origin === 'reference') throw serviceError('entry_read_only');
    await repo.closeVersion(client, brain.id, entry.version_id);
    await repo.bumpWriteSeq(client, brain.id);
  });
  return { id: entryId, entry_id: entryId, object: 'brain.entry.deleted' as const, deleted: true };
}

export async function listScopes(platform: BrainServices, developerId: string, brainId: string, query: { scope: string; limit?: number; offset?: number }) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const limit = Math.min(query.limit ?? PAGE.defaultLimit, PAGE.maxLimit);
  const offset = query.offset ?? 0;
  const rows = await repo.listScopes(platform.db, brain.id, query.scope, limit, offset);
  return { object: 'list' as const, data: rows.slice(0, limit).map((row) => ({ object: 'brain.scope' as const, scope: row.scope, entries: row.entries })), has_more: rows.length > limit, limit, offset };
}

/**
 * A write embeds before it takes the brain's lock; if a reindex (or its rollback) swapped the
 * brain's model meanwhile, its vectors are of the wrong model, so it embeds again.
 */
export class SpaceSwapped extends Error {}

async function againIfSwapped<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (!(error instanceof SpaceSwapped) || attempt === 3) throw error;
    }
  }
}

export interface VersionToStore {
  entryId: string;
  scope: string;
  class: repo.EntryRow['class'];
  type: string | null;
  title: string | null;
  body: string;
  /** Kept from the previous version when undefined (high for a new entry). */
  trust: repo.EntryRow['trust'] | undefined;
  /** Provenance (forget by source); kept from the previous version when undefined. */
  source: string | undefined;
  chunks: PlannedChunk[];
  vectors: number[][];
}

/**
 * Writes the next version of an entry (or its first) inside the caller's transaction, which holds
 * the brain's lock: the current version closes, the new one and its chunks land, sealed when the
 * brain is. Use count, last use and creation time carry over. The caller bumps write_seq.
 */
export async function storeVersion(client: Queryable, brain: repo.BrainRow, keys: StoreKeys | null, version: VersionToStore): Promise<repo.EntryRow> {
  const previous = await repo.currentEntry(client, brain.id, version.entryId, 'update');
  if (previous?.origin === 'reference') throw serviceError('entry_read_only');
  if (previous) await repo.closeVersion(client, brain.id, previous.version_id);
  const stored = await repo.insertEntryVersion(client, {
    version_id: await repo.nextVersionId(client), brain_id: brain.id, entry_id: version.entryId, scope: version.scope, class: version.class, type: version.type,
    ...sealedFields(keys, brain.id, version.entryId, version.title, version.body),
    body_bytes: String(Buffer.byteLength(version.body)), trust: version.trust ?? previous?.trust ?? 'high', origin: 'native', source_mount_id: null,
    source: version.source ?? previous?.source ?? null,
    use_count: previous?.use_count ?? 0, last_used: previous?.last_used ?? null, created_at: previous?.created_at ?? new Date(), chunks: version.chunks.length,
  });
  await repo.insertChunks(client, brain.id, brain.active_space, stored, chunkRows(brain, keys, brain.active_space, version.entryId, version.chunks, version.vectors));
  return stored;
}

async function entryOf(platform: Pick<BrainServices, 'db'>, brain: repo.BrainRow, entryId: string): Promise<repo.EntryRow> {
  const entry = await repo.currentEntry(platform.db, brain.id, entryId);
  if (!entry) throw serviceError('not_found', { message: 'No such entry in this brain.' });
  return entry;
}

function checkBodySize(body: string): void {
  if (Buffer.byteLength(body) > MAX_ENTRY_BODY_BYTES) throw serviceError('entry_too_large', { param: 'body' });
}

/** A memory's type must be one of the brain's taxonomy (or none). */
function checkType(brain: repo.BrainRow, type: string | null): string | null {
  if (type === null) return null;
  if (!brain.memory_policy.type_taxonomy.some((entry) => entry.type === type)) {
    const known = brain.memory_policy.type_taxonomy.map((entry) => entry.type).join(', ');
    throw serviceError('invalid_request', { param: 'type', message: `type must be one of this brain's taxonomy: ${known}.` });
  }
  return type;
}

export interface PlannedChunk {
  content: string;
  /** What is embedded: the entry's title leads each chunk, so a chunk is found by what its entry is about. */
  embedText: string;
}

export function chunksOf(brain: Pick<repo.BrainRow, 'memory_policy'>, entryClass: string, title: string | null, body: string): PlannedChunk[] {
  const parts = entryClass === 'reference' ? chunkParagraphs(body, brain.memory_policy.chunking.max_chars) : [body];
  return parts.map((content) => ({ content, embedText: embedTextOf(title, content) }));
}

/** What a chunk's vector is of: its entry's title, then the chunk. */
export const embedTextOf = (title: string | null, content: string) => (title ? `${title}\n\n${content}` : content);

/** Embeds with the brain's model through the gateway's metering (as vector stores do), a batch of inputs per call. */
export async function embed(platform: GatewayServices, call: MeteredCall, brain: Pick<repo.BrainRow, 'embedding_model' | 'embedding_dims'>, texts: string[], billingKey: string | undefined, spent?: { micros: number }): Promise<number[][]> {
  const vectors: number[][] = [];
  for (let start = 0; start < texts.length; start += EMBED_BATCH) {
    vectors.push(...(await embedTexts(platform, call, gatewayModelOf(brain), texts.slice(start, start + EMBED_BATCH).map(firstEmbeddable), batchKey(billingKey, start), { ...(spent && { spent }) })));
  }
  return vectors;
}

/** The brain's model without its provider prefix, and its dimensions, as the gateway's embeddings take them. */
const gatewayModelOf = (brain: Pick<repo.BrainRow, 'embedding_model' | 'embedding_dims'>) => ({ embedding_model: brain.embedding_model.slice(brain.embedding_model.indexOf('/') + 1), dimensions: brain.embedding_dims });

/** A batch's billing key: the texts from `start` on, under the work's key. */
const batchKey = (billingKey: string | undefined, start: number) => (billingKey === undefined ? undefined : `${billingKey}:${start}`);

/** A memory is one chunk however long: its vector is of the first 100,000 characters, an embedding input's limit. */
const firstEmbeddable = (text: string) => text.slice(0, 100_000);

/**
 * Embeds one recall query the same way, and returns its vector as soon as the provider answered:
 * `charged` settles once the call's charge is recorded, so a recall searches meanwhile and answers
 * after it (a settlement in PostgreSQL took 1.5 ms of a 100,000-entry recall's 24 ms at p50).
 * Work that runs again when retried (a learn pass) names a billing key, so the query is charged
 * once however often it runs, and `charged` adds the charge to `spent`; a request's recall has no
 * key and is metered as any call is (a cached key's quota grant).
 */
export async function embedQuery(platform: GatewayServices, call: MeteredCall, brain: Pick<repo.BrainRow, 'embedding_model' | 'embedding_dims'>, query: string, retried?: RetriedRecall): Promise<{ vector: number[]; charged: Promise<void> }> {
  const model = gatewayModelOf(brain);
  const plan = planEmbeddings({ model: model.embedding_model, input: [firstEmbeddable(query)], dimensions: model.dimensions }, platform.providers);
  const key = batchKey(retried?.billingKey, 0);
  const started = await startEmbeddings(platform, call, plan, { signal: new AbortController().signal, ...(key && { billingKey: key }) });
  const charged = started.settled.then((charge) => void (retried && (retried.spent.micros += charge.deductedMicros)));
  return { vector: started.body.data[0]!.embedding as number[], charged };
}

/** A recall inside work that retries and reports its cost: the key its embedding is billed under, and the running total it adds to. */
export interface RetriedRecall {
  billingKey: string;
  spent: { micros: number };
}

/** An entry's title and body as the brain stores them: plaintext, or sealed under its key (standard, strict). */
export function sealedFields(keys: StoreKeys | null, brainId: string, entryId: string, title: string | null, body: string) {
  if (!keys) return { title, body, title_sealed: null, body_sealed: null };
  return { title: null, body: null, title_sealed: title === null ? null : sealText(keys, title, titleAad(brainId, entryId)), body_sealed: sealText(keys, body, bodyAad(brainId, entryId)) };
}

/** An entry's chunk rows as the brain stores them in `space`: text sealed when the brain is, vectors sealed when it is strict. */
export function chunkRows(brain: repo.BrainRow, keys: StoreKeys | null, space: number, entryId: string, chunks: Pick<PlannedChunk, 'content'>[], vectors: number[][]): repo.NewChunk[] {
  return chunks.map((chunk, index) => ({
    chunk_index: index,
    content: keys ? null : chunk.content,
    content_sealed: keys ? sealText(keys, chunk.content, chunkAad(brain.id, entryId, index)) : null,
    embedding: brain.encryption === 'strict' ? null : toSql(vectors[index]!),
    embedding_sealed: brain.encryption === 'strict' ? sealVector(keys!, vectors[index]!, vectorAad(brain.id, space, entryId, index)) : null,
  }));
}

/** An entry's title and body in plaintext (opened under the brain's key when sealed). */
export function openEntry(keys: StoreKeys | null, entry: repo.EntryRow): { title: string | null; body: string } {
  if (entry.body !== null) return { title: entry.title, body: entry.body };
  return {
    title: entry.title_sealed ? openText(keys!, entry.title_sealed, titleAad(entry.brain_id, entry.entry_id)) : null,
    body: openText(keys!, entry.body_sealed!, bodyAad(entry.brain_id, entry.entry_id)),
  };
}

export function formatEntry(entry: repo.EntryRow, title: string | null, body: string) {
  return {
    object: 'brain.entry' as const,
    id: entry.entry_id,
    entry_id: entry.entry_id,
    brain_id: entry.brain_id,
    scope: entry.scope,
    class: entry.class,
    type: entry.type,
    title,
    body,
    trust: entry.trust,
    origin: entry.origin,
    source_mount_id: entry.source_mount_id,
    source: entry.source,
    use_count: entry.use_count,
    last_used: entry.last_used?.toISOString() ?? null,
    created_at: entry.created_at.toISOString(),
    updated_at: entry.updated_at.toISOString(),
  };
}
