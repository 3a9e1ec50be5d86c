import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ALPHABET_CODES = Buffer.from(ALPHABET, 'latin1');
const scratch = Buffer.allocUnsafe(64);

/**
 * A public identifier: the spec's prefix followed by 24 base62 characters (about 143 bits).
 * Rejection sampling keeps every character uniformly likely. Random bytes are drawn 4 KB at a time
 * and used once each: a metered call makes several ids, and one call into the CSPRNG per id was a
 * measurable share of the hot path.
 */
export function newId(prefix: string, length = 24): string {
  // The characters gather in one scratch buffer and become one string: appended one by one they
  // were 24 strings a call for the garbage collector (a few ids a metered call).
  const chars = length <= scratch.length ? scratch : Buffer.allocUnsafe(length);
  for (let filled = 0; filled < length; ) {
    const byte = nextRandomByte();
    if (byte < 248) chars[filled++] = ALPHABET_CODES[byte % 62]!;
  }
  return prefix + chars.toString('latin1', 0, length);
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
