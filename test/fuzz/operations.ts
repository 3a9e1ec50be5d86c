import { z } from 'zod';
import type { HiveRouteDefinition } from '../../api/hive/route-table.js';

/**
 * The operations the fuzzer knows, read from the servers' own descriptions (the gateway's
 * GET /v1/openapi.json, the hive's route table) rather than written route by route, and the
 * plausible valid request each one starts from before a single part of it is spoiled.
 */
export type JsonSchema = Record<string, any>;
export type ServerName = 'gateway' | 'hive';
export type Credential = 'developerKey' | 'provisioningKey' | 'hiveToken' | 'none';

export interface Operation {
  server: ServerName;
  method: string;
  /** In OpenAPI form: /v1/files/{id}. */
  path: string;
  credential: Credential;
  pathParams: string[];
  query: Record<string, { schema: JsonSchema; required: boolean }>;
  headers: Record<string, { schema: JsonSchema; required: boolean }>;
  body?: { kind: 'json' | 'multipart'; schema: JsonSchema };
}

export const operationName = (operation: Pick<Operation, 'server' | 'method' | 'path'>) => `${operation.server} ${operation.method.toUpperCase()} ${operation.path}`;

export function gatewayOperations(document: { paths: Record<string, Record<string, any>> }): Operation[] {
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, described] of Object.entries(methods)) {
      const parameters = (described.parameters ?? []) as Array<{ name: string; in: string; required?: boolean; schema: JsonSchema }>;
      const byPlace = (place: string) => Object.fromEntries(parameters.filter((parameter) => parameter.in === place).map((parameter) => [parameter.name, { schema: parameter.schema, required: parameter.required === true }]));
      const content = described.requestBody?.content ?? {};
      const schemes = (described.security ?? []).flatMap((requirement: Record<string, string[]>) => Object.keys(requirement));
      operations.push({
        server: 'gateway',
        method,
        path,
        // A developer key where one is accepted: client tokens only ever add a way in to the same handler.
        credential: schemes.length === 0 ? 'none' : schemes.includes('developerKey') ? 'developerKey' : 'provisioningKey',
        pathParams: parameters.filter((parameter) => parameter.in === 'path').map((parameter) => parameter.name),
        query: byPlace('query'),
        headers: byPlace('header'),
        ...(content['application/json'] && { body: { kind: 'json' as const, schema: content['application/json'].schema } }),
        ...(content['multipart/form-data'] && { body: { kind: 'multipart' as const, schema: content['multipart/form-data'].schema } }),
      });
    }
  }
  return operations.sort(byName);
}

export function hiveOperations(definitions: readonly HiveRouteDefinition[]): Operation[] {
  return definitions
    .map((definition): Operation => ({
      server: 'hive',
      method: definition.method,
      path: definition.path.replace(/:(\w+)/g, '{$1}'),
      credential: definition.access === 'credential' ? 'hiveToken' : 'none',
      pathParams: [...definition.path.matchAll(/:(\w+)/g)].map(([, name]) => name!),
      query: {},
      headers: {},
      // A route without a schema still reads whatever JSON is posted to it (the Stripe webhook reads raw bytes).
      body: definition.body
        ? { kind: 'json', schema: z.toJSONSchema(definition.body, { io: 'input', unrepresentable: 'any' }) as JsonSchema }
        : definition.method === 'post' ? { kind: 'json', schema: {} } : undefined,
    }))
    .sort(byName);
}

const byName = (a: Operation, b: Operation) => operationName(a).localeCompare(operationName(b));

/** A value the fixture world supplies for a named field, or undefined to let the schema decide. */
export type FieldValues = (operation: Operation, field: string) => unknown;

/** The parts of a request before they are encoded: a mutation replaces exactly one of them. */
export interface RequestParts {
  /** Raw path segments, already percent-encoded. */
  pathSegments: Record<string, string>;
  query: Record<string, unknown>;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * A plausible valid request: required properties only (plus those the fixture world names),
 * the first enum value, numbers inside their bounds, strings of known formats and patterns.
 * `variant` picks the branch of every union, so each branch of a discriminated body is reached.
 */
export function baseParts(operation: Operation, pathValues: Record<string, string>, fieldValues: FieldValues, variant: number): RequestParts {
  const query: Record<string, unknown> = {};
  for (const [name, { schema, required }] of Object.entries(operation.query)) {
    const supplied = fieldValues(operation, name);
    if (supplied !== undefined) query[name] = supplied;
    else if (required) query[name] = exampleOf(schema, { operation, fieldValues, variant, root: schema });
  }
  const headers: Record<string, string> = {};
  for (const [name, { schema, required }] of Object.entries(operation.headers)) {
    if (required) headers[name] = String(exampleOf(schema, { operation, fieldValues, variant, root: schema }));
  }
  const body = operation.body ? exampleOf(operation.body.schema, { operation, fieldValues, variant, root: operation.body.schema }) : undefined;
  return {
    pathSegments: Object.fromEntries(operation.pathParams.map((name) => [name, encodeURIComponent(pathValues[name] ?? 'missing')])),
    query,
    headers,
    body,
  };
}

interface ExampleContext {
  operation: Operation;
  fieldValues: FieldValues;
  variant: number;
  root: JsonSchema;
}

/** Strings tried, in order, against a pattern the schema sets. */
const PATTERN_CANDIDATES = ['fuzz', 'general', '/', '/fuzz', 'note', 'a', 'fuzz@example.test', 'https://example.test/', '1', 'fuzz-1'];

export function exampleOf(schema: JsonSchema, context: ExampleContext, depth = 0): unknown {
  const resolved = resolve(schema, context.root);
  if ('const' in resolved) return resolved.const;
  if (Array.isArray(resolved.enum)) return resolved.enum[0];
  const branches = resolved.anyOf ?? resolved.oneOf;
  if (Array.isArray(branches)) {
    const usable = branches.filter((branch: JsonSchema) => resolve(branch, context.root).type !== 'null');
    const chosen = usable.length ? usable : branches;
    return exampleOf(chosen[context.variant % chosen.length], context, depth + 1);
  }
  if (Array.isArray(resolved.allOf)) return exampleOf(Object.assign({}, ...resolved.allOf), context, depth + 1);
  const type = Array.isArray(resolved.type) ? resolved.type.find((name: string) => name !== 'null') : resolved.type;
  switch (type) {
    case 'object': {
      const properties = (resolved.properties ?? {}) as Record<string, JsonSchema>;
      const required = new Set<string>(resolved.required ?? []);
      const value: Record<string, unknown> = {};
      for (const [name, property] of Object.entries(properties)) {
        const supplied = context.fieldValues(context.operation, name);
        if (supplied !== undefined) value[name] = supplied;
        else if (required.has(name) && depth < 8) value[name] = exampleOf(property, context, depth + 1);
      }
      return value;
    }
    case 'array': {
      const count = Math.max(resolved.minItems ?? 0, 0);
      return Array.from({ length: count }, () => exampleOf(resolved.items ?? {}, context, depth + 1));
    }
    case 'integer':
    case 'number': {
      const low = resolved.minimum ?? (resolved.exclusiveMinimum !== undefined ? resolved.exclusiveMinimum + 1 : undefined);
      const high = resolved.maximum ?? (resolved.exclusiveMaximum !== undefined ? resolved.exclusiveMaximum - 1 : undefined);
      const value = Math.max(low ?? 1, 1);
      return high !== undefined ? Math.min(value, high) : value;
    }
    case 'boolean':
      return false;
    case 'null':
      return null;
    case 'string':
      return exampleString(resolved);
    default:
      return 'fuzz';
  }
}

function exampleString(schema: JsonSchema): string {
  switch (schema.format) {
    case 'date-time':
      return new Date().toISOString();
    case 'date':
      return new Date().toISOString().slice(0, 10);
    case 'email':
      return 'fuzz@example.test';
    case 'uri':
    case 'url':
      return 'https://example.test/fuzz';
    case 'uuid':
      return '00000000-0000-4000-8000-000000000000';
    case 'binary':
      return 'fuzz';
  }
  const min = schema.minLength ?? 0;
  const fits = (candidate: string) => candidate.length >= min && (schema.maxLength === undefined || candidate.length <= schema.maxLength);
  const candidates = [...PATTERN_CANDIDATES, ...prefixedIdFor(schema.pattern), 'fuzz'.padEnd(min, 'z')];
  if (typeof schema.pattern === 'string') {
    const pattern = new RegExp(schema.pattern, 'u');
    const matching = candidates.find((candidate) => fits(candidate) && pattern.test(candidate));
    if (matching) return matching;
  }
  return candidates.find(fits) ?? 'fuzz'.padEnd(min, 'z');
}

/** An id of the shape `^mem_[0-9A-Za-z]{24}$` describes, so a body reaches past its id check to the lookup. */
function prefixedIdFor(pattern: unknown): string[] {
  const match = typeof pattern === 'string' ? /^\^([a-z]+_)\[0-9A-Za-z\]\{(\d+)\}\$$/.exec(pattern) : null;
  return match ? [`${match[1]}${'A'.repeat(Number(match[2]))}`] : [];
}

function resolve(schema: JsonSchema, root: JsonSchema): JsonSchema {
  if (typeof schema?.$ref !== 'string') return schema ?? {};
  if (schema.$ref === '#') return root;
  const target = schema.$ref.replace(/^#\//, '').split('/').reduce((node: any, key: string) => node?.[key], root);
  return target ?? {};
}

/** Every place in a body schema one mutation can spoil: each property (optional ones too, nested ones too) and each array's first item. */
export function fieldLocations(schema: JsonSchema, root: JsonSchema = schema, path: Array<string | number> = [], depth = 0, into: Map<string, { path: Array<string | number>; schema: JsonSchema }> = new Map()) {
  const resolved = resolve(schema, root);
  into.set(JSON.stringify(path), { path, schema: resolved });
  if (depth >= 4) return [...into.values()];
  for (const branch of [...(resolved.anyOf ?? []), ...(resolved.oneOf ?? []), ...(resolved.allOf ?? [])]) fieldLocations(branch, root, path, depth + 1, into);
  for (const [name, property] of Object.entries((resolved.properties ?? {}) as Record<string, JsonSchema>)) fieldLocations(property, root, [...path, name], depth + 1, into);
  if (resolved.items && typeof resolved.items === 'object') fieldLocations(resolved.items, root, [...path, 0], depth + 1, into);
  return [...into.values()];
}
