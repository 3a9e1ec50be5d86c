import type { Readable } from 'node:stream';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import type { ClientTokenScope } from '../shared/accounts/authenticate.js';
import type { DeveloperScope } from '../shared/accounts/scopes.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { ServiceError, serviceError, type ErrorCode } from '../shared/errors.js';
import { assertStorableInput, parseBody, parseWith } from '../shared/validation.js';
import { requireDeveloperKey, requireProvisioningKey } from './middleware/authenticate.js';
import { meteredCall } from './middleware/metered-call.js';
import { storableInput } from './middleware/storable-input.js';
import { readMultipartStreaming } from './multipart.js';

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

export interface RouteInput<Body extends z.ZodType = z.ZodType, Query extends z.ZodType = z.ZodType, Read = z.output<Body>, File = unknown> {
  query?: Query;
  /** Request headers the route reads (its handler parses them); described in the OpenAPI document. */
  headers?: z.ZodType;
  /** A JSON body, or with `upload` the text fields of a multipart/form-data body. */
  body?: Body;
  /** A request with no body at all reads as `{}` (a create whose every field is optional); else it is refused. */
  bodyOptional?: boolean;
  /**
   * The domain's own reader of a JSON body that other callers send too (a chat body also arrives as
   * a batch line and as a run's step): the builder calls it instead of parsing with `body`, which
   * then only describes the body.
   */
  read?: (raw: unknown, req: Request) => Read;
  /** Makes the body multipart/form-data: how its `file` part is taken in, as it streams. */
  upload?: Upload<File>;
}

/** A multipart route's `file` part: stored as it arrives (never more than `maxBytes`), discarded again if the request then fails. */
export interface Upload<File> {
  maxBytes: number;
  store: (stream: Readable, info: { filename: string; mimeType: string }) => Promise<File>;
  discard?: (stored: File) => Promise<void>;
}

/** A file part read into memory: for small uploads (audio to transcribe). */
export interface BufferedFile {
  buffer: Buffer;
  filename: string;
  mimeType: string;
}

export const uploadIntoMemory = (maxBytes: number): Upload<BufferedFile> => ({
  maxBytes,
  store: async (stream, info) => {
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return { buffer: Buffer.concat(chunks), ...info };
  },
});

/** The `:name` segments of an Express path, as the keys of its parsed parameters. */
type ParamNames<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}` ? Name | ParamNames<`/${Rest}`> : Path extends `${string}:${infer Name}` ? Name : never;
export type PathParams<Path extends string> = { [Name in ParamNames<Path>]: string };

/** What a route's `handle` receives: its path parameters, query, body and file, parsed with the route's own schemas. */
export interface ParsedInput<Path extends string, Query extends z.ZodType, Read, File> {
  params: PathParams<Path>;
  query: z.output<Query>;
  body: Read;
  /** A multipart route's stored `file` part; absent when none was sent (`fileWithoutName`: a `file` field that was not a file). */
  file: File | undefined;
  fileWithoutName: boolean;
}

export interface RouteResponse {
  status: number;
  contentType: string;
  description: string;
  /** Response headers worth describing, by name. */
  headers?: Record<string, string>;
}

export interface RouteDefinition<Path extends string = string, Body extends z.ZodType = z.ZodType, Query extends z.ZodType = z.ZodType, Read = z.output<Body>, File = unknown> {
  method: HttpMethod;
  /** Express syntax: /v1/customers/:id */
  path: Path;
  /** The compatibility surface (shared/compatibility/surfaces.ts). */
  surface: string;
  summary: string;
  access: RouteAccess;
  input?: RouteInput<Body, Query, Read, File>;
  /** The success response; JSON with status 200 unless said. */
  response?: Partial<RouteResponse>;
  /**
   * Gets the route's input already parsed with its schemas (a failure is the spec's error, from
   * shared/validation.ts), calls one domain function with it and formats the answer.
   */
  handle: (req: Request, res: Response, input: ParsedInput<Path, Query, Read, File>) => unknown;
}

export const route = <Path extends string, Body extends z.ZodType = z.ZodType, Query extends z.ZodType = z.ZodType, Read = z.output<Body>, File = never>(
  definition: RouteDefinition<Path, Body, Query, Read, File>,
): RouteDefinition =>
  definition as unknown as RouteDefinition;

export function responseOf(definition: RouteDefinition): RouteResponse {
  return { status: 200, contentType: 'application/json', description: 'OK', ...definition.response };
}

/** The path's parameters as a schema: each `:name` segment a string. */
export function paramsSchemaOf(path: string): z.ZodObject {
  return z.object(Object.fromEntries([...path.matchAll(/:(\w+)/g)].map(([, name]) => [name!, z.string().min(1)])));
}

/**
 * A router of the table: each route's input held to the text rule, then its access check
 * (authentication, scope, rate limits), then its handler.
 */
export function mountRoutes(platform: GatewayServices, definitions: readonly RouteDefinition[]): Router {
  const router = Router();
  for (const definition of definitions) {
    const access = accessCheck(platform, definition.access);
    router[definition.method](definition.path, storableInput, ...(access ? [access] : []), handlerOf(definition));
  }
  return router;
}

/** Authentication and scope ran before this; then parse the input, then the one domain call. */
function handlerOf(definition: RouteDefinition): RequestHandler {
  const { handle, input = {} } = definition;
  const params = paramsSchemaOf(definition.path);
  const hasParams = Object.keys(params.shape).length > 0;
  return async (req, res) => {
    const parsed: ParsedInput<string, z.ZodType, unknown, unknown> = {
      params: hasParams ? parseWith(params, req.params) : {},
      query: input.query ? parseWith(input.query, req.query) : undefined,
      body: undefined,
      file: undefined,
      fileWithoutName: false,
    };
    if (input.upload) Object.assign(parsed, await readForm(req, input.body, input.upload));
    else if (input.read) parsed.body = input.read(req.body, req);
    else if (input.body) parsed.body = parseBody(input.body, input.bodyOptional ? (req.body ?? {}) : req.body);
    await handle(req, res, parsed);
  };
}

/**
 * A multipart body: each text field checked against its schema as it arrives (a bad field sent
 * before the file refuses the upload before the file's bytes are read), the file part stored as it
 * streams, then the fields parsed whole; what was stored is discarded if they fail.
 */
async function readForm(req: Request, fields: z.ZodType | undefined, upload: Upload<unknown>): Promise<Pick<ParsedInput<string, z.ZodType, unknown, unknown>, 'body' | 'file' | 'fileWithoutName'>> {
  const shape = fields instanceof z.ZodObject ? (fields.shape as Record<string, z.ZodType>) : {};
  const discard = async (stored: unknown) => upload.discard?.(stored);
  const form = await readMultipartStreaming(req, {
    maxFileBytes: upload.maxBytes,
    checkField: (name, value) => {
      assertStorableInput(value, [name]);
      // Own fields only: a field named __proto__ or constructor is not in the schema, whatever Object.prototype holds.
      if (Object.hasOwn(shape, name)) parseWith(shape[name]!, value, [name]);
    },
    storeFile: upload.store,
  }, discard);
  try {
    return { body: fields ? parseWith(fields, form.fields) : form.fields, file: form.file, fileWithoutName: form.fileWithoutName };
  } catch (error) {
    if (form.file !== undefined) await discard(form.file);
    throw error;
  }
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
