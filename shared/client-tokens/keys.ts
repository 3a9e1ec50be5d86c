import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { ConfigError, type Config } from '../config.js';

/** The process logger, or anything that can take the one warning. */
type WarningLogger = { warn(message: string): void };

/** One entry of CLIENT_TOKEN_SIGNING_KEYS: an Ed25519 private JWK with its kid. */
export type ClientTokenSigningJwk = NonNullable<Config['CLIENT_TOKEN_SIGNING_KEYS']>[number];

/**
 * The keys of client tokens, imported once per platform. The first configured key signs; every
 * configured key verifies, looked up by the token's `kid`, so a rotation is a configuration
 * change: add the new key first, keep the old one until the last token it signed has expired.
 */
export interface ClientTokenKeys {
  signing: { kid: string; privateKey: KeyObject };
  /** Public halves by kid; a kid not in here is refused like any other bad token. */
  verifying: ReadonlyMap<string, KeyObject>;
}

/**
 * Imports the configured keys (node:crypto's JWK import: synchronous, so the platform can build
 * them at start; jose signs and verifies with the KeyObjects). With no keys configured, which
 * loadConfig allows only outside production, one ephemeral key serves the whole process.
 */
export function loadClientTokenKeys(config: Pick<Config, 'CLIENT_TOKEN_SIGNING_KEYS'>, logger: WarningLogger): ClientTokenKeys {
  const jwks = config.CLIENT_TOKEN_SIGNING_KEYS ?? [ephemeralKey(logger)];
  const imported = jwks.map((jwk) => ({ kid: jwk.kid, privateKey: importPrivateKey(jwk) }));
  return {
    signing: imported[0]!,
    verifying: new Map(imported.map(({ kid, privateKey }) => [kid, createPublicKey(privateKey)])),
  };
}

/** A fresh Ed25519 private JWK, in the shape CLIENT_TOKEN_SIGNING_KEYS takes. */
export function generateClientTokenJwk(kid: string): ClientTokenSigningJwk {
  const { privateKey } = generateKeyPairSync('ed25519');
  const { x, d } = privateKey.export({ format: 'jwk' });
  return { kty: 'OKP', crv: 'Ed25519', kid, x: x!, d: d! };
}

function importPrivateKey(jwk: ClientTokenSigningJwk): KeyObject {
  try {
    const key = createPrivateKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d }, format: 'jwk' });
    if (key.asymmetricKeyType === 'ed25519') return key;
  } catch {
    // Reported below without the key material.
  }
  throw new ConfigError(`invalid configuration:\n  CLIENT_TOKEN_SIGNING_KEYS: the key "${jwk.kid}" is not a usable Ed25519 private key`);
}

let processKey: ClientTokenSigningJwk | undefined;

function ephemeralKey(logger: WarningLogger): ClientTokenSigningJwk {
  if (!processKey) {
    processKey = generateClientTokenJwk(`ephemeral-${process.pid}-${Date.now().toString(36)}`);
    logger.warn(
      'CLIENT_TOKEN_SIGNING_KEYS is unset: client tokens are signed with a key made for this process only; ' +
        'they will not survive a restart and are not accepted by other replicas (see .env.example)',
    );
  }
  return processKey;
}
