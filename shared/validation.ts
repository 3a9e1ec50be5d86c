import { z } from 'zod';
import { serviceError, type ErrorCode, type ServiceError } from './errors.js';

/**
 * The one translation of a zod failure into the spec's error. Schemas live beside their domain;
 * a field whose failure has a code of its own in spec 1 (invalid_rpm_limit, invalid_ttl...)
 * carries it on its schema (`withErrorCode`), found along the failing issue's path. Otherwise the
 * code is invalid_request with `param` the issue's path and a message naming the field. A field
 * whose failures carry different codes (a webhook url: invalid_url, insecure_webhook_url or
 * malformed_webhook_url) is read by a transform that `refuse`s with the code that applies.
 */
const errorCodes = z.registry<{ errorCode: ErrorCode }>();

/** Marks a field's schema with the spec code its validation failure carries. */
export function withErrorCode<T extends z.ZodType>(schema: T, errorCode: ErrorCode): T {
  errorCodes.add(schema, { errorCode });
  return schema;
}

/**
 * Fails the value a transform or refinement reads with a spec code of its own, `param` the value's
 * path; `message` says what exactly is wrong (the code's own message otherwise). Returns z.NEVER.
 */
export function refuse(ctx: z.RefinementCtx, errorCode: ErrorCode, message?: string): never {
  const refusal: Refusal = { errorCode, message };
  ctx.addIssue({ code: 'custom', message: message ?? errorCode, params: { refusal } });
  return z.NEVER;
}

interface Refusal {
  errorCode: ErrorCode;
  message: string | undefined;
}

export function fromZodError(error: z.ZodError, schema?: z.ZodType, at: PropertyKey[] = []): ServiceError {
  const issue = error.issues[0];
  if (!issue) return serviceError('invalid_request');
  const unknownField = issue.code === 'unrecognized_keys';
  const path = unknownField ? [...issue.path, issue.keys[0]!] : issue.path;
  const param = [...at, ...path].map(String).join('.') || undefined;
  if (unknownField) return serviceError('invalid_request', { param, message: `Unrecognized request field: ${param}.` });
  const refusal = issue.code === 'custom' ? (issue.params?.refusal as Refusal | undefined) : undefined;
  if (refusal) return serviceError(refusal.errorCode, { ...(param && { param }), ...(refusal.message && { message: refusal.message }) });
  // A coded field answers for everything inside it: param names the field, not the array item.
  const coded = schema && codeAlong(schema, path);
  if (coded && coded.code !== 'invalid_request') {
    const field = [...at, ...path.slice(0, coded.depth)].map(String).join('.');
    return serviceError(coded.code, { ...(field && { param: field }) });
  }
  return serviceError('invalid_request', { ...(param && { param }), message: param ? `${param}: ${issue.message}` : issue.message });
}

/**
 * Parses `input` with `schema`, or throws the spec's error for its first failure. `at` is where
 * the input sits in the request (`['messages', 3]` for one message), so `param` names it whole.
 */
export function parseWith<T extends z.ZodType>(schema: T, input: unknown, at: PropertyKey[] = []): z.output<T> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw fromZodError(parsed.error, schema, at);
  return parsed.data;
}

/** A JSON request body: an object (refused plainly otherwise; pass `body ?? {}` where none is fine), parsed with `schema`. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw serviceError('invalid_request', { message: 'The request body must be a JSON object.' });
  }
  return parseWith(schema, body);
}

/**
 * Integers: PostgreSQL's `integer` is the narrowest column a request integer reaches, so every
 * integer a request carries is bounded by it (`z.int32()`; from a query string, `.max(INT32_MAX)`),
 * and test/hostile-input.test.ts holds every route's schemas to that. A value past it is the field's
 * own 400, never PostgreSQL's "out of range for type integer".
 */
export const INT32_MAX = 2_147_483_647;

/**
 * An instant as a request sends it (ISO 8601 with an offset), within the years PostgreSQL and
 * JavaScript both read the same way: 0001-01-01 to 9999-12-31 UTC. Year 0000 parses in JavaScript
 * but not in PostgreSQL, and a year past 9999 has no four-digit form.
 */
export const instant = () =>
  z.iso.datetime({ offset: true }).refine((value) => {
    const time = Date.parse(value);
    return time >= EARLIEST_INSTANT && time <= LATEST_INSTANT;
  }, 'an instant from 0001-01-01 to 9999-12-31 UTC');
const EARLIEST_INSTANT = new Date('0001-01-01T00:00:00Z').getTime();
const LATEST_INSTANT = new Date('9999-12-31T23:59:59.999Z').getTime();

/** How deep a request's JSON may nest: deeper than any API shape here, shallow enough for every recursive reader. */
export const MAX_INPUT_DEPTH = 64;

/**
 * The text rule of both servers, applied where request input becomes domain input (each server's
 * route builder, before authentication reads anything): every string, and every object key, must be
 * Unicode text PostgreSQL can store as sent. NUL (U+0000) is refused, since text and jsonb cannot
 * hold it; so is a lone UTF-16 surrogate (`\ud800` in JSON), which is not text and would be stored
 * as U+FFFD, silently changed. Nothing is stripped: a caller's text is kept exactly or refused with
 * 400 naming the field. Other control characters are text and pass. Nesting deeper than
 * MAX_INPUT_DEPTH is refused too. Bytes (a raw body read as a Buffer) are not text and pass. `at` is
 * where the input sits in the request, for `param`.
 */
export function assertStorableInput(input: unknown, at: readonly PropertyKey[] = []): void {
  const pending: Array<{ value: unknown; path: readonly PropertyKey[] }> = [{ value: input, path: at }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, path } = next;
    if (typeof value === 'string') {
      if (!isStorableText(value)) throw unstorable(path, value);
    } else if (value !== null && typeof value === 'object' && !ArrayBuffer.isView(value)) {
      if (path.length - at.length >= MAX_INPUT_DEPTH) throw serviceError('invalid_request', { ...paramOf(path), message: `${nameOf(path)} nests deeper than ${MAX_INPUT_DEPTH} levels.` });
      if (Array.isArray(value)) value.forEach((item, index) => pending.push({ value: item, path: [...path, index] }));
      else
        for (const [key, item] of Object.entries(value)) {
          if (!isStorableText(key)) throw unstorable(path, key, 'a key');
          pending.push({ value: item, path: [...path, key] });
        }
    }
  }
}

/** A string PostgreSQL stores as sent: well-formed UTF-16 (so valid UTF-8 once encoded) without NUL. */
export const isStorableText = (value: string): boolean => value.isWellFormed() && !value.includes('\0');

function unstorable(path: readonly PropertyKey[], value: string, what = 'text'): ServiceError {
  const problem = value.includes('\0') ? 'a NUL character (U+0000)' : 'a lone UTF-16 surrogate (not Unicode text)';
  return serviceError('invalid_request', { ...paramOf(path), message: `${nameOf(path)} holds ${what === 'text' ? '' : `${what} with `}${problem}, which this API does not store.` });
}

const paramOf = (path: readonly PropertyKey[]) => (path.length > 0 ? { param: path.map(String).join('.') } : {});
const nameOf = (path: readonly PropertyKey[]) => (path.length > 0 ? path.map(String).join('.') : 'The request body');

/** The most specific error code registered on the schemas the path runs through, and how deep along the path. */
function codeAlong(schema: z.ZodType, path: PropertyKey[]): { code: ErrorCode; depth: number } | undefined {
  let current: z.ZodType | undefined = schema;
  let found: { code: ErrorCode; depth: number } | undefined;
  for (let depth = 0; current; depth++) {
    current = unwrap(current, (code) => (found = { code, depth }));
    if (depth >= path.length || !current) break;
    const key = path[depth]!;
    if (current instanceof z.ZodObject) current = (current.shape as Record<string, z.ZodType>)[String(key)];
    else if (current instanceof z.ZodArray) current = current.element as z.ZodType;
    else break;
  }
  return found;
}

/** Steps through optional, nullable and default wrappers, reporting each registered code on the way. */
function unwrap(schema: z.ZodType, report: (code: ErrorCode) => void): z.ZodType {
  let current = schema;
  for (;;) {
    const code = errorCodes.get(current)?.errorCode;
    if (code) report(code);
    if (current instanceof z.ZodOptional || current instanceof z.ZodNullable) current = current.unwrap() as z.ZodType;
    else if (current instanceof z.ZodDefault) current = current.removeDefault() as z.ZodType;
    else return current;
  }
}
