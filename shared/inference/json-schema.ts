import { Ajv, type ErrorObject } from 'ajv';
import { serviceError } from '../errors.js';
import type { ChatMessage } from '../providers/types.js';

/**
 * response_format json_schema: the model's output must parse as JSON and satisfy the schema.
 * A failing answer is re-prompted with what was wrong, a bounded number of times; each attempt
 * is its own metered call. Schemas are compiled once per distinct schema.
 */
export const SCHEMA_REPROMPTS = 2;

const ajv = new Ajv({ allErrors: true, strict: false });
const compiled = new Map<string, ReturnType<typeof ajv.compile>>();

/** Compiles (once) a request's schema; a schema that does not compile is refused before any call. */
export function compileSchema(schema: Record<string, unknown>): ReturnType<typeof ajv.compile> {
  const key = JSON.stringify(schema);
  let validate = compiled.get(key);
  if (!validate) {
    try {
      validate = ajv.compile(schema);
    } catch (error) {
      throw serviceError('invalid_request', { param: 'response_format.json_schema.schema', message: `The JSON schema does not compile: ${(error as Error).message}` });
    }
    compiled.set(key, validate);
  }
  return validate;
}

export function checkAgainstSchema(content: string | null, schema: Record<string, unknown>): { ok: true } | { ok: false; problems: string } {
  const validate = compileSchema(schema);
  let value: unknown;
  try {
    value = JSON.parse(content ?? '');
  } catch {
    return { ok: false, problems: 'the reply is not valid JSON' };
  }
  if (validate(value)) return { ok: true };
  return { ok: false, problems: (validate.errors ?? []).map((error: ErrorObject) => `${error.instancePath || '(root)'} ${error.message}`).join('; ') };
}

/** The conversation for the next attempt: the failed answer, then what was wrong with it. */
export function reprompt(messages: ChatMessage[], failedContent: string | null, problems: string): ChatMessage[] {
  return [
    ...messages,
    { role: 'assistant', content: failedContent ?? '' },
    { role: 'user', content: `Your reply did not match the required JSON schema (${problems}). Reply again with only JSON that matches the schema.` },
  ];
}
