import { webcrypto } from 'node:crypto';

/**
 * A machine's key pair and its certificate request (PKCS#10, PEM). ECDSA P-256 with SHA-256:
 * what every TLS stack the relay might sit behind accepts for a client certificate. The private
 * key is made here and never sent; the hive signs the request and answers the certificate.
 */
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface MachineKey {
  /** PKCS#8 PEM. */
  privateKey: string;
  /** PKCS#10 PEM. */
  csr: string;
}

export async function makeMachineKey(commonName: string): Promise<MachineKey> {
  // @peculiar/x509's dependency injection needs the reflect polyfill loaded before it; loaded
  // only here, so that commands other than enrol start without it.
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  // @peculiar/x509 signs with the global WebCrypto (Node's own, globalThis.crypto).
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const request = await x509.Pkcs10CertificateRequestGenerator.create({
    name: [{ CN: [commonName] }],
    keys,
    signingAlgorithm: ALGORITHM,
  });
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { privateKey: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY'), csr: request.toString('pem') };
}
