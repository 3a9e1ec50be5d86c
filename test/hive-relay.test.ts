import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Relay } from '../api/hive/relay/relay.js';
import { signRenewal } from '../shared/hive/machine-proof.js';
import { machineKey, relayPost, signUp, startHiveWorld, startWorldRelay, type HiveOwner, type HiveWorld } from './support/hive-world.js';

/**
 * The mutual-TLS relay (spec 3): only machines with a live certificate of the hive's CA pass, to
 * the hive behind it; a revoked machine is refused within a minute of its revocation (pushed at
 * commit, so in practice at once); renewal travels through it on its proof.
 */
let world: HiveWorld;
let relay: Relay;
let owner: HiveOwner;
let ca: string;
const PASSWORD = 'correct horse battery staple';

interface Machine {
  id: string;
  name: string;
  token: string;
  tls: { cert: string; key: string };
}

beforeAll(async () => {
  world = await startHiveWorld();
  relay = await startWorldRelay(world);
  owner = await signUp(world, `relay${Date.now() % 1_000_000}`);
}, 60_000);
afterAll(async () => {
  await relay?.close();
  await world?.close();
});

async function enrolTemporary(): Promise<Machine> {
  const key = await machineKey();
  const enrolled = await world.post('/v1/enrol', undefined, { email: owner.email, password: PASSWORD, csr: key.csr });
  expect(enrolled.status).toBe(201);
  ca = enrolled.body.ca_certificate;
  return { id: enrolled.body.machine.id, name: enrolled.body.machine.name, token: enrolled.body.token, tls: { cert: enrolled.body.certificate, key: key.privateKeyPem } };
}

async function enrolPermanent(): Promise<Machine> {
  const key = await machineKey();
  const requested = await world.post('/v1/enrol/request', undefined, { email: owner.email, csr: key.csr });
  expect((await world.post('/v1/enrol/approve', owner.token, { request_id: requested.body.request_id })).status).toBe(200);
  const claimed = await world.post('/v1/enrol/claim', undefined, { request_id: requested.body.request_id, claim_secret: requested.body.claim_secret });
  expect(claimed.status).toBe(200);
  return { id: claimed.body.machine.id, name: claimed.body.machine.name, token: claimed.body.token, tls: { cert: claimed.body.certificate, key: key.privateKeyPem } };
}

/** A client certificate and key from a CA of its own, not the hive's. */
async function foreignCertificate(): Promise<{ cert: string; key: string }> {
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const crypto = webcrypto as never;
  const caKeys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const foreignCa = await x509.X509CertificateGenerator.createSelfSigned(
    { name: 'CN=Some other CA', keys: caKeys, signingAlgorithm: algorithm, extensions: [new x509.BasicConstraintsExtension(true, 0, true)] },
    crypto,
  );
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const certificate = await x509.X509CertificateGenerator.create(
    {
      subject: 'CN=mch_000000000000000000000000',
      issuer: foreignCa.subject,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: algorithm,
      extensions: [new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth])],
    },
    crypto,
  );
  return { cert: certificate.toString('pem'), key: x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY') };
}

describe('the relay', () => {
  it('lets a live machine through to the hive with its token, and presents a certificate of the hive CA', async () => {
    const machine = await enrolTemporary();
    // relayPost trusts only the hive's CA certificate: the handshake itself checks the relay's certificate.
    const whoami = await relayPost(relay.url, ca, '/v1/whoami', machine.tls, machine.token);
    expect(whoami.status).toBe(200);
    expect(whoami.body.person.email).toBe(owner.email);
    // The relay admits the machine; the hive still wants the token.
    const tokenless = await relayPost(relay.url, ca, '/v1/whoami', machine.tls);
    expect(tokenless.status).toBe(401);
    const listed = await world.post('/v1/machines', owner.token);
    expect(listed.body.machines).toContainEqual(expect.objectContaining({ id: machine.id, last_seen_at: expect.any(String) }));
  });

  it('refuses a request without a client certificate, and one with a certificate from another CA', async () => {
    const machine = await enrolTemporary();
    const bare = await relayPost(relay.url, ca, '/v1/whoami', undefined, machine.token);
    expect(bare.status).toBe(401);
    expect(Object.keys(bare.body)).toEqual(['error']);
    const foreign = await relayPost(relay.url, ca, '/v1/whoami', await foreignCertificate(), machine.token);
    expect(foreign.status).toBe(401);
    // The same machine's own certificate passes the same relay.
    expect((await relayPost(relay.url, ca, '/v1/whoami', machine.tls, machine.token)).status).toBe(200);
  });

  it('refuses a revoked machine within a minute of its revocation while a live machine still passes', async () => {
    const doomed = await enrolTemporary();
    const live = await enrolTemporary();
    // The relay has seen (and cached) the doomed machine as active.
    expect((await relayPost(relay.url, ca, '/v1/whoami', doomed.tls, doomed.token)).status).toBe(200);

    const revokedAt = Date.now();
    expect((await world.post('/v1/machines/revoke', owner.token, { machine: doomed.id })).status).toBe(200);
    let refused: { status: number; body: { error: string } } | undefined;
    while (Date.now() - revokedAt < 60_000) {
      const attempt = await relayPost(relay.url, ca, '/v1/whoami', doomed.tls, doomed.token);
      if (attempt.status === 403) {
        refused = attempt;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const elapsed = Date.now() - revokedAt;
    expect(refused?.body.error).toContain('revoked');
    expect(elapsed).toBeLessThan(60_000);
    expect((await relayPost(relay.url, ca, '/v1/whoami', live.tls, live.token)).status).toBe(200);
  }, 70_000);

  it("refuses a machine whose token was revoked with POST /v1/token/revoke", async () => {
    const machine = await enrolTemporary();
    expect((await relayPost(relay.url, ca, '/v1/whoami', machine.tls, machine.token)).status).toBe(200);
    expect((await relayPost(relay.url, ca, '/v1/token/revoke', machine.tls, machine.token)).status).toBe(200);
    const deadline = Date.now() + 60_000;
    let status = 200;
    while (status !== 403 && Date.now() < deadline) {
      status = (await relayPost(relay.url, ca, '/v1/whoami', machine.tls, machine.token)).status;
      if (status !== 403) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(status).toBe(403);
  }, 70_000);
});

describe('a missed revocation announcement', () => {
  it('still refuses the machine within a minute: no cached status outlives its TTL', async () => {
    const shortLived = await startWorldRelay(world, { ttlMs: 3_000 });
    try {
      const machine = await enrolTemporary();
      expect((await relayPost(shortLived.url, ca, '/v1/whoami', machine.tls, machine.token)).status).toBe(200);
      // Revoked with the triggers off: no NOTIFY reaches any relay, as when a listening connection is down.
      const client = await world.hive.db.connect();
      try {
        await client.query('BEGIN');
        await client.query('SET LOCAL session_replication_role = replica');
        await client.query('UPDATE hive.machines SET revoked_at = now() WHERE id = $1', [machine.id]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      const revokedAt = Date.now();
      let status = 200;
      while (status !== 403 && Date.now() - revokedAt < 60_000) {
        status = (await relayPost(shortLived.url, ca, '/v1/whoami', machine.tls, machine.token)).status;
        if (status !== 403) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(status).toBe(403);
      expect(Date.now() - revokedAt).toBeLessThan(60_000);
    } finally {
      await shortLived.close();
    }
  }, 70_000);
});

describe('renewal through the relay', () => {
  it('renews a permanent machine, after which its old and new certificates both pass; a temporary machine is refused', async () => {
    const temporary = await enrolTemporary();
    const temporaryNext = await machineKey();
    const refused = await relayPost(relay.url, ca, '/v1/machine/renew', temporary.tls, undefined, signRenewal({ certificatePem: temporary.tls.cert, privateKeyPem: temporary.tls.key, csrPem: temporaryNext.csr }));
    expect(refused.status).toBe(409);

    const permanent = await enrolPermanent();
    const next = await machineKey();
    const renewed = await relayPost(relay.url, ca, '/v1/machine/renew', permanent.tls, undefined, signRenewal({ certificatePem: permanent.tls.cert, privateKeyPem: permanent.tls.key, csrPem: next.csr }));
    expect(renewed.status).toBe(200);
    const fresh = { cert: renewed.body.certificate as string, key: next.privateKeyPem };
    expect((await relayPost(relay.url, ca, '/v1/whoami', fresh, permanent.token)).status).toBe(200);
    // The renewed certificate stays valid until its own expiry.
    expect((await relayPost(relay.url, ca, '/v1/whoami', permanent.tls, permanent.token)).status).toBe(200);

    // Revoking the machine stops every certificate it holds.
    expect((await world.post('/v1/machines/revoke', owner.token, { machine: permanent.name })).status).toBe(200);
    const deadline = Date.now() + 60_000;
    let statuses: number[] = [];
    do {
      statuses = [(await relayPost(relay.url, ca, '/v1/whoami', fresh)).status, (await relayPost(relay.url, ca, '/v1/whoami', permanent.tls)).status];
    } while (statuses.some((status) => status !== 403) && Date.now() < deadline && (await new Promise((resolve) => setTimeout(resolve, 200)), true));
    expect(statuses).toEqual([403, 403]);
  }, 70_000);
});
