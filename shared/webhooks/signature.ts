import { createHmac, randomBytes } from 'node:crypto';

/**
 * `X-Svc-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]`: HMAC-SHA256 keyed by the endpoint
 * secret over `${t}.${rawBody}`. During a rotation grace window a second v1 carries the digest
 * under the previous secret, so a receiver that still holds the old secret keeps verifying.
 */
export const SIGNATURE_HEADER = 'X-Svc-Signature';

export function signatureHeader(rawBody: string, secrets: readonly string[], timestampSeconds: number): string {
  const signed = `${timestampSeconds}.${rawBody}`;
  const digests = secrets.map((secret) => `v1=${createHmac('sha256', secret).update(signed).digest('hex')}`);
  return [`t=${timestampSeconds}`, ...digests].join(',');
}

/** `whsec_` and 32 random bytes, base64url: the signing secret, shown once. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}
