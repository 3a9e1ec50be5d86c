import type { Queryable } from '../db/pool.js';
import { REACH_CTE } from './repository.js';

/**
 * SQL of the hive's machines: the certificate authority's row, machines and their certificates,
 * and permanent enrolment's requests. What a credential may see is decided inside each query from
 * the reach CTE (repository.ts): its person's own machines, or every machine of the organisation
 * for an admin of its root node. Another organisation's machine or request is never loaded.
 */

/** An admin (or owner) of the organisation's root node, as the reach of token `$1` has it. */
const ORGANISATION_ADMIN = `EXISTS (SELECT 1 FROM reach JOIN hive.nodes root ON root.id = reach.node_id WHERE root.parent_id IS NULL AND reach.rank >= 3)`;

/** A machine's status, as lists answer it: revoked, expired (its lifetime over, or no certificate left valid), or active. */
const MACHINE_STATUS = `CASE WHEN m.revoked_at IS NOT NULL THEN 'revoked'
  WHEN m.expires_at <= now() OR NOT EXISTS (SELECT 1 FROM hive.machine_certificates c WHERE c.machine_id = m.id AND c.not_after > now()) THEN 'expired'
  ELSE 'active' END`;

export async function readCertificateAuthority(db: Queryable): Promise<{ certificate: string; sealed_key: Buffer } | undefined> {
  const { rows } = await db.query<{ certificate: string; sealed_key: Buffer }>('SELECT certificate, sealed_key FROM hive.certificate_authority');
  return rows[0];
}

/** The first start's CA; a concurrent first start that inserted already keeps its own. */
export async function insertCertificateAuthority(db: Queryable, ca: { certificate: string; sealedKey: Buffer }): Promise<void> {
  await db.query('INSERT INTO hive.certificate_authority (certificate, sealed_key) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [ca.certificate, ca.sealedKey]);
}

export type MachineKind = 'temporary' | 'permanent';
export type MachineStatus = 'active' | 'revoked' | 'expired';

export interface MachineRow {
  id: string;
  org_id: string;
  person_id: string;
  person_email: string;
  name: string;
  kind: MachineKind;
  status: MachineStatus;
  expires_at: Date | null;
  created_at: Date;
  last_seen_at: Date | null;
  revoked_at: Date | null;
  certificate_expires_at: Date | null;
}

const MACHINE_COLUMNS = `m.id, m.org_id, m.person_id, p.email AS person_email, m.name, m.kind, ${MACHINE_STATUS} AS status, m.expires_at, m.created_at,
  m.last_seen_at, m.revoked_at, (SELECT max(c.not_after) FROM hive.machine_certificates c WHERE c.machine_id = m.id) AS certificate_expires_at`;

/** A new machine; undefined when its name is taken in the organisation (by a live machine or a revoked one: names are never freed). */
export async function insertMachine(
  db: Queryable,
  machine: { id: string; orgId: string; personId: string; name: string; kind: MachineKind; tokenId: string; expiresAt: Date | null },
): Promise<{ created_at: Date } | undefined> {
  const { rows } = await db.query<{ created_at: Date }>(
    `INSERT INTO hive.machines (id, org_id, person_id, name, kind, token_id, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (org_id, name) DO NOTHING RETURNING created_at`,
    [machine.id, machine.orgId, machine.personId, machine.name, machine.kind, machine.tokenId, machine.expiresAt],
  );
  return rows[0];
}

export async function machineNameTaken(db: Queryable, orgId: string, name: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM hive.machines WHERE org_id = $1 AND name = $2', [orgId, name]);
  return rowCount !== 0;
}

export async function insertMachineCertificate(db: Queryable, certificate: { serial: string; machineId: string; pem: string; notAfter: Date }): Promise<void> {
  await db.query('INSERT INTO hive.machine_certificates (serial, machine_id, certificate, not_after) VALUES ($1, $2, $3, $4)', [
    certificate.serial,
    certificate.machineId,
    certificate.pem,
    certificate.notAfter,
  ]);
}

/** The machines token `$1` may see: its person's own, or all of the organisation's for an organisation admin. Newest first. */
export async function machinesInView(db: Queryable, tokenId: string, personId: string | null): Promise<MachineRow[]> {
  const { rows } = await db.query<MachineRow>(
    `WITH ${REACH_CTE}
     SELECT ${MACHINE_COLUMNS}
       FROM hive.machines m JOIN hive.people p ON p.id = m.person_id
       JOIN hive.tokens t ON t.id = $1 AND t.org_id = m.org_id
      WHERE m.person_id = $2 OR ${ORGANISATION_ADMIN}
      ORDER BY m.created_at DESC, m.id`,
    [tokenId, personId],
  );
  return rows;
}

/** One machine in the view of token `$1`, by id or name, locked for its revocation; undefined outside the view. */
export async function machineInViewForUpdate(db: Queryable, tokenId: string, personId: string | null, ref: string): Promise<MachineRow | undefined> {
  const { rows } = await db.query<MachineRow>(
    `WITH ${REACH_CTE}
     SELECT ${MACHINE_COLUMNS}
       FROM hive.machines m JOIN hive.people p ON p.id = m.person_id
       JOIN hive.tokens t ON t.id = $1 AND t.org_id = m.org_id
      WHERE (m.id = $3 OR m.name = $3) AND (m.person_id = $2 OR ${ORGANISATION_ADMIN})
      FOR UPDATE OF m`,
    [tokenId, personId, ref],
  );
  return rows[0];
}

/** Revokes the machine; the triggers of migration 028 revoke its token and announce it to the relays. */
export async function revokeMachine(db: Queryable, machineId: string, revokedBy: string): Promise<Date> {
  const { rows } = await db.query<{ revoked_at: Date }>(
    `UPDATE hive.machines SET revoked_at = coalesce(revoked_at, now()), revoked_by = coalesce(revoked_by, $2) WHERE id = $1 RETURNING revoked_at`,
    [machineId, revokedBy],
  );
  return rows[0]!.revoked_at;
}

export interface CertificateMachineRow {
  machine_id: string;
  org_id: string;
  person_id: string;
  name: string;
  kind: MachineKind;
  expires_at: Date | null;
  revoked_at: Date | null;
  certificate: string;
  not_after: Date;
  /** Whether the machine may pass: not revoked, its lifetime and this certificate's not over. */
  active: boolean;
}

const MACHINE_BY_CERTIFICATE = `SELECT m.id AS machine_id, m.org_id, m.person_id, m.name, m.kind, m.expires_at, m.revoked_at, c.certificate, c.not_after,
    (m.revoked_at IS NULL AND coalesce(m.expires_at, 'infinity') > now() AND c.not_after > now()) AS active
  FROM hive.machine_certificates c JOIN hive.machines m ON m.id = c.machine_id
 WHERE c.serial = $1`;

/** The machine a certificate serial was issued to, with that certificate. */
export async function machineByCertificate(db: Queryable, serial: string): Promise<CertificateMachineRow | undefined> {
  const { rows } = await db.query<CertificateMachineRow>(MACHINE_BY_CERTIFICATE, [serial]);
  return rows[0];
}

/** Notes that the machine was seen at the relay; written at most once a minute a machine. */
export async function touchMachine(db: Queryable, machineId: string): Promise<void> {
  await db.query(`UPDATE hive.machines SET last_seen_at = now() WHERE id = $1 AND (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute')`, [machineId]);
}

export async function personForEnrolment(db: Queryable, email: string): Promise<{ id: string; org_id: string; password_hash: string | null } | undefined> {
  const { rows } = await db.query<{ id: string; org_id: string; password_hash: string | null }>('SELECT id, org_id, password_hash FROM hive.people WHERE email = $1', [email]);
  return rows[0];
}

export async function insertEnrolmentRequest(
  db: Queryable,
  request: { id: string; email: string; personId: string | null; csr: string; name: string | null; claimSecretHash: Buffer; expiresAt: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO hive.enrolment_requests (id, email, person_id, csr, name, claim_secret_hash, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [request.id, request.email, request.personId, request.csr, request.name, request.claimSecretHash, request.expiresAt],
  );
}

export interface EnrolmentRequestRow {
  id: string;
  email: string;
  person_id: string | null;
  org_id: string | null;
  csr: string;
  name: string | null;
  status: 'pending' | 'approved' | 'claimed';
  claim_secret_hash: Buffer;
  created_at: Date;
  expires_at: Date;
  expired: boolean;
}

const REQUEST_COLUMNS = `r.id, r.email, r.person_id, p.org_id, r.csr, r.name, r.status, r.claim_secret_hash, r.created_at, r.expires_at, r.expires_at <= now() AS expired`;

/** Live pending requests of people of the organisation token `$1` administers (none for anyone else). */
export async function pendingRequestsInView(db: Queryable, tokenId: string): Promise<EnrolmentRequestRow[]> {
  const { rows } = await db.query<EnrolmentRequestRow>(
    `WITH ${REACH_CTE}
     SELECT ${REQUEST_COLUMNS}
       FROM hive.enrolment_requests r JOIN hive.people p ON p.id = r.person_id
       JOIN hive.tokens t ON t.id = $1 AND t.org_id = p.org_id
      WHERE r.status = 'pending' AND r.expires_at > now() AND ${ORGANISATION_ADMIN}
      ORDER BY r.created_at, r.id`,
    [tokenId],
  );
  return rows;
}

/** One live pending request of the organisation token `$1` administers, locked for its approval. */
export async function pendingRequestInViewForUpdate(db: Queryable, tokenId: string, requestId: string): Promise<EnrolmentRequestRow | undefined> {
  const { rows } = await db.query<EnrolmentRequestRow>(
    `WITH ${REACH_CTE}
     SELECT ${REQUEST_COLUMNS}
       FROM hive.enrolment_requests r JOIN hive.people p ON p.id = r.person_id
       JOIN hive.tokens t ON t.id = $1 AND t.org_id = p.org_id
      WHERE r.id = $2 AND r.status = 'pending' AND r.expires_at > now() AND ${ORGANISATION_ADMIN}
      FOR UPDATE OF r`,
    [tokenId, requestId],
  );
  return rows[0];
}

export async function approveEnrolmentRequest(db: Queryable, requestId: string, approvedBy: string, name: string | null): Promise<void> {
  await db.query(`UPDATE hive.enrolment_requests SET status = 'approved', approved_by = $2, approved_at = now(), name = $3 WHERE id = $1`, [requestId, approvedBy, name]);
}

/** A request by id, locked for its claim (the caller checks the secret). */
export async function enrolmentRequestForUpdate(db: Queryable, requestId: string): Promise<EnrolmentRequestRow | undefined> {
  const { rows } = await db.query<EnrolmentRequestRow>(
    `SELECT ${REQUEST_COLUMNS} FROM hive.enrolment_requests r LEFT JOIN hive.people p ON p.id = r.person_id WHERE r.id = $1 FOR UPDATE OF r`,
    [requestId],
  );
  return rows[0];
}

export async function markEnrolmentClaimed(db: Queryable, requestId: string, machineId: string): Promise<void> {
  await db.query(`UPDATE hive.enrolment_requests SET status = 'claimed', machine_id = $2 WHERE id = $1`, [requestId, machineId]);
}

/** The machine of a certificate serial, locked for its renewal. */
export async function machineByCertificateForUpdate(db: Queryable, serial: string): Promise<CertificateMachineRow | undefined> {
  const { rows } = await db.query<CertificateMachineRow>(`${MACHINE_BY_CERTIFICATE} FOR UPDATE OF m`, [serial]);
  return rows[0];
}
