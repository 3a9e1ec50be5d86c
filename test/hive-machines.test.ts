import { createPrivateKey, X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signRenewal } from '../shared/hive/machine-proof.js';
import { admitPerson, machineKey, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';

/**
 * Machines (spec 3, issue 29): enrolment by password (temporary, 30 days) and by request, approve
 * and claim (permanent), certificates from the hive's own CA, renewal by proof of the certificate,
 * the list, revocation with its retired name, and what another organisation can learn (nothing).
 */
let world: HiveWorld;
let owner: HiveOwner;
let member: { email: string; token: string };
const MEMBER_PASSWORD = 'member password of machines';
const DAY_MS = 86_400_000;

beforeAll(async () => {
  world = await startHiveWorld();
  owner = await signUp(world, `mach${Date.now() % 1_000_000}`);
  member = { email: `member-${owner.orgId.toLowerCase()}@example.test`, token: '' };
  member.token = await admitPerson(world, owner.token, { email: member.email, node: owner.rootNodeId, role: 'member' });
  const set = await world.post('/v1/password', member.token, { password: MEMBER_PASSWORD });
  expect(set.status).toBe(200);
}, 60_000);
afterAll(() => world?.close());

async function enrol(name?: string) {
  const key = await machineKey();
  const response = await world.post('/v1/enrol', undefined, { email: member.email, password: MEMBER_PASSWORD, csr: key.csr, ...(name && { name }) });
  return { key, response };
}

async function machineCount(orgId: string): Promise<number> {
  const { rows } = await world.hive.db.query<{ n: number }>('SELECT count(*)::int AS n FROM hive.machines WHERE org_id = $1', [orgId]);
  return rows[0]!.n;
}

/** Request, approve (by the owner) and claim: the claim's answer. */
async function enrolPermanently(name?: string) {
  const key = await machineKey();
  const requested = await world.post('/v1/enrol/request', undefined, { email: member.email, csr: key.csr, ...(name && { name }) });
  expect(requested.status).toBe(202);
  const approved = await world.post('/v1/enrol/approve', owner.token, { request_id: requested.body.request_id });
  expect(approved.status).toBe(200);
  const claimed = await world.post('/v1/enrol/claim', undefined, { request_id: requested.body.request_id, claim_secret: requested.body.claim_secret });
  expect(claimed.status).toBe(200);
  return { key, answer: claimed.body };
}

describe('enrolment by password', () => {
  it('makes a temporary machine of 30 days whose certificate the CA signed and whose token works', async () => {
    const before = Date.now();
    const { key, response } = await enrol('laptop-one');
    expect(response.status).toBe(201);
    const { machine, certificate, ca_certificate, token, relay } = response.body;
    expect(machine).toMatchObject({ name: 'laptop-one', kind: 'temporary' });
    expect(machine.id).toMatch(/^mch_[0-9A-Za-z]{24}$/);
    const expiresAt = Date.parse(machine.expires_at);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 30 * DAY_MS);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 30 * DAY_MS);
    expect(relay).toMatch(/^https:\/\/[^/]+:\d+$/);

    const issued = new X509Certificate(certificate);
    const ca = new X509Certificate(ca_certificate);
    expect(issued.checkIssued(ca)).toBe(true);
    expect(issued.verify(ca.publicKey)).toBe(true);
    expect(issued.checkPrivateKey(createPrivateKey(key.privateKeyPem))).toBe(true);
    expect(issued.subject).toContain(`CN=${machine.id}`);
    // The certificate lives as long as the machine.
    expect(Math.abs(Date.parse(issued.validTo) - expiresAt)).toBeLessThan(1_000);

    const whoami = await world.post('/v1/whoami', token);
    expect(whoami.status).toBe(200);
    expect(whoami.body.person.email).toBe(member.email);

    const listed = await world.post('/v1/machines', token);
    expect(listed.status).toBe(200);
    expect(listed.body.machines).toContainEqual(expect.objectContaining({ id: machine.id, name: 'laptop-one', kind: 'temporary', status: 'active', expires_at: machine.expires_at }));
  });

  it('refuses a wrong password and an unknown address alike (401) and creates nothing', async () => {
    const machinesBefore = await machineCount(owner.orgId);
    const { rows: tokensBefore } = await world.hive.db.query('SELECT id FROM hive.tokens WHERE org_id = $1', [owner.orgId]);
    const key = await machineKey();
    const wrong = await world.post('/v1/enrol', undefined, { email: member.email, password: 'not the password at all', csr: key.csr });
    const unknown = await world.post('/v1/enrol', undefined, { email: `nobody-${Date.now()}@example.test`, password: MEMBER_PASSWORD, csr: key.csr });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual(wrong.body);
    expect(Object.keys(wrong.body)).toEqual(['error']);
    expect(await machineCount(owner.orgId)).toBe(machinesBefore);
    const { rows: tokensAfter } = await world.hive.db.query('SELECT id FROM hive.tokens WHERE org_id = $1', [owner.orgId]);
    expect(tokensAfter).toHaveLength(tokensBefore.length);
  });

  it('refuses a certificate request whose signature does not verify (400)', async () => {
    const key = await machineKey();
    const tampered = key.csr.replace(/\n([A-Za-z0-9+/]{20})/, (_all, chunk: string) => `\n${chunk.startsWith('A') ? 'B' : 'A'}${chunk.slice(1)}`);
    const response = await world.post('/v1/enrol', undefined, { email: member.email, password: MEMBER_PASSWORD, csr: tampered });
    expect(response.status).toBe(400);
  });
});

describe('enrolment by request, approval and claim', () => {
  it('grants nothing before approval, lists the request for an admin, refuses a non-admin, and claims once approved', async () => {
    const key = await machineKey();
    const requested = await world.post('/v1/enrol/request', undefined, { email: member.email, csr: key.csr, name: 'build-box' });
    expect(requested.status).toBe(202);
    expect(requested.body).toEqual({ request_id: expect.stringMatching(/^enr_/), claim_secret: expect.any(String), expires_at: expect.any(String) });
    const { request_id, claim_secret } = requested.body;
    const machinesBefore = await machineCount(owner.orgId);

    const early = await world.post('/v1/enrol/claim', undefined, { request_id, claim_secret });
    expect(early.status).toBe(409);
    expect(early.body).toEqual({ error: expect.stringContaining('waiting for approval') });
    expect(await machineCount(owner.orgId)).toBe(machinesBefore);

    const pending = await world.post('/v1/enrol/pending', owner.token);
    expect(pending.status).toBe(200);
    expect(pending.body.requests).toContainEqual(expect.objectContaining({ request_id, email: member.email, name: 'build-box', key_fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/) }));
    expect(JSON.stringify(pending.body)).not.toContain(claim_secret);

    // The member holds a role, but not admin on the organisation.
    expect((await world.post('/v1/enrol/pending', member.token)).status).toBe(403);
    expect((await world.post('/v1/enrol/approve', member.token, { request_id })).status).toBe(403);
    expect((await world.post('/v1/enrol/claim', undefined, { request_id, claim_secret })).status).toBe(409);

    const wrongSecret = await world.post('/v1/enrol/claim', undefined, { request_id, claim_secret: 'hvc_not-the-secret' });
    expect(wrongSecret.status).toBe(404);

    const approved = await world.post('/v1/enrol/approve', owner.token, { request_id });
    expect(approved.status).toBe(200);
    expect((await world.post('/v1/enrol/pending', owner.token)).body.requests.map((request: { request_id: string }) => request.request_id)).not.toContain(request_id);

    const claimed = await world.post('/v1/enrol/claim', undefined, { request_id, claim_secret });
    expect(claimed.status).toBe(200);
    expect(claimed.body.machine).toMatchObject({ name: 'build-box', kind: 'permanent', expires_at: null });
    const issued = new X509Certificate(claimed.body.certificate);
    expect(issued.verify(new X509Certificate(claimed.body.ca_certificate).publicKey)).toBe(true);
    expect(issued.checkPrivateKey(createPrivateKey(key.privateKeyPem))).toBe(true);
    const whoami = await world.post('/v1/whoami', claimed.body.token);
    expect(whoami.body.person.email).toBe(member.email);
    expect(await machineCount(owner.orgId)).toBe(machinesBefore + 1);

    // The machine is made once.
    expect((await world.post('/v1/enrol/claim', undefined, { request_id, claim_secret })).status).toBe(409);
  });

  it("is approved from a machine the organisation's admin already holds", async () => {
    const key = await machineKey();
    const ownersMachine = await world.post('/v1/enrol', undefined, { email: owner.email, password: 'correct horse battery staple', csr: key.csr });
    expect(ownersMachine.status).toBe(201);
    const requested = await world.post('/v1/enrol/request', undefined, { email: member.email, csr: (await machineKey()).csr });
    const pending = await world.post('/v1/enrol/pending', ownersMachine.body.token);
    expect(pending.body.requests.map((request: { request_id: string }) => request.request_id)).toContain(requested.body.request_id);
    expect((await world.post('/v1/enrol/approve', ownersMachine.body.token, { request_id: requested.body.request_id })).status).toBe(200);
    const claimed = await world.post('/v1/enrol/claim', undefined, { request_id: requested.body.request_id, claim_secret: requested.body.claim_secret });
    expect(claimed.body.machine.kind).toBe('permanent');
  });

  it('keeps a request for an unknown address like any other, and no organisation ever lists it', async () => {
    const key = await machineKey();
    const requested = await world.post('/v1/enrol/request', undefined, { email: `stranger-${Date.now()}@example.test`, csr: key.csr });
    expect(requested.status).toBe(202);
    const pending = await world.post('/v1/enrol/pending', owner.token);
    expect(pending.body.requests.map((request: { request_id: string }) => request.request_id)).not.toContain(requested.body.request_id);
    expect((await world.post('/v1/enrol/approve', owner.token, { request_id: requested.body.request_id })).status).toBe(404);
  });
});

describe('renewal', () => {
  it('refuses a temporary machine (409) and renews a permanent one with a proof from its certificate', async () => {
    const temporary = await enrol();
    const temporaryKey = await machineKey();
    const refused = await world.post('/v1/machine/renew', undefined, signRenewal({ certificatePem: temporary.response.body.certificate, privateKeyPem: temporary.key.privateKeyPem, csrPem: temporaryKey.csr }));
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain('temporary');

    const permanent = await enrolPermanently();
    const next = await machineKey();
    // Signed by another key than the certificate's: the proof does not verify.
    const forged = await world.post('/v1/machine/renew', undefined, signRenewal({ certificatePem: permanent.answer.certificate, privateKeyPem: next.privateKeyPem, csrPem: next.csr }));
    expect(forged.status).toBe(401);
    // A proof made for one request cannot carry another.
    const proof = signRenewal({ certificatePem: permanent.answer.certificate, privateKeyPem: permanent.key.privateKeyPem, csrPem: next.csr });
    expect((await world.post('/v1/machine/renew', undefined, { ...proof, csr: temporaryKey.csr })).status).toBe(401);
    // A proof signed long ago is stale.
    const stale = signRenewal({ certificatePem: permanent.answer.certificate, privateKeyPem: permanent.key.privateKeyPem, csrPem: next.csr, now: new Date(Date.now() - 10 * 60_000) });
    expect((await world.post('/v1/machine/renew', undefined, stale)).status).toBe(401);

    const renewed = await world.post('/v1/machine/renew', undefined, proof);
    expect(renewed.status).toBe(200);
    expect(renewed.body.machine).toMatchObject({ id: permanent.answer.machine.id, kind: 'permanent' });
    const fresh = new X509Certificate(renewed.body.certificate);
    const old = new X509Certificate(permanent.answer.certificate);
    expect(fresh.serialNumber).not.toBe(old.serialNumber);
    expect(fresh.verify(new X509Certificate(renewed.body.ca_certificate).publicKey)).toBe(true);
    expect(fresh.checkPrivateKey(createPrivateKey(next.privateKeyPem))).toBe(true);
    expect(fresh.subject).toBe(old.subject);
  });
});

describe('revocation', () => {
  it('revokes a machine with its token and retires its name for good', async () => {
    const { key, response } = await enrol('retired-name');
    const { machine, token } = response.body;
    const revoked = await world.post('/v1/machines/revoke', member.token, { machine: 'retired-name' });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id: machine.id, revoked: true });
    expect((await world.post('/v1/whoami', token)).status).toBe(401);
    const listed = await world.post('/v1/machines', owner.token);
    expect(listed.body.machines).toContainEqual(expect.objectContaining({ id: machine.id, status: 'revoked' }));

    const again = await world.post('/v1/enrol', undefined, { email: member.email, password: MEMBER_PASSWORD, csr: key.csr, name: 'retired-name' });
    expect(again.status).toBe(409);
    const requested = await world.post('/v1/enrol/request', undefined, { email: member.email, csr: key.csr, name: 'retired-name' });
    expect((await world.post('/v1/enrol/approve', owner.token, { request_id: requested.body.request_id })).status).toBe(409);
  });

  it("revokes the machine when its own token is revoked with POST /v1/token/revoke", async () => {
    const { response } = await enrol();
    expect((await world.post('/v1/token/revoke', response.body.token)).status).toBe(200);
    const listed = await world.post('/v1/machines', owner.token);
    expect(listed.body.machines).toContainEqual(expect.objectContaining({ id: response.body.machine.id, status: 'revoked' }));
  });
});

describe('another organisation', () => {
  it('sees none of these machines or requests, and its probes answer as for nothing at all', async () => {
    const other = await signUp(world, `othermach${Date.now() % 1_000_000}`);
    const { response } = await enrol();
    const key = await machineKey();
    const requested = await world.post('/v1/enrol/request', undefined, { email: member.email, csr: key.csr });

    const listed = await world.post('/v1/machines', other.token);
    expect(listed.body.machines).toEqual([]);
    expect((await world.post('/v1/enrol/pending', other.token)).body.requests).toEqual([]);

    const revokeTheirs = await world.post('/v1/machines/revoke', other.token, { machine: response.body.machine.id });
    const revokeNothing = await world.post('/v1/machines/revoke', other.token, { machine: 'mch_000000000000000000000000' });
    expect(revokeTheirs.status).toBe(404);
    expect(revokeNothing.status).toBe(404);
    const approveTheirs = await world.post('/v1/enrol/approve', other.token, { request_id: requested.body.request_id });
    const approveNothing = await world.post('/v1/enrol/approve', other.token, { request_id: 'enr_000000000000000000000000' });
    expect(approveTheirs.status).toBe(404);
    expect(approveNothing.status).toBe(404);
    expect(approveTheirs.body.error.replace(requested.body.request_id, 'X')).toBe(approveNothing.body.error.replace('enr_000000000000000000000000', 'X'));

    // Still live and still pending for their own organisation.
    expect((await world.post('/v1/whoami', response.body.token)).status).toBe(200);
    expect((await world.post('/v1/enrol/pending', owner.token)).body.requests.map((request: { request_id: string }) => request.request_id)).toContain(requested.body.request_id);
  });
});

describe('the sign-in lockout', () => {
  // Last in the file: it locks this file's client address (127.0.0.1) for fifteen minutes, then clears it.
  it('locks enrolment by password after ten wrong passwords for an address, the right one included', async () => {
    const email = `locked-${owner.orgId.toLowerCase()}@example.test`;
    const token = await admitPerson(world, owner.token, { email, node: owner.rootNodeId, role: 'reader' });
    expect((await world.post('/v1/password', token, { password: MEMBER_PASSWORD })).status).toBe(200);
    // Earlier tests' wrong passwords came from this place too: count from none.
    await world.hive.db.query('DELETE FROM hive.sign_in_failures');
    const key = await machineKey();
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 10; attempt++) statuses.push((await world.post('/v1/enrol', undefined, { email, password: `wrong password ${attempt}`, csr: key.csr })).status);
    expect(statuses).toEqual(Array(10).fill(401));
    const locked = await world.post('/v1/enrol', undefined, { email, password: MEMBER_PASSWORD, csr: key.csr });
    expect(locked.status).toBe(429);
    expect(locked.body.error).toContain('locked');
    await world.hive.db.query('DELETE FROM hive.sign_in_failures');
    expect((await world.post('/v1/enrol', undefined, { email, password: MEMBER_PASSWORD, csr: key.csr })).status).toBe(201);
  });
});
