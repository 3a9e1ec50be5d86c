import { createHash, randomBytes } from 'node:crypto';

/**
 * Hive tokens (spec 3 leaves the format open): `hvt_` and 43 base64url characters, 256 random
 * bits. They are shown once and stored as their SHA-256, which is enough for a secret this long:
 * nothing to guess, so no slow hash is needed, and lookup is by the hash itself.
 */
const PREFIX = 'hvt_';
const TOKEN = /^hvt_[A-Za-z0-9_-]{43}$/;

export interface MintedSecret {
  plaintext: string;
  hash: Buffer;
  /** What lists show of a token: its prefix and first characters, never enough to use it. */
  displayPrefix: string;
}

export function mintToken(): MintedSecret {
  const plaintext = PREFIX + randomBytes(32).toString('base64url');
  return { plaintext, hash: hashSecret(plaintext), displayPrefix: plaintext.slice(0, PREFIX.length + 6) };
}

export const isTokenFormat = (value: string): boolean => TOKEN.test(value);

export function hashSecret(plaintext: string): Buffer {
  return createHash('sha256').update(plaintext).digest();
}

/**
 * The device flow's two codes: the device code the client polls with (a secret, stored hashed) and
 * the short user code a person reads out and an admin types (unambiguous letters, `XXXX-XXXX`).
 */
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';

export function mintDeviceCodes(): { deviceCode: MintedSecret; userCode: string } {
  const deviceCode = 'hvd_' + randomBytes(32).toString('base64url');
  let letters = '';
  // Rejection sampling: 240 is the largest multiple of 20 under 256, so every letter is equally likely.
  while (letters.length < 8) {
    for (const byte of randomBytes(16)) if (byte < 240 && letters.length < 8) letters += USER_CODE_ALPHABET[byte % USER_CODE_ALPHABET.length];
  }
  return {
    deviceCode: { plaintext: deviceCode, hash: hashSecret(deviceCode), displayPrefix: deviceCode.slice(0, 10) },
    userCode: `${letters.slice(0, 4)}-${letters.slice(4)}`,
  };
}

/** A typed user code, forgiving case, spaces and a missing dash. */
export function normaliseUserCode(typed: string): string {
  const letters = typed.toUpperCase().replace(/[^A-Z]/g, '');
  return letters.length === 8 ? `${letters.slice(0, 4)}-${letters.slice(4)}` : letters;
}
