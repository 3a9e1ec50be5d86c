import { withTransaction } from '../../db/pool.js';
import { nodeWithRole, type HiveCredential } from '../access.js';
import { hiveError } from '../errors.js';
import { ownedOrganisation, type ComplianceServices } from './jobs.js';
import * as repo from './repository.js';
import type { HoldInput } from './schemas.js';

/**
 * Legal holds (POST /v1/admin/hold): a hold on a node keeps everything on it and below it from
 * deletion, by retention or by erasure, until it is lifted by id. Placing one takes the
 * organisation's hold lock, so a deletion page either committed before it or sees it. Lifting one
 * wakes the organisation's queued erasures, which run if no other hold still covers them.
 */
export async function holdAction(services: ComplianceServices, credential: HiveCredential, input: HoldInput) {
  await ownedOrganisation(services.db, credential);
  const by = { personId: credential.personId, tokenId: credential.tokenId };
  switch (input.action) {
    case 'list':
      return { data: (await repo.holdsOf(services.db, credential.orgId, input.include_lifted)).map(formatHold) };
    case 'place': {
      const node = await nodeWithRole(services.db, credential, input.node, 'owner');
      const hold = await withTransaction(services.db, async (client) => {
        await repo.lockOrganisationHolds(client, [credential.orgId]);
        const placed = await repo.insertHold(client, { orgId: credential.orgId, nodeId: node.id, reason: input.reason, ...by });
        await repo.insertAudit(client, [{ orgId: credential.orgId, nodeId: node.id, action: 'hold.placed', ...by, detail: { hold: placed.id, reason: input.reason } }]);
        return placed;
      });
      return { hold: formatHold(hold) };
    }
    case 'lift': {
      const hold = await withTransaction(services.db, async (client) => {
        const found = await repo.holdById(client, credential.orgId, input.id, true);
        if (!found) throw hiveError(404, `No legal hold ${input.id}.`);
        if (found.lifted_at) return found;
        await repo.liftHold(client, found.id, by);
        await repo.insertAudit(client, [{ orgId: credential.orgId, nodeId: found.node_id, action: 'hold.lifted', ...by, detail: { hold: found.id } }]);
        return (await repo.holdById(client, credential.orgId, found.id))!;
      });
      return { hold: formatHold(hold), woken_erasures: await wakeQueuedErasures(services, credential.orgId) };
    }
  }
}

/**
 * Signals each queued erasure of the organisation that a hold lifted. A signal that does not
 * arrive (this process dies first) costs an hour at most: a queued erasure looks again hourly.
 */
async function wakeQueuedErasures(services: ComplianceServices, orgId: string): Promise<string[]> {
  const queued = await repo.queuedErasures(services.db, orgId);
  for (const jobId of queued) {
    try {
      await services.temporal.client.workflow.getHandle(jobId).signal('holdLifted');
    } catch (error) {
      services.logger.warn({ err: error, job: jobId }, 'could not wake a queued erasure; it looks at the holds again within the hour');
    }
  }
  return queued;
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
