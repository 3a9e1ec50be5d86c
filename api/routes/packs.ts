import type { Request } from 'express';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { createMount, deleteMount, getMount, listMounts, updateMount } from '../../shared/brains/mounts.js';
import { getPack, grantPack, listGrants, listPacks, publish, retirePack, revokeGrant } from '../../shared/brains/packs.js';
import { grantBody, mountBody, packListQuery, patchMountBody, publishBody } from '../../shared/brains/schemas.js';
import { serviceError } from '../../shared/errors.js';
import { principalOf } from '../middleware/authenticate.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/**
 * Packs and mounts (spec 2), behind SVC_BRAIN_PACKS_ENABLED on top of SVC_BRAINS_ENABLED: with
 * either off the routes answer 404 resource_not_found (and recall runs its single-brain path).
 */
export function packRoutes(platform: GatewayServices): RouteDefinition[] {
  const surface = 'packs';
  const write = developerKey('api:write');
  const read = developerKey('api:read');
  const account = (req: Request) => principalOf(req).accountId;
  const enabled = platform.config.SVC_BRAINS_ENABLED && platform.config.SVC_BRAIN_PACKS_ENABLED;

  const routes: RouteDefinition[] = [
    route({
      method: 'post', path: '/v1/brains/:id/publish', surface, summary: "Publish the brain's native rows as the next version of its pack (created by the first publish)", access: write,
      input: { body: publishBody },
      handle: async (req, res, { params, body }) => res.json(await publish(platform, account(req), params.id, body)),
    }),
    route({
      method: 'get', path: '/v1/packs', surface, summary: 'Packs you own or hold through a grant', access: read,
      input: { query: packListQuery },
      handle: async (req, res, { query }) => res.json(await listPacks(platform, account(req), query)),
    }),
    route({
      method: 'get', path: '/v1/packs/:packId', surface, summary: 'A pack with its versions', access: read,
      handle: async (req, res, { params }) => res.json(await getPack(platform, account(req), params.packId)),
    }),
    route({
      method: 'delete', path: '/v1/packs/:packId', surface, summary: 'Retire a pack (owner only): no new mounts; reference mounts keep reading', access: write,
      handle: async (req, res, { params }) => res.json(await retirePack(platform, account(req), params.packId)),
    }),
    route({
      method: 'get', path: '/v1/packs/:packId/grants', surface, summary: "A pack's grants (owner only)", access: read,
      handle: async (req, res, { params }) => res.json(await listGrants(platform, account(req), params.packId)),
    }),
    route({
      method: 'post', path: '/v1/packs/:packId/grants', surface, summary: 'Grant another account the pack (owner only): it may materialize it', access: write,
      input: { body: grantBody },
      handle: async (req, res, { params, body }) => res.json(await grantPack(platform, account(req), params.packId, body)),
    }),
    route({
      method: 'delete', path: '/v1/packs/:packId/grants/:granteeId', surface, summary: 'Revoke a grant (owner only): no new mounts from that account', access: write,
      handle: async (req, res, { params }) => res.json(await revokeGrant(platform, account(req), params.packId, params.granteeId)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/mounts', surface, summary: 'Mount a pack version into the brain as a read-only base layer (reference, or a materialized copy)', access: write,
      input: { body: mountBody },
      handle: async (req, res, { params, body }) => res.json(await createMount(platform, account(req), params.id, body)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/mounts', surface, summary: "The brain's mounts", access: read,
      handle: async (req, res, { params }) => res.json(await listMounts(platform, account(req), params.id)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/mounts/:mountId', surface, summary: 'A mount: poll it while a materialize mount imports', access: read,
      handle: async (req, res, { params }) => res.json(await getMount(platform, account(req), params.id, params.mountId)),
    }),
    route({
      method: 'patch', path: '/v1/brains/:id/mounts/:mountId', surface, summary: 'Move a mount to another version (re-point, or re-materialize atomically) and or set follow_latest', access: write,
      input: { body: patchMountBody },
      handle: async (req, res, { params, body }) => res.json(await updateMount(platform, account(req), params.id, params.mountId, body)),
    }),
    route({
      method: 'delete', path: '/v1/brains/:id/mounts/:mountId', surface, summary: "Unmount: a materialized copy is erased; a reference pin is released", access: write,
      handle: async (req, res, { params }) => res.json(await deleteMount(platform, account(req), params.id, params.mountId)),
    }),
  ];
  // Off, the same paths answer 404 resource_not_found (the spec's answer for packs that are not there).
  const off = () => {
    throw serviceError('resource_not_found', { message: 'Packs are not enabled here.' });
  };
  return enabled ? routes : routes.map(({ input: _input, ...definition }) => ({ ...definition, handle: off }));
}
