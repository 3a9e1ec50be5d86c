import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { withTransaction, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { brainOf, type BrainServices } from './brains.js';
import { entitiesToForget } from './entities.js';
import * as entityRepo from './entity-repository.js';
import * as repo from './repository.js';
import type { forgetBody } from './schemas.js';

/**
 * Forget (spec 2): erase the entries of a scope and its descendants, those learned from one
 * source, or an entity with its edges and every entry linked to it. Unlike an entry DELETE,
 * which keeps history for recall as_of, forget erases every version of what it selects, so
 * nothing forgotten comes back through time travel. Reference
 * entries (from packs) are always skipped. A dry run counts what would go and returns a preview
 * token naming that exact set; a delete carrying the token runs only if the set is unchanged.
 * Everything happens in one transaction under the brain's row lock: nothing is half-forgotten.
 */
export async function forget(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string, body: z.output<typeof forgetBody>) {
  checkOneSelector(body);
  if (body.dry_run && body.preview_token !== undefined) {
    throw serviceError('invalid_request', { param: 'preview_token', message: 'preview_token goes with the delete that follows a dry run, not with the dry run.' });
  }
  return withTransaction(platform.db, async (client) => {
    const brain = await brainOf(client, developerId, brainId, 'update');
    const selector = await selectorOf(client, brain.id, body);
    const targets = await repo.forgetTargets(client, brain.id, selector);
    const native = targets.filter((target) => target.origin === 'native');
    const live = native.filter((target) => target.live).length;
    const skipped = targets.filter((target) => target.origin === 'reference' && target.live).length;
    const token = previewToken(brain.id, selector, native);
    if (body.dry_run) {
      return { object: 'brain.forget' as const, dry_run: true, would_delete: { native: live }, would_skip: { reference: skipped }, preview_token: token };
    }
    if (body.preview_token !== undefined && body.preview_token !== token) throw serviceError('preview_stale', { param: 'preview_token' });
    await repo.eraseEntries(client, brain.id, native.map((target) => target.entry_id));
    if ('entityIds' in selector) await entityRepo.deleteEntities(client, brain.id, selector.entityIds);
    if (native.length > 0) await repo.bumpWriteSeq(client, brain.id);
    return { object: 'brain.forget' as const, dry_run: false, deleted: { native: live }, skipped: { reference: skipped } };
  });
}

function checkOneSelector(body: z.output<typeof forgetBody>): void {
  const given = (['scope', 'source', 'entity'] as const).filter((field) => body[field] !== undefined);
  if (given.length !== 1) {
    throw serviceError('invalid_request', { param: given[1] ?? 'scope', message: 'Send exactly one of scope, source or entity.' });
  }
}

/** An entity selector names the entities it resolved to (locked), so the preview token changes with them. */
async function selectorOf(q: Queryable, brainId: string, body: z.output<typeof forgetBody>): Promise<repo.ForgetSelector> {
  if (body.scope !== undefined) return { scope: body.scope };
  if (body.source !== undefined) return { source: body.source };
  return { entityIds: await entitiesToForget(q, brainId, body.entity!) };
}

/** Names the exact set a delete would erase: each entry at its newest version (any write changes it). */
function previewToken(brainId: string, selector: repo.ForgetSelector, targets: repo.ForgetTarget[]): string {
  const hash = createHash('sha256').update(JSON.stringify([brainId, selector, targets.map((target) => [target.entry_id, target.version_id])]));
  return `fpv_${hash.digest('base64url').slice(0, 43)}`;
}
