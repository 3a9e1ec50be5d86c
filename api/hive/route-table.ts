import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import type { HiveServices } from '../../shared/composition/hive.js';
import { authenticate, type HiveCredential } from '../../shared/hive/access.js';
import { parseBody } from '../../shared/validation.js';
import { assertStorableRequest } from '../middleware/storable-input.js';

/**
 * The hive's one route table, as the gateway's (api/route-table.ts): each route is data (method,
 * path, who may call it, its body schema, its handler) and the builder runs authentication (401),
 * then the zod parse of the body (400), then the handler, which calls one domain function; the
 * domain answers 403 for a grant the credential lacks. Errors reach api/hive/errors.ts, the one
 * place the hive's `{"error": "<message>"}` is written.
 */
export type HiveAccess = 'public' | 'credential';

export interface HiveRouteDefinition<Body extends z.ZodType = z.ZodType> {
  method: 'get' | 'post';
  path: string;
  summary: string;
  access: HiveAccess;
  /** The JSON body; a request with no body reads as `{}`. */
  body?: Body;
  handle: (input: { req: Request; res: Response; body: z.output<Body>; credential: HiveCredential }) => unknown;
}

export const hiveRoute = <Body extends z.ZodType>(definition: HiveRouteDefinition<Body>): HiveRouteDefinition =>
  definition as unknown as HiveRouteDefinition;

export function mountHiveRoutes(hive: HiveServices, definitions: readonly HiveRouteDefinition[]): Router {
  const router = Router();
  for (const definition of definitions) router[definition.method](definition.path, handlerOf(hive, definition));
  return router;
}

function handlerOf(hive: HiveServices, definition: HiveRouteDefinition): RequestHandler {
  return async (req, res) => {
    assertStorableRequest(req);
    // Public routes get no credential; their handlers never read it.
    const credential = definition.access === 'credential' ? await authenticate(hive.db, req.headers.authorization) : (undefined as unknown as HiveCredential);
    const body = definition.body ? parseBody(definition.body, req.body ?? {}) : undefined;
    await definition.handle({ req, res, body, credential });
  };
}
