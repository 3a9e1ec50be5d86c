import { Router, type Request } from 'express';
import { formatProfile, formatSlot, getProfile, getSlot, listProfiles, listSlots, putProfile, putSlot, removeProfile, removeSlot } from '../../shared/models/definitions.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf, requireDeveloperKey } from '../middleware/authenticate.js';

/**
 * A developer's model definitions: slot aliases (/v1/model_slots) and dynamic profiles
 * (/v1/dynamic_profiles), each addressed by its name. PUT creates (201) or replaces (200);
 * reads need api:read, writes api:write; client tokens reach none of them.
 */
export function modelDefinitionRoutes(platform: GatewayServices): Router {
  const { db } = platform;
  const router = Router();
  const read = requireDeveloperKey(platform, 'api:read');
  const write = requireDeveloperKey(platform, 'api:write');
  const developer = (req: Request) => principalOf(req).accountId;
  const name = (req: Request) => String(req.params.name);

  router.get('/v1/model_slots', read, async (req, res) => {
    res.json(await listSlots(db, developer(req), req.query));
  });
  router.put('/v1/model_slots/:name', write, async (req, res) => {
    const { created, ...row } = await putSlot(db, developer(req), name(req), req.body);
    res.status(created ? 201 : 200).json(formatSlot(row));
  });
  router.get('/v1/model_slots/:name', read, async (req, res) => {
    res.json(formatSlot(await getSlot(db, developer(req), name(req))));
  });
  router.delete('/v1/model_slots/:name', write, async (req, res) => {
    res.json(await removeSlot(db, developer(req), name(req)));
  });

  router.get('/v1/dynamic_profiles', read, async (req, res) => {
    res.json(await listProfiles(db, developer(req), req.query));
  });
  router.put('/v1/dynamic_profiles/:name', write, async (req, res) => {
    const { created, ...row } = await putProfile(db, developer(req), name(req), req.body);
    res.status(created ? 201 : 200).json(formatProfile(row));
  });
  router.get('/v1/dynamic_profiles/:name', read, async (req, res) => {
    res.json(formatProfile(await getProfile(db, developer(req), name(req))));
  });
  router.delete('/v1/dynamic_profiles/:name', write, async (req, res) => {
    res.json(await removeProfile(db, developer(req), name(req)));
  });
  return router;
}
