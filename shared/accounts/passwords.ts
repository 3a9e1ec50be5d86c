import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/** Dashboard passwords: scrypt with a random salt, parameters stored beside the hash so they can rise later. */
const PARAMS = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;
const KEY_LENGTH = 32;

function derive(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, expected] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !expected) return false;
  const expectedKey = Buffer.from(expected, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p), maxmem: PARAMS.maxmem });
  return key.length === expectedKey.length && timingSafeEqual(key, expectedKey);
}

let nobodysHash: Promise<string> | undefined;

/**
 * A hash of nobody's password, made once per process with the parameters real ones have: a sign-in
 * for an unknown address (or a person without a password) is verified against it, so it takes as
 * long as a wrong password and the answer's timing does not tell which addresses have accounts.
 */
export function nobodysPasswordHash(): Promise<string> {
  nobodysHash ??= hashPassword(randomBytes(16).toString('hex')).catch((error: unknown) => {
    nobodysHash = undefined;
    throw error;
  });
  return nobodysHash;
}
