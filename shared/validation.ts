import { z } from 'zod';
import { serviceError, type ErrorCode } from './errors.js';

/**
 * Body validation where each field has its own error code (spec 1 names one per field, e.g.
 * invalid_rpm_limit). Unknown fields are refused, so a typo never silently does nothing.
 */
export type FieldRules = Record<string, { schema: z.ZodType; code: ErrorCode }>;

export function parseFields<T extends object>(body: unknown, rules: FieldRules): Partial<T> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw serviceError('invalid_request', { message: 'The request body must be a JSON object.' });
  }
  const parsed: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(body)) {
    const rule = rules[field];
    if (!rule) throw serviceError('invalid_request', { message: `Unrecognized request field: ${field}.`, param: field });
    const result = rule.schema.safeParse(value);
    if (!result.success) throw serviceError(rule.code, { param: field, ...(rule.code === 'invalid_request' && { message: `${field}: ${result.error.issues[0]?.message}` }) });
    parsed[field] = result.data;
  }
  return parsed as Partial<T>;
}

/** The body those rules accept, as one zod object (every field optional, unknown ones refused): what the API documents. */
export function fieldsSchema(rules: FieldRules): z.ZodType {
  return z.strictObject(Object.fromEntries(Object.entries(rules).map(([field, rule]) => [field, rule.schema.optional()])));
}
