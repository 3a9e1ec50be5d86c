import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { withTransaction, type Queryable } from '../db/pool.js';
import type { BrainServices } from './brains.js';
import * as mounts from './mount-repository.js';
import * as packs from './pack-repository.js';

/**
 * Which version a mount is on (spec 2), for both who moves it: PATCH of a mount (mounts.ts) and
 * follow_latest when a new version turns ready (packs.ts). Kept apart from mounts.ts, which
 * depends on packs.ts, so that packs.ts can call in here without a cycle.
 *
 * A reference mount re-points in place. A materialize mount turns pending at its new version and
 * a workflow re-imports it (mounts.ts materializeMount). A reference pin keeps a version's
 * content; when the last reference mount on a version drops or re-points and the version is not
 * its pack's latest, the content is dropped (the version row stays, never mountable again).
 *
 * Locks are taken pack, then mount, then brain, by every writer of mounts.
 */
export const MATERIALIZE_WORKFLOW = 'packMaterializeWorkflow';

/** Mirrors workflows/pack-materialize.ts. */
export interface MaterializeWorkflowInput {
  mountId: string;
  version: number;
  heartbeatTimeoutSeconds: number;
}

type MountServices = Pick<BrainServices, 'db' | 'config' | 'temporal' | 'logger'>;

/**
 * Moves a mount (locked, with its pack locked) to `version`, a ready version of its pack: a
 * reference mount re-points and releases its old pin; a materialize mount targets it, and the
 * caller starts its import (`importing`). Meanwhile a materialize mount keeps serving the copy it
 * holds (ready, at materialized_version) until the import flips it; one never imported stays pending.
 */
export async function moveMount(q: Queryable, pack: packs.PackRow, mount: mounts.MountRow, version: number): Promise<mounts.MountRow> {
  const moved = await mounts.updateMount(q, mount.id, { pinned_version: version });
  if (mount.mode === 'reference' && mount.pinned_version !== version) await collectVersion(q, pack, mount.pinned_version);
  return moved;
}

/** A materialize mount whose target version is not the copy it holds: its import is (or must be) under way. */
export const importing = (mount: Pick<mounts.MountRow, 'mode' | 'pinned_version' | 'materialized_version'>) =>
  mount.mode === 'materialize' && mount.materialized_version !== mount.pinned_version;

/**
 * A version a reference mount no longer pins loses its content, unless it is its pack's latest or
 * still in use (another reference pin, an import under way). The pack is locked by the caller.
 */
export async function collectVersion(q: Queryable, pack: packs.PackRow, version: number): Promise<void> {
  if (version === pack.latest_version || (await mounts.versionInUse(q, pack.id, version))) return;
  const row = await packs.versionOf(q, pack.id, version);
  if (row?.status !== 'ready' || row.content_dropped_at !== null) return;
  await mounts.dropVersionContent(q, row.id);
}

/**
 * follow_latest: once `version` of a pack is ready (and is its latest), every mount following the
 * pack moves to it. Idempotent: mounts already there are left alone.
 */
export async function followLatest(platform: MountServices, packId: string, version: number): Promise<void> {
  const pending = await withTransaction(platform.db, async (client) => {
    const pack = await packs.packById(client, packId, 'update');
    if (!pack || pack.latest_version !== version) return [];
    const moved: mounts.MountRow[] = [];
    for (const mount of await mounts.followingMounts(client, pack.id, version)) moved.push(await moveMount(client, pack, mount, version));
    return moved.filter(importing);
  });
  for (const mount of pending) {
    // Unstarted, the mount keeps serving its old copy; a PATCH to the same version starts the import again.
    await startMaterialize(platform, mount).catch((error: unknown) => platform.logger.warn({ err: error, mountId: mount.id }, 'pack materialize workflow not started'));
  }
}

/** Starts the import of a pending materialize mount's version (one workflow per mount and version). */
export async function startMaterialize(platform: MountServices, mount: Pick<mounts.MountRow, 'id' | 'pinned_version' | 'brain_id' | 'pack_id'>): Promise<void> {
  const input: MaterializeWorkflowInput = { mountId: mount.id, version: mount.pinned_version, heartbeatTimeoutSeconds: platform.config.PACK_MATERIALIZE_HEARTBEAT_TIMEOUT_SECONDS };
  try {
    await platform.temporal.client.workflow.start(MATERIALIZE_WORKFLOW, {
      taskQueue: platform.config.TEMPORAL_TASK_QUEUE,
      workflowId: `pack-materialize-${mount.id}-v${mount.pinned_version}`,
      args: [input],
      staticSummary: `Materialize version ${mount.pinned_version} of pack ${mount.pack_id} into brain ${mount.brain_id}`,
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
}
