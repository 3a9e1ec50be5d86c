import type { Request } from 'express';
import { formatProfile, formatSlot, getProfile, getSlot, listProfiles, listSlots, profileBody, putProfile, putSlot, removeProfile, removeSlot, slotBody } from '../../shared/models/definitions.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { pageQuery } from '../../shared/pagination.js';
import { principalOf } from '../middleware/authenticate.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/**
 * A developer's model definitions: slot aliases (/v1/model_slots) and dynamic profiles
 * (/v1/dynamic_profiles), each addressed by its name. PUT creates (201) or replaces (200);
 * reads need api:read, writes api:write; client tokens reach none of them.
 */
export function modelDefinitionRoutes(platform: GatewayServices): RouteDefinition[] {
  const { db } = platform;
  const read = developerKey('api:read');
  const write = developerKey('api:write');
  const developer = (req: Request) => principalOf(req).accountId;
  const slots = 'model_slots';
  const profiles = 'dynamic_profiles';
  return [
    route({
      method: 'get', path: '/v1/model_slots', surface: slots, summary: 'List model slots', access: read, input: { query: pageQuery },
      handle: async (req, res, { query }) => {
        res.json(await listSlots(db, developer(req), query));
      },
    }),
    route({
      method: 'put', path: '/v1/model_slots/:name', surface: slots, summary: 'Create (201) or replace (200) a model slot', access: write, input: { body: slotBody, bodyOptional: true },
      handle: async (req, res, { params, body }) => {
        const { created, ...row } = await putSlot(db, developer(req), params.name, body);
        res.status(created ? 201 : 200).json(formatSlot(row));
      },
    }),
    route({
      method: 'get', path: '/v1/model_slots/:name', surface: slots, summary: 'Retrieve a model slot', access: read,
      handle: async (req, res, { params }) => {
        res.json(formatSlot(await getSlot(db, developer(req), params.name)));
      },
    }),
    route({
      method: 'delete', path: '/v1/model_slots/:name', surface: slots, summary: 'Delete a model slot', access: write,
      handle: async (req, res, { params }) => {
        res.json(await removeSlot(db, developer(req), params.name));
      },
    }),
    route({
      method: 'get', path: '/v1/dynamic_profiles', surface: profiles, summary: 'List dynamic profiles', access: read, input: { query: pageQuery },
      handle: async (req, res, { query }) => {
        res.json(await listProfiles(db, developer(req), query));
      },
    }),
    route({
      method: 'put', path: '/v1/dynamic_profiles/:name', surface: profiles, summary: 'Create (201) or replace (200) a dynamic profile', access: write, input: { body: profileBody, bodyOptional: true },
      handle: async (req, res, { params, body }) => {
        const { created, ...row } = await putProfile(db, developer(req), params.name, body);
        res.status(created ? 201 : 200).json(formatProfile(row));
      },
    }),
    route({
      method: 'get', path: '/v1/dynamic_profiles/:name', surface: profiles, summary: 'Retrieve a dynamic profile', access: read,
      handle: async (req, res, { params }) => {
        res.json(formatProfile(await getProfile(db, developer(req), params.name)));
      },
    }),
    route({
      method: 'delete', path: '/v1/dynamic_profiles/:name', surface: profiles, summary: 'Delete a dynamic profile', access: write,
      handle: async (req, res, { params }) => {
        res.json(await removeProfile(db, developer(req), params.name));
      },
    }),
  ];
}
