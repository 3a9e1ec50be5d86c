import { serviceError } from './errors.js';

/**
 * The metadata object of spec 1: at most 16 keys, keys up to 64 characters, string values up to
 * 512 characters, and a serialized size limit (4 KB, 2 KB for conversations).
 */
export function parseMetadata(value: unknown, maxBytes = 4096, param = 'metadata'): Record<string, string> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw serviceError('invalid_metadata', { param, message: 'metadata must be an object.' });
  }
  const entries = Object.entries(value);
  if (entries.length > 16) throw serviceError('metadata_too_many_keys', { param });
  for (const [key, entry] of entries) {
    if (key.length === 0 || key.length > 64) throw serviceError('invalid_metadata', { param, message: `metadata key "${key.slice(0, 80)}" must be 1-64 characters.` });
    if (typeof entry !== 'string') throw serviceError('invalid_metadata', { param, message: `metadata value of "${key}" must be a string.` });
    if (entry.length > 512) throw serviceError('invalid_metadata', { param, message: `metadata value of "${key}" is over 512 characters.` });
  }
  if (Buffer.byteLength(JSON.stringify(value)) > maxBytes) {
    throw serviceError('metadata_too_large', { param, message: `metadata is over ${maxBytes} bytes serialized.` });
  }
  return value as Record<string, string>;
}
