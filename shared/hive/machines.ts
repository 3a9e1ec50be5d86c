import { X509Certificate } from 'node:crypto';
import type * as x509 from '@peculiar/x509';
import type { HiveServices } from '../composition/hive.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import type { HiveCredential } from './access.js';
import { parseCertificateRequest } from './certificate-authority.js';
import { hiveError } from './errors.js';
import { verifyRenewal, type RenewalProof } from './machine-proof.js';
import * as repo from './machine-repository.js';
import { insertToken } from './repository.js';
import { mintToken } from './tokens.js';

/**
 * Machines (spec 3): enrolled devices, each with a client certificate from the hive's CA (for the
 * relay) and a token of the person who enrolled it (for the API; that person's roles apply at each
 * use). A temporary machine (enrolled by password) lives 30 days, its token and certificate with
 * it, and cannot be renewed; a permanent one (request, approve, claim) renews its certificate. A
 * machine and its token are revoked together (migration 028's triggers), whichever is revoked first.
 */

export const TEMPORARY_MACHINE_DAYS = 30;
const DAY_MS = 86_400_000;

type MachineServices = Pick<HiveServices, 'config' | 'certificateAuthority'>;

export interface NewMachine {
  orgId: string;
  personId: string;
  kind: repo.MachineKind;
  /** Asked for by the enrolment; a fresh `machine-…` name otherwise. */
  name: string | null;
  request: x509.Pkcs10CertificateRequest;
}

/**
 * Makes the machine in the caller's transaction: its token (shown once, here), its row (409 when
 * the name is taken or retired in the organisation) and its first certificate. What an enrolment answers.
 */
export async function createMachine(hive: MachineServices, client: Queryable, machine: NewMachine) {
  const now = Date.now();
  const expiresAt = machine.kind === 'temporary' ? new Date(now + TEMPORARY_MACHINE_DAYS * DAY_MS) : null;
  const certificateNotAfter = expiresAt ?? new Date(now + hive.config.HIVE_MACHINE_CERTIFICATE_DAYS * DAY_MS);
  const id = newId('mch_');
  const name = machine.name ?? `machine-${newId('', 10).toLowerCase()}`;
  const token = mintToken();
  const tokenId = newId('tok_');
  await insertToken(client, {
    id: tokenId,
    orgId: machine.orgId,
    hash: token.hash,
    displayPrefix: token.displayPrefix,
    name: `machine ${name}`,
    personId: machine.personId,
    grant: null,
    createdBy: machine.personId,
    expiresAt,
  });
  const inserted = await repo.insertMachine(client, { id, orgId: machine.orgId, personId: machine.personId, name, kind: machine.kind, tokenId, expiresAt });
  if (!inserted) throw hiveError(409, `The machine name ${name} is taken in this organisation (a revoked machine's name is retired for good).`);
  const authority = await hive.certificateAuthority();
  const certificate = await authority.issueMachineCertificate(machine.request, { id, orgId: machine.orgId, notAfter: certificateNotAfter });
  await repo.insertMachineCertificate(client, { serial: certificate.serial, machineId: id, pem: certificate.pem, notAfter: certificate.notAfter });
  return {
    machine: { id, name, kind: machine.kind, expires_at: expiresAt?.toISOString() ?? null, created_at: inserted.created_at.toISOString() },
    certificate: certificate.pem,
    certificate_expires_at: certificate.notAfter.toISOString(),
    ca_certificate: authority.certificatePem,
    token: token.plaintext,
    relay: hive.config.hiveRelayUrl,
  };
}

/** What is enrolled: the caller's own machines, or all of the organisation's for an admin of its root node. */
export async function listMachines(db: Queryable, credential: HiveCredential) {
  const rows = await repo.machinesInView(db, credential.tokenId, credential.personId);
  return { machines: rows.map(formatMachine) };
}

/**
 * Revokes a machine (by id or name) in the caller's view: its token with it, its name retired, the
 * relays told at commit. A machine outside the view (another person's, another organisation's, or
 * none) is 404 alike. Revoking a revoked machine answers as the first revocation did.
 */
export async function revokeMachine(db: HiveServices['db'], credential: HiveCredential, ref: string) {
  return withTransaction(db, async (client) => {
    const machine = await repo.machineInViewForUpdate(client, credential.tokenId, credential.personId, ref);
    if (!machine) throw hiveError(404, `No machine ${ref} in your view of this organisation.`);
    const revokedAt = await repo.revokeMachine(client, machine.id, credential.personId ?? credential.tokenId);
    return { id: machine.id, name: machine.name, revoked: true, revoked_at: revokedAt.toISOString() };
  });
}

/**
 * Renews a permanent machine's certificate on the proof made with its current one (machine-proof.ts):
 * 401 unless the certificate is one this hive issued and still valid and the proof verifies
 * against the certificate stored under its serial; 403 for a revoked machine; 409 for a temporary
 * one (its lifetime is fixed at 30 days: enrol permanently instead). The certificate renewed stays
 * valid until its own expiry, so a client that lost this answer can renew again with it.
 */
export async function renewMachine(hive: MachineServices & Pick<HiveServices, 'db'>, proof: RenewalProof) {
  const authority = await hive.certificateAuthority();
  if (!authority.signed(proof.certificate)) throw hiveError(401, 'certificate: not a certificate this hive issued.');
  const serial = new X509Certificate(proof.certificate).serialNumber.toLowerCase();
  const request = await parseCertificateRequest(proof.csr);
  return withTransaction(hive.db, async (client) => {
    const held = await repo.machineByCertificateForUpdate(client, serial);
    if (!held || held.not_after.getTime() <= Date.now() || !verifyRenewal(held.certificate, proof)) {
      throw hiveError(401, 'The renewal proof does not verify: sign it with the key of a current certificate of the machine, within five minutes.');
    }
    if (held.revoked_at) throw hiveError(403, `Machine ${held.machine_id} is revoked.`);
    if (held.kind === 'temporary') throw hiveError(409, 'A temporary machine cannot be renewed: it lives 30 days; enrol it permanently (request, approve, claim).');
    const certificate = await authority.issueMachineCertificate(request, {
      id: held.machine_id,
      orgId: held.org_id,
      notAfter: new Date(Date.now() + hive.config.HIVE_MACHINE_CERTIFICATE_DAYS * DAY_MS),
    });
    await repo.insertMachineCertificate(client, { serial: certificate.serial, machineId: held.machine_id, pem: certificate.pem, notAfter: certificate.notAfter });
    return {
      machine: { id: held.machine_id, name: held.name, kind: held.kind, expires_at: null },
      certificate: certificate.pem,
      certificate_expires_at: certificate.notAfter.toISOString(),
      ca_certificate: authority.certificatePem,
    };
  });
}

export function formatMachine(row: repo.MachineRow) {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    status: row.status,
    person: { id: row.person_id, email: row.person_email },
    expires_at: row.expires_at?.toISOString() ?? null,
    certificate_expires_at: row.certificate_expires_at?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
    last_seen_at: row.last_seen_at?.toISOString() ?? null,
    revoked_at: row.revoked_at?.toISOString() ?? null,
  };
}
