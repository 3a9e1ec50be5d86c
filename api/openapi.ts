import { z } from 'zod';
import { openApiPath } from '../shared/compatibility/surfaces.js';
import { ERROR_CODES, ERROR_TYPES } from '../shared/errors.js';
import { paramsSchemaOf, responseOf, type RouteAccess, type RouteDefinition } from './route-table.js';

/**
 * The OpenAPI 3.1 description of the mounted routes, generated from the route table: each route's
 * parameters, request body and query from the same zod schemas its input is read with (zod's
 * JSON Schema output, draft 2020-12 as OpenAPI 3.1 uses), its security, its success response, and
 * the one error envelope every route answers failures with.
 */
export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, OpenApiOperation>> };

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  tags: string[];
  security?: Array<Record<string, string[]>>;
  parameters?: unknown[];
  requestBody?: unknown;
  responses: Record<string, unknown>;
}

const ERROR_RESPONSE = { $ref: '#/components/responses/Error' };

const errorEnvelope = z.object({
  error: z.object({
    type: z.enum(ERROR_TYPES as [string, ...string[]]),
    code: z.enum(ERROR_CODES as [string, ...string[]]).describe('The spec\'s error code; one status per code.'),
    message: z.string(),
    param: z.string().optional().describe('The offending field, for validation errors.'),
    retry_after_seconds: z.number().int().optional().describe('For 429s; also sent as Retry-After.'),
  }),
});

export function openApiDocument(routes: readonly RouteDefinition[], version: string): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    (paths[path] ??= {})[route.method] = operationOf(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc-platform gateway',
      version,
      description: 'OpenAI-compatible model gateway: chat over 19 providers, embeddings, rerank, moderation, media, files, batches, and the governance around them (customers, client tokens, wallets, webhooks).',
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      schemas: { ErrorEnvelope: jsonSchema(errorEnvelope) },
      responses: {
        Error: {
          description: 'Any failure: the spec\'s error envelope, with the status its code carries.',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
        },
      },
      securitySchemes: {
        developerKey: { type: 'http', scheme: 'bearer', description: 'A developer API key: Authorization: Bearer ko_<64 hex>.' },
        provisioningKey: { type: 'http', scheme: 'bearer', description: 'A provisioning key: Authorization: Bearer rsk_<64 hex>.' },
        clientToken: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'A client token minted for a customer: Authorization: Client <jwt>.' },
      },
    },
  };
}

function operationOf(route: RouteDefinition): OpenApiOperation {
  const response = responseOf(route);
  const input = route.input ?? {};
  const parameters = [...namedParameters(paramsSchemaOf(route.path), 'path'), ...namedParameters(input.query, 'query'), ...namedParameters(input.headers, 'header')];
  const operation: OpenApiOperation = {
    operationId: `${route.method}${openApiPath(route.path).replace(/[^A-Za-z0-9]+(.)?/g, (_match, next: string | undefined) => (next ?? '').toUpperCase())}`,
    summary: route.summary,
    tags: [route.surface],
    ...securityOf(route.access),
    ...(parameters.length > 0 && { parameters }),
    responses: {
      [String(response.status)]: {
        description: response.description,
        ...(response.contentType && { content: { [response.contentType]: { schema: {} } } }),
        ...(response.headers && { headers: Object.fromEntries(Object.entries(response.headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }])) }),
      },
      default: ERROR_RESPONSE,
    },
  };
  if (input.upload) {
    const fields = input.body instanceof z.ZodObject ? input.body : z.object({});
    operation.requestBody = { required: true, content: { 'multipart/form-data': { schema: jsonSchema(fields.extend({ file: z.string().meta({ format: 'binary' }).describe('The file.') })) } } };
  } else if (input.body) {
    operation.requestBody = { required: true, content: { 'application/json': { schema: jsonSchema(input.body) } } };
  }
  return operation;
}

function securityOf(access: RouteAccess): Pick<OpenApiOperation, 'security'> {
  switch (access.kind) {
    case 'public':
      return { security: [] };
    case 'developer_key':
      return { security: [{ developerKey: [access.scope] }] };
    case 'provisioning_key':
      return { security: [{ provisioningKey: [] }] };
    case 'metered':
      return { security: [{ developerKey: access.developer === 'any' ? [] : [access.developer] }, ...(access.clientToken ? [{ clientToken: [access.clientToken] }] : [])] };
  }
}

/** A path, query or header schema's fields as OpenAPI parameters (a path parameter is always required). */
function namedParameters(fields: z.ZodType | undefined, where: 'path' | 'query' | 'header'): unknown[] {
  if (!fields) return [];
  const schema = jsonSchema(fields) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (schema.required?.includes(name) ?? false),
    ...(typeof property.description === 'string' && { description: property.description }),
    schema: property,
  }));
}

/** A request schema as JSON Schema: what a caller may send (the input side of transforms and defaults). */
function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}
