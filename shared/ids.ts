import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * A public identifier: the spec's prefix followed by 24 base62 characters (about 143 bits).
 * Rejection sampling keeps every character uniformly likely.
 */
export function newId(prefix: string, length = 24): string {
  let out = prefix;
  while (out.length < prefix.length + length) {
    for (const byte of randomBytes(length)) {
      if (byte < 248 && out.length < prefix.length + length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

export const newRequestId = (): string => newId('req_');

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Account and key ids are UUIDs; anything else cannot name a row, so it is simply not found. */
export const isUuid = (value: string): boolean => UUID.test(value);
