import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { useIndexBuildMemory, withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { openText, openVectorInto, type StoreKeys } from '../vector-stores/crypto.js';
import { packAad } from './aad.js';
import { brainKeys, brainOf, type BrainServices } from './brains.js';
import { chunkRows, sealedFields } from './entries.js';
import { collectVersion, importing, moveMount, startMaterialize } from './mount-versions.js';
import * as mounts from './mount-repository.js';
import * as packs from './pack-repository.js';
import { packKeysOf, reachable } from './packs.js';
import * as repo from './repository.js';
import type { mountBody, patchMountBody } from './schemas.js';
import { remapScope } from './scope-map.js';

/**
 * Mounts (spec 2): a brain reads a pack version as a read-only base layer. A reference mount
 * reads the version where it lies (plaintext packs of the brain's own account only); a
 * materialize mount imports a copy into the brain's own store, re-sealed under the brain's key,
 * by a workflow, in one transaction (pending until it commits, never half). Imported rows have
 * origin reference and are read-only; scopes are remapped through the mount's scope_map.
 */
export const MAX_MOUNTS = 16;
export const MAX_REFERENCE_MOUNTS = 1;
const DEFAULT_SCOPE_MAP = { '/': '/' };
const MOUNT_ID = /^mnt_[0-9A-Za-z]{24}$/;
const IMPORT_PAGE = 200;
const MAX_ENTRY_ID = 128;

export async function createMount(platform: BrainServices, developerId: string, brainId: string, body: z.output<typeof mountBody>) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const mode = body.mode ?? 'reference';
  const mount = await withTransaction(platform.db, async (client) => {
    const { granted } = await reachable(client, developerId, body.pack_id);
    const pack = (await packs.packById(client, body.pack_id, 'update'))!;
    const locked = await brainOf(client, developerId, brain.id, 'update');
    // The spec's order: embedding parity, then the pack's state, then the mode's rules and the caps.
    if (pack.embedding_model !== locked.embedding_model || pack.embedding_dims !== locked.embedding_dims) {
      throw serviceError('embedding_model_mismatch', { param: 'pack_id', message: `The pack is embedded with ${pack.embedding_model} (${pack.embedding_dims} dimensions); this brain uses ${locked.embedding_model} (${locked.embedding_dims}).` });
    }
    if (pack.retired_at !== null) throw serviceError('pack_retired', { param: 'pack_id' });
    if (pack.latest_version === 0) throw serviceError('no_published_version', { param: 'pack_id' });
    const version = await mountableVersion(client, pack, body.version ?? pack.latest_version);
    if (mode === 'reference') {
      if (pack.encryption_at_publish !== 'none') throw serviceError('reference_requires_plaintext_pack', { param: 'mode' });
      if (granted) throw serviceError('cross_account_reference_unsupported', { param: 'mode' });
    }
    const counts = await mounts.mountCounts(client, locked.id, pack.id);
    if (counts.of_pack > 0) throw serviceError('mount_exists', { param: 'pack_id' });
    if (mode === 'reference' && counts.reference >= MAX_REFERENCE_MOUNTS) throw serviceError('reference_mount_limit', { param: 'mode' });
    if (counts.total >= MAX_MOUNTS) throw serviceError('mount_limit');
    return mounts.insertMount(client, {
      id: newId('mnt_'), brain_id: locked.id, pack_id: pack.id, mode, pinned_version: version.version, follow_latest: body.follow_latest ?? false,
      scope_map: body.scope_map ?? DEFAULT_SCOPE_MAP, status: mode === 'reference' ? 'ready' : 'pending',
    });
  });
  if (mount.mode === 'materialize') {
    try {
      await startMaterialize(platform, mount);
    } catch (error) {
      // Nothing would ever import it: the mount goes, and the caller may try again.
      await mounts.deleteMount(platform.db, mount.id);
      throw error;
    }
  }
  return formatMount(mount);
}

export async function listMounts(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string) {
  const brain = await brainOf(platform.db, developerId, brainId);
  return { object: 'list' as const, data: (await mounts.mountsOfBrain(platform.db, brain.id)).map(formatMount) };
}

/** One mount: what a caller polls while a materialize mount imports (pending, then ready with materialized_version). */
export async function getMount(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string, mountId: string) {
  const brain = await brainOf(platform.db, developerId, brainId);
  return formatMount(await mountOf(platform.db, brain.id, mountId));
}

/**
 * A new version (reference: re-pointed in place; materialize: re-imported by the workflow, whose
 * transaction adds the new copy, flips the mount and erases the old copy) and or follow_latest.
 * A pack the account no longer reaches (a revoked grant) keeps its mount as it is, but moves no more.
 */
export async function updateMount(platform: BrainServices, developerId: string, brainId: string, mountId: string, body: z.output<typeof patchMountBody>) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const found = await mountOf(platform.db, brain.id, mountId);
  const mount = await withTransaction(platform.db, async (client) => {
    const pack = (await packs.packById(client, found.pack_id, 'update'))!;
    let mount = await mountOf(client, brain.id, mountId, 'update');
    if (body.version !== undefined && body.version !== mount.pinned_version) {
      await reachable(client, developerId, pack.id);
      const version = await mountableVersion(client, pack, body.version);
      mount = await moveMount(client, pack, mount, version.version);
    }
    if (body.follow_latest !== undefined && body.follow_latest !== mount.follow_latest) mount = await mounts.updateMount(client, mount.id, { follow_latest: body.follow_latest });
    return mount;
  });
  // Also when nothing moved: an import whose workflow never started starts now.
  if (importing(mount)) await startMaterialize(platform, mount);
  return formatMount(mount);
}

/** Unmount: a materialize mount's imported rows go (every version of them); a reference mount releases its pin. */
export async function deleteMount(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string, mountId: string) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const found = await mountOf(platform.db, brain.id, mountId);
  await withTransaction(platform.db, async (client) => {
    const pack = (await packs.packById(client, found.pack_id, 'update'))!;
    const mount = await mountOf(client, brain.id, mountId, 'update');
    await brainOf(client, developerId, brain.id, 'update');
    await mounts.deleteMount(client, mount.id);
    if (mount.mode === 'reference') {
      await collectVersion(client, pack, mount.pinned_version);
      return;
    }
    const imported = await mounts.importedEntryIds(client, brain.id, mount.id);
    await repo.eraseEntries(client, brain.id, imported);
    if (imported.length > 0) await repo.bumpWriteSeq(client, brain.id);
  });
  return { id: found.id, object: 'brain_mount' as const, deleted: true };
}

async function mountOf(q: Queryable, brainId: string, mountId: string, lock?: 'update'): Promise<mounts.MountRow> {
  const mount = MOUNT_ID.test(mountId) ? await mounts.mountOf(q, brainId, mountId, lock) : undefined;
  if (!mount) throw serviceError('resource_not_found', { message: 'No such mount on this brain.' });
  return mount;
}

/** A version a mount may target: one that exists (else 400 invalid_version) and is ready (else 409, naming its state). */
async function mountableVersion(q: Queryable, pack: packs.PackRow, version: number): Promise<packs.PackVersionRow> {
  const row = await packs.versionOf(q, pack.id, version);
  if (!row) throw serviceError('invalid_version', { param: 'version', message: `Pack ${pack.id} has no version ${version}.` });
  const state = packs.versionState(row);
  if (state !== 'ready') {
    const why = state === 'collected' ? ' (its content was dropped once no mount pinned it)' : '';
    throw serviceError('pack_version_not_ready', { param: 'version', message: `Version ${version} of pack ${pack.id} is ${state}${why}; only a ready version can be mounted.` });
  }
  return row;
}

/**
 * The id an imported entry has in the consumer brain: unique per mount and version (the old copy
 * and the new one stand side by side until a re-materialization flips), within the 128-character
 * rule. `<mount>:v<version>:<pack entry id>`; a pack entry id too long for that becomes
 * `<mount>:h<version>:<its start>.<digest of the whole>`.
 */
export function importedEntryId(mountId: string, version: number, entryId: string): string {
  const whole = `${importPrefix(mountId, version)}${entryId}`;
  if (whole.length <= MAX_ENTRY_ID) return whole;
  const prefix = `${mountId}:h${version}:`;
  const digest = createHash('sha256').update(entryId).digest('base64url').slice(0, 22);
  return `${prefix}${entryId.slice(0, MAX_ENTRY_ID - prefix.length - digest.length - 1)}.${digest}`;
}

const importPrefix = (mountId: string, version: number) => `${mountId}:v${version}:`;
const isOfVersion = (mountId: string, version: number, entryId: string) => entryId.startsWith(importPrefix(mountId, version)) || entryId.startsWith(`${mountId}:h${version}:`);

/** The pack's entry id of an entry a mount imported (importedEntryId backwards), or null when only a digest of it fit. */
export function packEntryIdOf(mountId: string, entryId: string): string | null {
  const match = entryId.startsWith(`${mountId}:v`) ? /^\d+:/.exec(entryId.slice(mountId.length + 2)) : null;
  return match ? entryId.slice(mountId.length + 2 + match[0].length) : null;
}

// ---- the workflow's activity ---------------------------------------------------------------------

class MountMoved extends Error {}

/**
 * Imports `version` of a materialize mount's pack into its brain, in one transaction: every entry
 * and chunk of the version, opened under the pack's key and sealed as the brain seals its own,
 * scopes remapped; then the mount flips to ready at that version, the previous copy is erased and
 * the brain's write_seq moves. 'stale' when the mount is gone or has moved to another version
 * meanwhile (nothing lands). A worker killed inside leaves the mount as it was.
 */
export async function materializeMount(platform: BrainServices, mountId: string, version: number, onProgress: () => void = () => undefined): Promise<'ready' | 'stale'> {
  const mount = await mounts.mountById(platform.db, mountId);
  if (!mount || mount.mode !== 'materialize' || mount.pinned_version !== version) return 'stale';
  if (mount.materialized_version === version) return 'ready';
  const brain = await repo.activeBrainById(platform.db, mount.brain_id);
  const pack = (await packs.packById(platform.db, mount.pack_id))!;
  const source = await packs.versionOf(platform.db, pack.id, version);
  // A pending import's version keeps its content (mount-versions.ts collectVersion), so this is a mount on its way out.
  if (!brain || source?.status !== 'ready' || source.content_dropped_at !== null) return 'stale';
  const keys = { pack: await packKeysOf(platform, pack), brain: await brainKeys(platform, brain) };

  try {
    return await withTransaction(platform.db, async (client): Promise<'ready'> => {
      await mounts.lockMountImport(client, mountId);
      const current = await mounts.mountById(client, mountId);
      if (current?.pinned_version !== version) throw new MountMoved();
      if (current.materialized_version === version) return 'ready';
      const space = brain.active_space;
      const buildGraphAfter = await takeEmptyGraph(client, brain, space);
      for (let after = ''; ; ) {
        const entries = await mounts.versionEntries(client, source.id, after, IMPORT_PAGE);
        if (entries.length === 0) break;
        await importPage(client, brain, space, keys, current, source, entries);
        onProgress();
        after = entries.at(-1)!.entry_id;
      }
      if (buildGraphAfter) {
        await useIndexBuildMemory(client, platform.config.INDEX_BUILD_MEMORY_MB);
        await repo.createSpaceIndex(client, brain.id, space, brain.embedding_dims);
      }
      // The flip, under the mount's lock, then the brain's (the order every writer of mounts keeps).
      const flipping = await mounts.mountById(client, mountId, 'update');
      if (flipping?.pinned_version !== version) throw new MountMoved();
      const target = await repo.activeBrainById(client, brain.id, 'update');
      if (!target) throw new MountMoved();
      if (target.active_space !== space || target.encryption !== brain.encryption) {
        // A reindex swapped, or the empty brain changed its encryption, meanwhile: the activity's retry imports again.
        throw new Error(`brain ${brain.id} changed its space or encryption during the import; importing again`);
      }
      await repo.eraseEntries(client, brain.id, (await mounts.importedEntryIds(client, brain.id, mountId)).filter((id) => !isOfVersion(mountId, version, id)));
      await mounts.markMaterialized(client, mountId, version);
      await repo.bumpWriteSeq(client, brain.id);
      return 'ready';
    });
  } catch (error) {
    if (error instanceof MountMoved) return 'stale';
    throw error;
  }
}

interface ImportKeys {
  pack: StoreKeys | null;
  brain: StoreKeys | null;
}

/**
 * An import into a brain that holds nothing yet writes its rows first and builds the HNSW graph
 * once over them, as pgvector advises for a bulk load: an import of 10,000 rows took 25.3 s so
 * (the build about 21 s of it) against 91 s linking each row into the graph (bench/packs.ts,
 * 2 cores). Dropping the empty graph takes the brain's chunks whole until the import commits, so
 * recalls and writes of that brain wait for it. Every brain writer locks the brain's row before
 * it touches its chunks, and so does this, before its first read of them: two imports into one
 * empty brain take turns. A brain
 * that holds rows keeps its graph, and the import links each row into it. Strict brains have none.
 */
async function takeEmptyGraph(client: Queryable, brain: repo.BrainRow, space: number): Promise<boolean> {
  if (brain.encryption === 'strict' || (await repo.hasEntries(client, brain.id))) return false;
  await repo.activeBrainById(client, brain.id, 'update');
  if (await repo.hasEntries(client, brain.id)) return false;
  await repo.dropSpaceIndex(client, brain.id, space);
  return true;
}

async function importPage(q: Queryable, brain: repo.BrainRow, space: number, keys: ImportKeys, mount: mounts.MountRow, source: packs.PackVersionRow, page: mounts.PackEntry[]): Promise<void> {
  const entries = page.flatMap((entry) => {
    const scope = remapScope(mount.scope_map, entry.scope);
    return scope === null ? [] : [{ entry, scope, entryId: importedEntryId(mount.id, source.version, entry.entry_id) }];
  });
  if (entries.length === 0) return;
  const chunks = new Map<string, mounts.PackChunk[]>();
  for (const chunk of await mounts.versionChunks(q, source.id, entries.map(({ entry }) => entry.entry_id))) {
    const ofEntry = chunks.get(chunk.entry_id);
    if (ofEntry) ofEntry.push(chunk);
    else chunks.set(chunk.entry_id, [chunk]);
  }
  const opened = entries.map(({ entry, scope, entryId }) => ({
    entryId, scope, entry, ...openPackEntry(keys.pack, source.id, entry),
    chunks: (chunks.get(entry.entry_id) ?? []).map((chunk) => openPackChunk(keys.pack, source, brain.embedding_dims, chunk)),
  }));
  const stored = await mounts.insertImportedEntries(q, brain.id, mount.id, opened.map(({ entryId, scope, entry, title, body, chunks: parts }) => ({
    ...entry, entry_id: entryId, scope, ...sealedFields(keys.brain, brain.id, entryId, title, body), chunks: parts.length,
  })));
  await mounts.insertImportedChunks(q, brain.id, space, opened.flatMap(({ entryId, scope, chunks: parts }) => {
    const { version_id, valid_from } = stored.get(entryId)!;
    return chunkRows(brain, keys.brain, space, entryId, parts, parts.map((part) => part.vector)).map((row) => ({ ...row, version_id, entry_id: entryId, scope, valid_from }));
  }));
}

/** A pack entry's title and body in plaintext (opened under the pack's key when the pack is sealed). */
function openPackEntry(packKeys: StoreKeys | null, versionId: string, entry: mounts.PackEntry): { title: string | null; body: string } {
  if (entry.body !== null) return { title: entry.title, body: entry.body };
  return {
    title: entry.title_sealed ? openText(packKeys!, entry.title_sealed, packAad('title', versionId, entry.entry_id)) : null,
    body: openText(packKeys!, entry.body_sealed!, packAad('body', versionId, entry.entry_id)),
  };
}

/** A pack chunk's text and vector in plaintext (a strict pack seals its vectors too). */
function openPackChunk(packKeys: StoreKeys | null, source: packs.PackVersionRow, dims: number, chunk: mounts.PackChunk): { content: string; vector: number[] } {
  const content = chunk.content ?? openText(packKeys!, chunk.content_sealed!, packAad('chunk', source.id, chunk.entry_id, chunk.chunk_index));
  if (chunk.embedding !== null) return { content, vector: chunk.embedding };
  const vector = new Float32Array(dims);
  openVectorInto(packKeys!, chunk.embedding_sealed!, packAad('vector', source.id, chunk.entry_id, chunk.chunk_index), vector, 0);
  return { content, vector: Array.from(vector) };
}

const iso = (date: Date) => date.toISOString();

export function formatMount(mount: mounts.MountRow) {
  return {
    id: mount.id,
    object: 'brain_mount' as const,
    brain_id: mount.brain_id,
    pack_id: mount.pack_id,
    mode: mount.mode,
    pinned_version: mount.pinned_version,
    follow_latest: mount.follow_latest,
    scope_map: mount.scope_map,
    status: mount.status,
    materialized_version: mount.materialized_version,
    created_at: iso(mount.created_at),
    updated_at: iso(mount.updated_at),
  };
}
