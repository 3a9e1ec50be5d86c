import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import type { ClientTokenScope } from '../shared/accounts/authenticate.js';
import type { DeveloperScope } from '../shared/accounts/scopes.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { ServiceError, serviceError, type ErrorCode } from '../shared/errors.js';
import { parseBody, parseWith } from '../shared/validation.js';
import { requireDeveloperKey, requireProvisioningKey } from './middleware/authenticate.js';
import { meteredCall } from './middleware/metered-call.js';

/**
 * The gateway's one route table. Every /v1 route is declared here as data: its method and path,
 * the compatibility surface it belongs to, who may call it, the zod schemas its input is read
 * with, and its handler. The app mounts the table; GET /v1/compatibility and GET /v1/openapi.json
 * are derived from the same declarations, so neither can drift from what is mounted.
 */
export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

export type RouteAccess =
  | { kind: 'public' }
  /** A developer `ko_` key with the scope; client tokens are refused. */
  | { kind: 'developer_key'; scope: DeveloperScope; keyErrorsAs?: ErrorCode }
  /** The developer's `rsk_` provisioning key. */
  | { kind: 'provisioning_key' }
  /** A metered call: a developer key with the scope ('any': every valid key) or a client token with its own scope (null: none). */
  | { kind: 'metered'; developer: DeveloperScope | 'any'; clientToken: ClientTokenScope | null };

export interface RouteInput<Body extends z.ZodType = z.ZodType, Query extends z.ZodType = z.ZodType> {
  params?: z.ZodType;
  query?: Query;
  /** Request headers the route reads (its handler parses them); described in the OpenAPI document. */
  headers?: z.ZodType;
  /** A JSON body, or the fields of a multipart/form-data upload. */
  body?: Body;
  bodyEncoding?: 'json' | 'multipart';
  /** A request with no body at all reads as `{}` (a create whose every field is optional); else it is refused. */
  bodyOptional?: boolean;
}

/** What a route's `handle` receives: its body and query, parsed with the route's own schemas. */
export interface ParsedInput<Body extends z.ZodType, Query extends z.ZodType> {
  body: z.output<Body>;
  query: z.output<Query>;
}

export interface RouteResponse {
  status: number;
  contentType: string;
  description: string;
  /** Response headers worth describing, by name. */
  headers?: Record<string, string>;
}

export interface RouteDefinition<Body extends z.ZodType = z.ZodType, Query extends z.ZodType = z.ZodType> {
  method: HttpMethod;
  /** Express syntax: /v1/customers/:id */
  path: string;
  /** The compatibility surface (shared/compatibility/surfaces.ts). */
  surface: string;
  summary: string;
  access: RouteAccess;
  input?: RouteInput<Body, Query>;
  /** The success response; JSON with status 200 unless said. */
  response?: Partial<RouteResponse>;
  /**
   * A route whose input the builder parses: `handle` gets the body and query already parsed with
   * `input`'s schemas (a failure is the spec's error, from shared/validation.ts) and calls one
   * domain function with them.
   */
  handle?: (req: Request, res: Response, input: ParsedInput<Body, Query>) => unknown;
  /** A route that reads its own input (a multipart stream, or a domain function that also serves batch lines). */
  handler?: RequestHandler;
}

export const route = <Body extends z.ZodType = z.ZodType, Query extends z.ZodType = z.ZodType>(definition: RouteDefinition<Body, Query>): RouteDefinition =>
  definition as unknown as RouteDefinition;

export function responseOf(definition: RouteDefinition): RouteResponse {
  return { status: 200, contentType: 'application/json', description: 'OK', ...definition.response };
}

/** A router of the table: each route's access check (authentication, scope, rate limits), then its handler. */
export function mountRoutes(platform: GatewayServices, definitions: readonly RouteDefinition[]): Router {
  const router = Router();
  for (const definition of definitions) {
    const access = accessCheck(platform, definition.access);
    router[definition.method](definition.path, ...(access ? [access] : []), handlerOf(definition));
  }
  return router;
}

/** Authentication and scope ran before this; then parse the input, then the one domain call. */
function handlerOf(definition: RouteDefinition): RequestHandler {
  const { handle, handler, input = {} } = definition;
  if (handler) return handler;
  if (!handle) throw new Error(`route ${definition.method} ${definition.path} has neither handle nor handler`);
  return async (req, res) => {
    const body = input.body ? parseBody(input.body, input.bodyOptional ? (req.body ?? {}) : req.body) : undefined;
    const query = input.query ? parseWith(input.query, req.query) : undefined;
    await handle(req, res, { body, query });
  };
}

function accessCheck(platform: GatewayServices, access: RouteAccess): RequestHandler | undefined {
  switch (access.kind) {
    case 'public':
      return undefined;
    case 'developer_key': {
      const check = requireDeveloperKey(platform, access.scope);
      return access.keyErrorsAs ? reportingKeyProblemsAs(check, access.keyErrorsAs) : check;
    }
    case 'provisioning_key':
      return requireProvisioningKey(platform);
    case 'metered':
      return meteredCall(platform, { developer: access.developer, clientToken: access.clientToken });
  }
}

const KEY_PROBLEMS = new Set<ErrorCode>(['missing_token', 'invalid_token_format', 'invalid_token']);

/** A route whose documented error for a missing, malformed or unknown key is one code of its own. */
function reportingKeyProblemsAs(authenticate: RequestHandler, code: ErrorCode): RequestHandler {
  return async (req, res, next) => {
    try {
      await authenticate(req, res, next);
    } catch (error) {
      if (error instanceof ServiceError && KEY_PROBLEMS.has(error.code)) throw serviceError(code);
      throw error;
    }
  };
}

export const PUBLIC: RouteAccess = { kind: 'public' };
export const PROVISIONING_KEY: RouteAccess = { kind: 'provisioning_key' };
export const developerKey = (scope: DeveloperScope): RouteAccess => ({ kind: 'developer_key', scope });
export const metered = (developer: DeveloperScope | 'any', clientToken: ClientTokenScope | null): RouteAccess => ({ kind: 'metered', developer, clientToken });
