import type { z } from 'zod';
import { withIndexBuildMemory, withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { isUuid, newId } from '../ids.js';
import { openText, openVectorInto, sealText, sealVector, storeKeys, type StoreKeys } from '../vector-stores/crypto.js';
import { bodyAad, chunkAad, packAad, titleAad, vectorAad } from './aad.js';
import { brainKeys, brainOf, type BrainServices } from './brains.js';
import { followLatest } from './mount-versions.js';
import * as packs from './pack-repository.js';
import * as repo from './repository.js';
import type { grantBody, packListQuery, publishBody } from './schemas.js';

/**
 * Packs (spec 2): immutable, versioned snapshots of a brain's native rows (entries, chunks and
 * their vectors, the entity graph, the frozen policy and live tier weights), to be mounted into
 * other brains. The first publish of a brain creates its pack; each publish adds the next
 * version. Two gates run before any pack row exists: size (409 pack_too_large) and a secret scan
 * of every entry title and chunk (422 secret_detected, naming the entry, chunk and scope; nothing
 * is redacted, the whole publish is refused). A version is the brain as it stood when the gates
 * read it (entries are versioned, so a later build copies exactly that), built in the request up
 * to 1,000 entries, else by a workflow; either way in one transaction, ready or nothing.
 */
export type PackServices = BrainServices;

/** Versions with more native entries than this are built by a workflow (spec 2: 1,000 or fewer build synchronously). */
export const SYNC_BUILD_MAX_ENTRIES = 1_000;
const PAGE = { defaultLimit: 100, maxLimit: 500 };
const SCAN_BATCH = 256;
const COPY_PAGE = 500;
/** HNSW of a plaintext version (what reference mounts search), as the brains' own spaces are built. */
const PACK_HNSW = { m: repo.BRAIN_HNSW.m, efConstruction: repo.BRAIN_HNSW.efConstruction };

export async function publish(platform: PackServices, developerId: string, brainId: string, body: z.output<typeof publishBody>) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const existing = await packs.packOfBrain(platform.db, brain.id);
  const creation = existing ? null : await creationOf(platform, developerId, brain, body);
  if (existing && (existing.embedding_model !== brain.embedding_model || existing.embedding_dims !== brain.embedding_dims)) {
    throw serviceError('embedding_model_mismatch', { message: `This pack's versions are embedded with ${existing.embedding_model} (${existing.embedding_dims} dimensions); the brain now uses ${brain.embedding_model}.` });
  }

  const snapshotAt = await checkGates(platform, brain);
  const { pack, version } = await withTransaction(platform.db, async (client) => {
    const source = await brainOf(client, developerId, brainId);
    let pack = await packs.packOfBrain(client, brain.id, 'update');
    if (!pack) {
      if (await packs.slugTaken(client, developerId, creation!.slug)) throw serviceError('slug_taken', { param: 'slug' });
      pack = await packs.insertPack(client, { ...creation!, wrapped_data_key: await wrappedPackKey(platform, creation!.id, creation!.encryption_at_publish) });
    }
    const version = await packs.insertVersion(client, {
      id: newId('pkv_'), pack_id: pack.id, version: await packs.nextVersionNumber(client, pack.id), source_space: source.active_space, snapshot_at: snapshotAt,
      notes: body.notes ?? null, published_by: developerId, memory_policy: source.memory_policy, tier_multipliers: source.tier_multipliers,
    });
    return { pack, version };
  }).catch((error: unknown) => {
    // Two first publishes racing for one slug: the loser hears slug_taken.
    if ((error as { code?: string; constraint?: string }).code === '23505' && (error as { constraint?: string }).constraint === 'brain_packs_developer_id_slug_key') throw serviceError('slug_taken', { param: 'slug' });
    throw error;
  });

  const size = await packs.snapshotSize(platform.db, brain.id, version.source_space, snapshotAt);
  if (size.entries <= SYNC_BUILD_MAX_ENTRIES) {
    const built = await buildVersion(platform, version.id);
    return formatVersion(built ?? version, pack);
  }
  await platform.temporal.client.workflow.start('packBuildWorkflow', {
    taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
    workflowId: `pack-build-${version.id}`,
    args: [{ versionId: version.id }],
    staticSummary: `Build version ${version.version} of pack ${pack.id}`,
  });
  return formatVersion(version, pack);
}

/** What a first publish makes the pack with (only the first: later publishes ignore these fields). */
async function creationOf(platform: PackServices, developerId: string, brain: repo.BrainRow, body: z.output<typeof publishBody>) {
  const encryption = body.encryption_at_publish ?? brain.encryption;
  if (brain.encryption !== 'none' && encryption === 'none' && body.declassify !== true) throw serviceError('declassification_required', { param: 'declassify' });
  const name = body.name ?? brain.name;
  const slug = body.slug ?? slugOf(name);
  if (await packs.slugTaken(platform.db, developerId, slug)) throw serviceError('slug_taken', { param: 'slug' });
  return {
    id: newId('pack_'), developer_id: developerId, source_brain_id: brain.id, name, slug, visibility: body.visibility ?? 'private',
    encryption_at_publish: encryption, embedding_model: brain.embedding_model, embedding_dims: brain.embedding_dims,
  } as const;
}

/** A slug from a name: lowercase letters, digits and single dashes, at most 64 characters. */
export function slugOf(name: string): string {
  const slug = name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 64).replace(/-+$/, '');
  return slug || 'pack';
}

/**
 * The refusal gates, as the brain stands now: the instant they read is the version's snapshot.
 * Size first (cheap), then every title and chunk through secretlint in the CPU pool.
 */
async function checkGates(platform: PackServices, brain: repo.BrainRow): Promise<Date> {
  const snapshotAt = new Date();
  const size = await packs.snapshotSize(platform.db, brain.id, brain.active_space, snapshotAt);
  const { SVC_PACK_MAX_ENTRIES: maxEntries, SVC_PACK_MAX_CHUNKS: maxChunks } = platform.config;
  if (size.entries > maxEntries || size.chunks > maxChunks) {
    throw serviceError('pack_too_large', { message: `The brain holds ${size.entries} native entries and ${size.chunks} chunks; a pack takes at most ${maxEntries} and ${maxChunks}.` });
  }
  const keys = await brainKeys(platform, brain);
  for await (const { entries, chunks } of snapshotPages(platform.db, brain, brain.active_space, snapshotAt, false)) {
    const scopes = new Map(entries.map((entry) => [entry.entry_id, entry.scope]));
    const items = [
      ...entries.flatMap((entry) => {
        const title = entry.title ?? (entry.title_sealed ? openText(keys!, entry.title_sealed, titleAad(brain.id, entry.entry_id)) : null);
        return title ? [{ ref: JSON.stringify([entry.entry_id, 'title']), text: title }] : [];
      }),
      ...chunks.map((chunk) => ({ ref: JSON.stringify([chunk.entry_id, chunk.chunk_index]), text: chunk.content ?? openText(keys!, chunk.content_sealed!, chunkAad(brain.id, chunk.entry_id, chunk.chunk_index)) })),
    ];
    for (let start = 0; start < items.length; start += SCAN_BATCH) {
      const [finding] = await platform.cpu.scanSecrets({ items: items.slice(start, start + SCAN_BATCH) });
      if (!finding) continue;
      const [entryId, part] = JSON.parse(finding.ref) as [string, string | number];
      const where = part === 'title' ? `the title of entry ${entryId}` : `chunk ${part} of entry ${entryId}`;
      throw serviceError('secret_detected', { param: 'entry_id', message: `A secret (${finding.rule}) is in ${where}, scope ${scopes.get(entryId)}: nothing was published. Remove it and publish again.` });
    }
  }
  return snapshotAt;
}

/** The brain's native entries valid at `at`, a page at a time, each with its chunks in `space`. */
async function* snapshotPages(q: Queryable, brain: Pick<repo.BrainRow, 'id'>, space: number, at: Date, vectors = true) {
  for (let after = ''; ; ) {
    const entries = await packs.snapshotEntries(q, brain.id, at, after, COPY_PAGE);
    if (entries.length === 0) return;
    const chunks = await packs.chunksOfVersions(q, brain.id, space, entries.map((entry) => entry.version_id), vectors);
    yield { entries, chunks };
    after = entries.at(-1)!.entry_id;
  }
}

/**
 * Builds a building version in one transaction: its partition, its entries and chunks (opened
 * under the brain's key and sealed under the pack's, as each side's encryption says), the entity
 * graph, then ready. Run again after a failure, it starts clean. Returns the version as it ends.
 */
export async function buildVersion(platform: PackServices, versionId: string): Promise<packs.PackVersionRow | undefined> {
  const built = await buildContent(platform, versionId);
  // The one place a version turns ready: mounts following the pack move to it (again, harmlessly, when a retried build finds it ready).
  if (built?.status === 'ready') await followLatest(platform, built.pack_id, built.version);
  return built;
}

async function buildContent(platform: PackServices, versionId: string): Promise<packs.PackVersionRow | undefined> {
  const version = await packs.versionById(platform.db, versionId);
  if (!version || version.status !== 'building') return version;
  const pack = (await packs.packById(platform.db, version.pack_id))!;
  const brain = await repo.activeBrainById(platform.db, pack.source_brain_id);
  if (!brain) {
    await packs.markVersionFailed(platform.db, versionId, 'the source brain was deleted before the version was built');
    return packs.versionById(platform.db, versionId);
  }
  const sourceKeys = await brainKeys(platform, brain);
  const packKeys = await packKeysOf(platform, pack);
  return withTransaction(platform.db, async (client) => {
    const locked = await packs.versionById(client, versionId, 'update');
    if (locked?.status !== 'building') return locked;
    await packs.clearVersionContent(client, versionId);
    await packs.createVersionPartition(client, versionId);
    for await (const { entries, chunks } of snapshotPages(client, brain, version.source_space, version.snapshot_at)) {
      await packs.insertPackEntries(client, entries.map((entry) => packEntryOf(brain.id, sourceKeys, pack, packKeys, versionId, entry)));
      await packs.insertPackChunks(client, versionId, chunks.map((chunk) => packChunkOf(brain, version.source_space, sourceKeys, pack, packKeys, versionId, chunk)));
    }
    await packs.copyGraph(client, brain.id, versionId);
    return packs.markVersionReady(client, versionId, await packs.versionCounts(client, versionId));
  });
}

/** A plaintext version gets its HNSW index once built (reference mounts search it; until then they scan it exactly). */
export async function indexBuiltVersion(platform: PackServices, versionId: string): Promise<void> {
  const version = await packs.versionById(platform.db, versionId);
  if (version?.status !== 'ready') return;
  const pack = (await packs.packById(platform.db, version.pack_id))!;
  if (pack.encryption_at_publish === 'none') await withIndexBuildMemory(platform.db, platform.config.INDEX_BUILD_MEMORY_MB, (client) => packs.indexVersion(client, versionId, pack.embedding_dims, PACK_HNSW));
}

export async function failVersion(platform: PackServices, versionId: string, reason: string): Promise<void> {
  await packs.markVersionFailed(platform.db, versionId, reason);
}

function packEntryOf(brainId: string, sourceKeys: StoreKeys | null, pack: packs.PackRow, packKeys: StoreKeys | null, versionId: string, entry: repo.EntryRow): packs.PackEntryRow {
  const title = entry.title ?? (entry.title_sealed ? openText(sourceKeys!, entry.title_sealed, titleAad(brainId, entry.entry_id)) : null);
  const body = entry.body ?? openText(sourceKeys!, entry.body_sealed!, bodyAad(brainId, entry.entry_id));
  const sealed = packKeys !== null;
  return {
    version_id: versionId, entry_id: entry.entry_id, scope: entry.scope, class: entry.class, type: entry.type,
    title: sealed ? null : title, body: sealed ? null : body,
    title_sealed: sealed && title !== null ? sealText(packKeys, title, packAad('title', versionId, entry.entry_id)) : null,
    body_sealed: sealed ? sealText(packKeys, body, packAad('body', versionId, entry.entry_id)) : null,
    body_bytes: entry.body_bytes, trust: entry.trust, source: entry.source, created_at: entry.created_at, updated_at: entry.updated_at, chunks: entry.chunks,
  };
}

function packChunkOf(brain: repo.BrainRow, space: number, sourceKeys: StoreKeys | null, pack: packs.PackRow, packKeys: StoreKeys | null, versionId: string, chunk: packs.SnapshotChunk): packs.PackChunkRow {
  const content = chunk.content ?? openText(sourceKeys!, chunk.content_sealed!, chunkAad(brain.id, chunk.entry_id, chunk.chunk_index));
  let vectorText = chunk.embedding;
  let vector: Float32Array | null = null;
  if (vectorText === null) {
    vector = new Float32Array(brain.embedding_dims);
    openVectorInto(sourceKeys!, chunk.embedding_sealed!, vectorAad(brain.id, space, chunk.entry_id, chunk.chunk_index), vector, 0);
    vectorText = `[${Array.from(vector).join(',')}]`;
  }
  const strict = pack.encryption_at_publish === 'strict';
  return {
    entry_id: chunk.entry_id, chunk_index: chunk.chunk_index, scope: chunk.scope,
    content: packKeys ? null : content,
    content_sealed: packKeys ? sealText(packKeys, content, packAad('chunk', versionId, chunk.entry_id, chunk.chunk_index)) : null,
    embedding: strict ? null : vectorText,
    embedding_sealed: strict ? sealVector(packKeys!, vector ?? JSON.parse(vectorText) as number[], packAad('vector', versionId, chunk.entry_id, chunk.chunk_index)) : null,
  };
}

/** A sealed pack's keys (its own data key, wrapped by the master key), or null for a plaintext pack. */
export async function packKeysOf(platform: Pick<PackServices, 'vectorStoreKeys'>, pack: Pick<packs.PackRow, 'id' | 'encryption_at_publish' | 'wrapped_data_key'>): Promise<StoreKeys | null> {
  if (pack.encryption_at_publish === 'none') return null;
  const dataKey = await platform.vectorStoreKeys.dataKey({ id: pack.id, encryption: 'managed', wrapped_data_key: pack.wrapped_data_key, kdf_salt: null });
  return storeKeys(dataKey!);
}

async function wrappedPackKey(platform: Pick<PackServices, 'vectorStoreKeys'>, packId: string, encryption: packs.PackRow['encryption_at_publish']): Promise<Buffer | null> {
  if (encryption === 'none') return null;
  return (await platform.vectorStoreKeys.createStoreKey(packId, 'managed')).wrapped_data_key;
}

export async function listPacks(platform: Pick<PackServices, 'db'>, accountId: string, query: z.output<typeof packListQuery>) {
  const limit = Math.min(query.limit ?? PAGE.defaultLimit, PAGE.maxLimit);
  const offset = query.offset ?? 0;
  const rows = await packs.listReachablePacks(platform.db, accountId, limit, offset);
  return { object: 'list' as const, data: rows.slice(0, limit).map(formatPack), has_more: rows.length > limit, limit, offset };
}

export async function getPack(platform: Pick<PackServices, 'db'>, accountId: string, packId: string) {
  const pack = await reachable(platform.db, accountId, packId);
  const versions = await packs.versionsOf(platform.db, pack.id);
  return { ...formatPack(pack), versions: versions.map((version) => formatVersion(version, pack)) };
}

/** Soft retire (owner only): hidden from new mounts; existing reference mounts keep reading. */
export async function retirePack(platform: Pick<PackServices, 'db'>, accountId: string, packId: string) {
  const pack = await owned(platform.db, accountId, packId);
  return formatPack(await packs.retirePack(platform.db, pack.id));
}

export async function listGrants(platform: Pick<PackServices, 'db'>, accountId: string, packId: string) {
  const pack = await owned(platform.db, accountId, packId);
  return { object: 'list' as const, data: (await packs.grantsOf(platform.db, pack.id)).map(formatGrant) };
}

export async function grantPack(platform: Pick<PackServices, 'db'>, accountId: string, packId: string, body: z.output<typeof grantBody>) {
  const pack = await owned(platform.db, accountId, packId);
  if (!body.account_id) throw serviceError('missing_account_id', { param: 'account_id' });
  if (body.account_id === pack.developer_id) throw serviceError('self_grant', { param: 'account_id' });
  if (!isUuid(body.account_id) || !(await packs.accountExists(platform.db, body.account_id))) throw serviceError('account_not_found', { param: 'account_id', message: 'No such account.' });
  const grant = await packs.insertGrant(platform.db, { id: newId('pgr_'), pack_id: pack.id, account_id: body.account_id });
  return { ...formatGrant(grant), granted: true };
}

/** Revoking stops new mounts from that account; what it already materialized stays its own copy. */
export async function revokeGrant(platform: Pick<PackServices, 'db'>, accountId: string, packId: string, granteeId: string) {
  const pack = await owned(platform.db, accountId, packId);
  if (!isUuid(granteeId) || !(await packs.deleteGrant(platform.db, pack.id, granteeId))) throw serviceError('resource_not_found', { message: 'No such grant on this pack.' });
  return { object: 'brain_pack_grant' as const, pack_id: pack.id, account_id: granteeId, revoked: true };
}

/** A pack the account owns or holds through a grant; anything else is 404 resource_not_found. */
export async function reachable(q: Queryable, accountId: string, packId: string): Promise<packs.PackRow & { granted: boolean }> {
  const pack = /^pack_[0-9A-Za-z]{24}$/.test(packId) ? await packs.reachablePack(q, accountId, packId) : undefined;
  if (!pack) throw serviceError('resource_not_found', { message: 'No such pack.' });
  return pack;
}

/** Owner-only routes: a grantee sees the pack but may not act as its owner (404, as for anyone else). */
async function owned(q: Queryable, accountId: string, packId: string): Promise<packs.PackRow> {
  const pack = await reachable(q, accountId, packId);
  if (pack.granted) throw serviceError('resource_not_found', { message: 'No such pack.' });
  return pack;
}

const iso = (date: Date | null) => date?.toISOString() ?? null;

export function formatPack(pack: packs.PackRow) {
  return {
    id: pack.id,
    object: 'brain_pack' as const,
    name: pack.name,
    slug: pack.slug,
    source_brain_id: pack.source_brain_id,
    embedding_model: pack.embedding_model,
    embedding_dims: pack.embedding_dims,
    visibility: pack.visibility,
    encryption_at_publish: pack.encryption_at_publish,
    latest_version: pack.latest_version,
    retired_at: iso(pack.retired_at),
    created_at: iso(pack.created_at)!,
    updated_at: iso(pack.updated_at)!,
  };
}

export function formatVersion(version: packs.PackVersionRow, pack: Pick<packs.PackRow, 'id'>) {
  return {
    id: version.id,
    object: 'brain_pack_version' as const,
    pack_id: pack.id,
    version: version.version,
    status: packs.versionState(version),
    entry_count: version.entry_count,
    chunk_count: version.chunk_count,
    byte_size: Number(version.byte_size),
    notes: version.notes,
    published_by: version.published_by,
    published_at: iso(version.published_at)!,
    ...(version.failure_reason && { failure_reason: version.failure_reason }),
  };
}

function formatGrant(grant: packs.GrantRow) {
  return { id: grant.id, object: 'brain_pack_grant' as const, pack_id: grant.pack_id, account_id: grant.account_id, created_at: iso(grant.created_at)! };
}
