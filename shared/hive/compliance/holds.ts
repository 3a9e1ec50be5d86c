import { withTransaction, type Db } from '../../db/pool.js';
import { newId } from '../../ids.js';
import { nodeWithRole, type HiveCredential } from '../access.js';
import { hiveError } from '../errors.js';
import { ownedOrganisation, runAdminChange, type ComplianceServices, type HiveAdminChange } from './jobs.js';
import * as repo from './repository.js';
import type { HoldInput } from './schemas.js';

/**
 * Legal holds (POST /v1/admin/hold): a hold on a node keeps everything on it and below it from
 * deletion, by retention or by erasure, until it is lifted by id. Placing and lifting run as a
 * workflow (hiveAdminChangeWorkflow, readable in the Web UI), which the route waits for: placing
 * takes the organisation's hold lock, so a deletion page either committed before it or sees it;
 * lifting then wakes the organisation's queued erasures, which run if no other hold covers them.
 */
export async function holdAction(services: ComplianceServices, credential: HiveCredential, input: HoldInput) {
  await ownedOrganisation(services.db, credential);
  const by = { personId: credential.personId, tokenId: credential.tokenId };
  switch (input.action) {
    case 'list':
      return { data: (await repo.holdsOf(services.db, credential.orgId, input.include_lifted)).map(formatHold) };
    case 'place': {
      const node = await nodeWithRole(services.db, credential, input.node, 'owner');
      // The hold is the one the workflow answers: this request's, or the same placement's already standing.
      const { holdId } = await runAdminChange(services, { kind: 'hold.place', holdId: newId('hld_'), orgId: credential.orgId, nodeId: node.id, reason: input.reason, by });
      return { hold: formatHold((await repo.holdById(services.db, credential.orgId, holdId!))!) };
    }
    case 'lift': {
      const found = await repo.holdById(services.db, credential.orgId, input.id);
      if (!found) throw hiveError(404, `No legal hold ${input.id}.`);
      if (found.lifted_at) return { hold: formatHold(found), woken_erasures: [] };
      const { woken } = await runAdminChange(services, { kind: 'hold.lift', holdId: found.id, orgId: credential.orgId, by });
      return { hold: formatHold((await repo.holdById(services.db, credential.orgId, found.id))!), woken_erasures: woken };
    }
  }
}

/**
 * The step of a placement: the hold and its audit row, once; answers the hold's id. The same
 * placement (organisation, node, reason, token) while its hold is still active is that hold, so a
 * retried step, or the request sent again after its workflow closed, places no second one; once
 * that hold is lifted, asking again places a new hold.
 */
export async function placeHold(db: Db, change: Extract<HiveAdminChange, { kind: 'hold.place' }>): Promise<string> {
  return withTransaction(db, async (client) => {
    await repo.lockOrganisationHolds(client, [change.orgId]);
    const standing = await repo.activeHoldPlacedAlike(client, { orgId: change.orgId, nodeId: change.nodeId, reason: change.reason, tokenId: change.by.tokenId });
    if (standing) return standing;
    if (await repo.insertHold(client, { id: change.holdId, orgId: change.orgId, nodeId: change.nodeId, reason: change.reason, ...change.by })) {
      await repo.insertAudit(client, [{ orgId: change.orgId, nodeId: change.nodeId, action: 'hold.placed', ...change.by, detail: { hold: change.holdId, reason: change.reason } }]);
    }
    return change.holdId;
  });
}

/** The step of a lift: the hold lifted with its audit row (once), then the erasures it may free. */
export async function liftHold(db: Db, change: Extract<HiveAdminChange, { kind: 'hold.lift' }>): Promise<string[]> {
  await withTransaction(db, async (client) => {
    const found = await repo.holdById(client, change.orgId, change.holdId, true);
    if (!found || found.lifted_at) return;
    await repo.liftHold(client, found.id, change.by);
    await repo.insertAudit(client, [{ orgId: change.orgId, nodeId: found.node_id, action: 'hold.lifted', ...change.by, detail: { hold: found.id } }]);
  });
  return repo.queuedErasures(db, change.orgId);
}

function formatHold(hold: repo.HoldRow) {
  return {
    id: hold.id,
    node: { id: hold.node_id, path: hold.node_path },
    reason: hold.reason,
    status: hold.lifted_at ? 'lifted' : 'active',
    placed_at: hold.placed_at.toISOString(),
    placed_by: hold.placed_by,
    lifted_at: hold.lifted_at?.toISOString() ?? null,
    lifted_by: hold.lifted_by,
  };
}
