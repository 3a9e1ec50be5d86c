import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Secret key material. `ko_` developer keys and `rsk_` provisioning keys share one shape:
 * the prefix and 64 lowercase hex characters (32 random bytes). Only the SHA-256 of the whole
 * key is stored, with a display prefix (the prefix and the first 8 hex characters).
 */
export type KeyKind = 'ko_' | 'rsk_';

const SHAPES: Record<KeyKind, RegExp> = {
  ko_: /^ko_[0-9a-f]{64}$/,
  rsk_: /^rsk_[0-9a-f]{64}$/,
};

export interface MintedKey {
  plaintext: string;
  hash: Buffer;
  displayPrefix: string;
}

export function mintKey(kind: KeyKind): MintedKey {
  const plaintext = kind + randomBytes(32).toString('hex');
  return { plaintext, hash: hashKey(plaintext), displayPrefix: plaintext.slice(0, kind.length + 8) };
}

export function isWellFormedKey(kind: KeyKind, presented: string): boolean {
  return SHAPES[kind].test(presented);
}

export function hashKey(plaintext: string): Buffer {
  return hash('sha256', plaintext, 'buffer');
}

/** Constant-time check that a stored hash belongs to the presented key. */
export function keyMatches(storedHash: Buffer, presented: string): boolean {
  const presentedHash = hashKey(presented);
  return storedHash.length === presentedHash.length && timingSafeEqual(storedHash, presentedHash);
}
