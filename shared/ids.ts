import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * A public identifier: the spec's prefix followed by 24 base62 characters (about 143 bits).
 * Rejection sampling keeps every character uniformly likely. Random bytes are drawn 4 KB at a time
 * and used once each: a metered call makes several ids, and one call into the CSPRNG per id was a
 * measurable share of the hot path.
 */
export function newId(prefix: string, length = 24): string {
  let out = prefix;
  while (out.length < prefix.length + length) {
    const byte = nextRandomByte();
    if (byte < 248) out += ALPHABET[byte % 62];
  }
  return out;
}

const POOL_BYTES = 4096;
let pool = randomBytes(POOL_BYTES);
let offset = 0;

function nextRandomByte(): number {
  if (offset === POOL_BYTES) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  return pool[offset++]!;
}

export const newRequestId = (): string => newId('req_');

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Account and key ids are UUIDs; anything else cannot name a row, so it is simply not found. */
export const isUuid = (value: string): boolean => UUID.test(value);
