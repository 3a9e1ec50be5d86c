import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, scrypt } from 'node:crypto';

/**
 * Envelope encryption of vector stores. Each encrypted store has a random 256-bit data key; it is
 * stored only wrapped (AES-256-GCM) by the master key (managed stores) or by a key derived from
 * the caller's passphrase with scrypt (byok stores). Chunk text and vectors are sealed with
 * subkeys of the data key (HKDF), each bound to where it belongs by the GCM associated data, so a
 * sealed value moved to another chunk or store does not open.
 */
const SEAL_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const DATA_KEY_BYTES = 32;
const SALT_BYTES = 16;

/** scrypt at N = 2^15, r = 8: about 32 MB and tens of milliseconds a derivation (OWASP's floor is N = 2^17 at r = 8 / p = 1 for passwords stored; this guards a key, not a login, and is derived once per lease). */
const SCRYPT = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;

export class SealError extends Error {}

export const newDataKey = (): Buffer => randomBytes(DATA_KEY_BYTES);
export const newKdfSalt = (): Buffer => randomBytes(SALT_BYTES);

/** version | iv | tag | ciphertext */
export function seal(key: Buffer, plaintext: Buffer, associatedData: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(associatedData));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(SEAL_VERSION), iv, cipher.getAuthTag(), body]);
}

/** Opens what `seal` made with the same key and associated data; anything else throws SealError. */
export function open(key: Buffer, sealed: Buffer, associatedData: string): Buffer {
  if (sealed.length < 1 + IV_BYTES + TAG_BYTES || sealed[0] !== SEAL_VERSION) throw new SealError('not a sealed value');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 1 + IV_BYTES));
  decipher.setAAD(Buffer.from(associatedData));
  decipher.setAuthTag(sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
  } catch {
    throw new SealError('the value does not open with this key');
  }
}

export function derivePassphraseKey(passphrase: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(passphrase.normalize('NFKC'), salt, DATA_KEY_BYTES, SCRYPT, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

/** The keys one store's data key stands for; derived once per unlocked use. */
export interface StoreKeys {
  text: Buffer;
  vectors: Buffer;
  terms: Buffer;
}

export function storeKeys(dataKey: Buffer): StoreKeys {
  const subkey = (purpose: string) => Buffer.from(hkdfSync('sha256', dataKey, Buffer.alloc(0), `vector-store ${purpose}`, DATA_KEY_BYTES));
  return { text: subkey('chunk text'), vectors: subkey('chunk vectors'), terms: subkey('blind terms') };
}

/** A chunk's text is the same in every embedding space (a migration copies it); its vector belongs to one space. */
export const textAad = (storeId: string, fileId: string, chunkIndex: number) => `text ${storeId}/${fileId}/${chunkIndex}`;
export const vectorAad = (storeId: string, space: number, fileId: string, chunkIndex: number) => `vector ${storeId}/${space}/${fileId}/${chunkIndex}`;

export function sealText(keys: StoreKeys, text: string, aad: string): Buffer {
  return seal(keys.text, Buffer.from(text, 'utf8'), aad);
}

export function openText(keys: StoreKeys, sealed: Buffer, aad: string): string {
  return open(keys.text, sealed, aad).toString('utf8');
}

export function sealVector(keys: StoreKeys, vector: ArrayLike<number>, aad: string): Buffer {
  const floats = Float32Array.from(vector);
  return seal(keys.vectors, Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength), aad);
}

/** Opens a sealed vector into `target` at `offset` (a row of a flat block scored in the CPU pool). */
export function openVectorInto(keys: StoreKeys, sealed: Buffer, aad: string, target: Float32Array, offset: number): void {
  const bytes = open(keys.vectors, sealed, aad);
  const dims = bytes.length / 4;
  for (let i = 0; i < dims; i++) target[offset + i] = bytes.readFloatLE(i * 4);
}

const WORD = /[\p{L}\p{N}]+/gu;

/**
 * The blind index of a sealed chunk's words: each distinct lowercased word as a keyed hash, so
 * PostgreSQL can find chunks that contain a query's exact words (identifiers, rare names) without
 * ever holding the words. Only equality is revealed, and only to whoever holds the store's key.
 */
export function blindTerms(keys: StoreKeys, text: string): string[] {
  const words = new Set(text.toLowerCase().match(WORD) ?? []);
  return [...words].map((word) => createHmac('sha256', keys.terms).update(word).digest('base64url').slice(0, 22));
}
