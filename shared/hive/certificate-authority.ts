// @peculiar/x509 resolves its ASN.1 schemas through tsyringe, which needs the Reflect polyfill loaded first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { randomBytes, webcrypto, X509Certificate as NodeCertificate } from 'node:crypto';
import { isIP } from 'node:net';
import type { Queryable } from '../db/pool.js';
// The AES-256-GCM seal of the platform's envelope encryption: generic, it only lives beside its first user.
import { open, seal } from '../vector-stores/crypto.js';
import { hiveError } from './errors.js';
import { insertCertificateAuthority, readCertificateAuthority } from './machine-repository.js';

// @peculiar/x509 signs with the WebCrypto it is given: Node's own.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type CryptoKey = webcrypto.CryptoKey;

/**
 * The hive's own certificate authority (spec 3: machines enrol with a certificate). One ECDSA
 * P-256 key, made on the hive's first start and kept in PostgreSQL only sealed under the platform's
 * master key (shared/platform/master-key.ts), so every hive replica and the relay load the same CA
 * and a database dump alone cannot sign. It issues machines' client certificates (from their
 * certificate requests: the private key never leaves the machine) and the relay's server
 * certificate.
 */
const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;
const CA_LIFETIME_DAYS = 3_650;
const SEAL_AAD = 'hive certificate authority key';
const DAY_MS = 86_400_000;

export interface IssuedCertificate {
  pem: string;
  /** Lowercase hex, as hive.machine_certificates keys it and the relay reads it from the TLS peer. */
  serial: string;
  notAfter: Date;
}

export class CertificateAuthority {
  private readonly nodeCertificate: NodeCertificate;

  constructor(
    readonly certificatePem: string,
    private readonly privateKey: CryptoKey,
  ) {
    this.nodeCertificate = new NodeCertificate(certificatePem);
  }

  /** A machine's client certificate for the key of `csrPem`: subject CN the machine id, O its organisation. */
  async issueMachineCertificate(request: x509.Pkcs10CertificateRequest, machine: { id: string; orgId: string; notAfter: Date }): Promise<IssuedCertificate> {
    return this.issue({
      subject: `CN=${machine.id}, O=${machine.orgId}`,
      publicKey: request.publicKey,
      notAfter: machine.notAfter,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
      ],
    });
  }

  /** The relay's server certificate, for a key made here and kept in the relay's memory only. */
  async issueServerCertificate(hosts: string[], days: number): Promise<{ certificate: IssuedCertificate; privateKeyPem: string }> {
    const keys = await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
    const certificate = await this.issue({
      subject: `CN=${hosts[0]}`,
      publicKey: keys.publicKey,
      notAfter: new Date(Date.now() + days * DAY_MS),
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([...new Set(hosts)].map((host) => (isIP(host) ? { type: 'ip' as const, value: host } : { type: 'dns' as const, value: host }))),
      ],
    });
    const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
    return { certificate, privateKeyPem: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY') };
  }

  /** Whether this CA signed `pem` (a certificate presented back to the hive, as on renewal). */
  signed(pem: string): boolean {
    try {
      const certificate = new NodeCertificate(pem);
      return certificate.checkIssued(this.nodeCertificate) && certificate.verify(this.nodeCertificate.publicKey);
    } catch {
      return false;
    }
  }

  private async issue(params: { subject: string; publicKey: x509.PublicKeyType; notAfter: Date; extensions: x509.Extension[] }): Promise<IssuedCertificate> {
    const serial = newSerial();
    const certificate = await x509.X509CertificateGenerator.create({
      serialNumber: serial,
      subject: params.subject,
      issuer: new x509.X509Certificate(this.certificatePem).subject,
      // A minute back: a client whose clock runs a little behind still accepts it at once.
      notBefore: new Date(Date.now() - 60_000),
      notAfter: params.notAfter,
      publicKey: params.publicKey,
      signingKey: this.privateKey,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [...params.extensions, await x509.AuthorityKeyIdentifierExtension.create(new x509.X509Certificate(this.certificatePem).publicKey)],
    });
    return { pem: certificate.toString('pem'), serial, notAfter: certificate.notAfter };
  }
}

/**
 * A PEM PKCS#10 certificate request whose self-signature verifies (the sender holds its key);
 * 400 otherwise. Only the public key is used: the subject and extensions the hive puts in a
 * certificate are its own.
 */
export async function parseCertificateRequest(pem: string): Promise<x509.Pkcs10CertificateRequest> {
  let request: x509.Pkcs10CertificateRequest;
  try {
    request = new x509.Pkcs10CertificateRequest(pem);
  } catch {
    throw hiveError(400, 'csr: not a PEM PKCS#10 certificate request.');
  }
  const verified = await request.verify().catch(() => false);
  if (!verified) throw hiveError(400, 'csr: its signature does not verify with its own public key (or its key type is not supported: use ECDSA P-256/P-384, RSA or Ed25519).');
  return request;
}

/**
 * The hive's CA, made on the first start and read on every later one. Of two processes starting
 * at once, the first insert wins and both use its row.
 */
export async function loadCertificateAuthority(db: Queryable, masterKey: Buffer): Promise<CertificateAuthority> {
  let row = await readCertificateAuthority(db);
  if (!row) {
    const created = await createCertificateAuthority();
    await insertCertificateAuthority(db, { certificate: created.certificatePem, sealedKey: seal(masterKey, created.pkcs8, SEAL_AAD) });
    row = (await readCertificateAuthority(db))!;
  }
  const pkcs8 = open(masterKey, row.sealed_key, SEAL_AAD);
  const privateKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, KEY_ALGORITHM, false, ['sign']);
  return new CertificateAuthority(row.certificate, privateKey);
}

async function createCertificateAuthority(): Promise<{ certificatePem: string; pkcs8: Buffer }> {
  const keys = await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: newSerial(),
    name: `CN=Memory hive certificate authority ${randomBytes(4).toString('hex')}`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + CA_LIFETIME_DAYS * DAY_MS),
    keys: keys,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certificatePem: certificate.toString('pem'), pkcs8: Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)) };
}

/** 128 random bits, positive and with no leading zero byte, so its hex reads the same everywhere (32 digits). */
function newSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x40;
  return bytes.toString('hex');
}
