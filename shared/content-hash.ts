import { createHash } from 'node:crypto';

/**
 * A SHA-256 (hex) of a JSON value that is the same whatever the order of its objects' keys (the
 * order of arrays counts): the same request body, or the same record, hashes alike however it was
 * written.
 */
export function contentHash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(canonical(value))).digest('hex');
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') return Object.fromEntries(Object.keys(value).sort().map((key) => [key, canonical((value as Record<string, unknown>)[key])]));
  return value;
}
