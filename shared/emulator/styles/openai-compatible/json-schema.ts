import { createHash } from 'node:crypto';

/**
 * Structured output for `response_format: {type: 'json_schema'}`: a deterministic value that
 * satisfies simple schemas (objects, strings, numbers, integers, booleans, arrays, enums, consts),
 * and on request one that violates it, so the gateway's re-prompt path can be exercised.
 */
type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
};

const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel'];

function seedByte(seed: string): number {
  return createHash('sha256').update(seed).digest()[0]!;
}

export function valueForSchema(schema: Schema, seed: string): unknown {
  if (schema.const !== undefined) return schema.const;
  if (schema.enum && schema.enum.length > 0) return schema.enum[seedByte(seed) % schema.enum.length];
  const alternative = schema.anyOf?.[0] ?? schema.oneOf?.[0];
  if (alternative) return valueForSchema(alternative, seed);
  const type = Array.isArray(schema.type) ? schema.type.find((candidate) => candidate !== 'null') : schema.type;
  switch (type ?? (schema.properties ? 'object' : 'string')) {
    case 'object':
      // Every declared property is filled, which also satisfies `required` and strict mode.
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([name, property]) => [name, valueForSchema(property, `${seed}.${name}`)]));
    case 'array':
      return schema.items ? [valueForSchema(schema.items, `${seed}[0]`)] : [];
    case 'integer':
    case 'number':
      return seedByte(seed) % 100;
    case 'boolean':
      return seedByte(seed) % 2 === 0;
    case 'null':
      return null;
    default:
      return `${WORDS[seedByte(seed) % WORDS.length]} ${WORDS[seedByte(`${seed}!`) % WORDS.length]}`;
  }
}

/**
 * A value that is valid JSON but does not satisfy the schema: an object without its first
 * required property when there is one, otherwise a value of the wrong type.
 */
export function violatingValue(schema: Schema, seed: string): unknown {
  const valid = valueForSchema(schema, seed);
  const firstRequired = schema.required?.[0];
  if (firstRequired && valid && typeof valid === 'object' && !Array.isArray(valid)) {
    const { [firstRequired]: _dropped, ...rest } = valid as Record<string, unknown>;
    return rest;
  }
  return typeof valid === 'object' && valid !== null && !Array.isArray(valid) ? ['schema', 'violation'] : { schema: 'violation' };
}
