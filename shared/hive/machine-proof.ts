import { createHash, createPrivateKey, sign, verify, X509Certificate, type KeyObject } from 'node:crypto';

/**
 * The proof that authenticates POST /v1/machine/renew (spec 3: "authenticated by the certificate
 * being renewed, not a token"). The machine signs, with the private key of its current certificate,
 * a message naming that certificate's serial, the moment it signs, and the digest of the
 * certificate request it wants signed next; the hive verifies the signature with the public key
 * of the certificate it stored under that serial.
 *
 * Why a proof in the body rather than the relay vouching for the TLS peer in a header: a header
 * would be a bearer secret between relay and hive, and anyone reaching the hive directly with it
 * (or a relay bug that forwarded a caller's own copy) could renew any machine; the proof cannot be
 * made without the machine's key, holds whichever way the request travels (through the relay or
 * straight to the hive), and the hive checks it against its own records, trusting no hop. A proof
 * replayed within its freshness window yields a certificate for the request's key, which only its
 * holder can use; it is bound to that one request digest, so it cannot be bent to another key.
 *
 * The message is UTF-8 lines: `hive-machine-renew-v1`, the serial (lowercase hex), `signed_at`
 * (ISO 8601 as sent), and the SHA-256 (lowercase hex) of the request's DER. The signature is
 * base64: ECDSA in DER with SHA-256, RSA PKCS#1 v1.5 with SHA-256, or Ed25519 as is, by key type.
 */
export const RENEWAL_PROOF_FRESHNESS_MS = 5 * 60_000;

export interface RenewalProof {
  certificate: string;
  csr: string;
  signed_at: string;
  signature: string;
}

export function renewalMessage(serial: string, signedAt: string, csrPem: string): Buffer {
  return Buffer.from(['hive-machine-renew-v1', serial.toLowerCase(), signedAt, createHash('sha256').update(pemBody(csrPem)).digest('hex')].join('\n'));
}

/** The body of a renewal, as a machine makes it: what the client command sends. */
export function signRenewal(input: { certificatePem: string; privateKeyPem: string | KeyObject; csrPem: string; now?: Date }): RenewalProof {
  const key = typeof input.privateKeyPem === 'string' ? createPrivateKey(input.privateKeyPem) : input.privateKeyPem;
  const signedAt = (input.now ?? new Date()).toISOString();
  const serial = new X509Certificate(input.certificatePem).serialNumber;
  const signature = sign(digestFor(key), renewalMessage(serial, signedAt, input.csrPem), key);
  return { certificate: input.certificatePem, csr: input.csrPem, signed_at: signedAt, signature: signature.toString('base64') };
}

/** Whether `proof` was signed by the key of `storedCertificatePem`, within the freshness window of `now`. */
export function verifyRenewal(storedCertificatePem: string, proof: RenewalProof, now = Date.now()): boolean {
  const signedAt = Date.parse(proof.signed_at);
  if (!Number.isFinite(signedAt) || Math.abs(now - signedAt) > RENEWAL_PROOF_FRESHNESS_MS) return false;
  const certificate = new X509Certificate(storedCertificatePem);
  try {
    return verify(digestFor(certificate.publicKey), renewalMessage(certificate.serialNumber, proof.signed_at, proof.csr), certificate.publicKey, Buffer.from(proof.signature, 'base64'));
  } catch {
    return false;
  }
}

const digestFor = (key: KeyObject): string | null => (key.asymmetricKeyType === 'ed25519' || key.asymmetricKeyType === 'ed448' ? null : 'sha256');

function pemBody(pem: string): Buffer {
  return Buffer.from(pem.replace(/-----(BEGIN|END)[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
}
