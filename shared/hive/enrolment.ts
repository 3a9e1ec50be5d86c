import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { HiveServices } from '../composition/hive.js';
import { withTransaction } from '../db/pool.js';
import { newId } from '../ids.js';
import { requireOrganisationAdmin, type HiveCredential } from './access.js';
import { parseCertificateRequest } from './certificate-authority.js';
import { checkPassword } from './dashboard/sign-in.js';
import { hiveError } from './errors.js';
import * as repo from './machine-repository.js';
import { createMachine } from './machines.js';
import { countInWindow } from './repository.js';
import { hashSecret } from './tokens.js';

const APPROVER_ONLY = 'Enrolments are approved by an admin of the organisation: this credential holds no admin role on its root node.';

/**
 * Enrolling machines (spec 3). By password: a person's address and the password they set with
 * POST /v1/password make a temporary machine at once. Permanently: a request (which grants
 * nothing and answers the same whether the address has an account or not), an approval by an
 * admin of that person's organisation, then the claim with the request's secret, which makes the
 * machine. The private key never reaches the hive: each path carries a certificate request.
 */

type EnrolmentServices = Pick<HiveServices, 'db' | 'config' | 'certificateAuthority'>;

const REQUEST_LIFETIME_MS = 7 * 86_400_000;
/** Enrolment attempts (by password, or requests) one client address may make an hour, counted in the database. */
const ENROL_ATTEMPTS_PER_HOUR = 60;
const ENROL_WINDOW_SECONDS = 3_600;

export interface PasswordEnrolment {
  email: string;
  password: string;
  csr: string;
  name?: string;
}

/**
 * A temporary machine for the person whose address and password these are; 401 alike for a wrong
 * password and an unknown address. A password typed here counts as a sign-in (spec 3's lockout,
 * shared with the dashboard's: shared/hive/dashboard/sign-in.ts): ten wrong ones for an address,
 * or from one client address, lock both for fifteen minutes (429), before any password is read.
 */
export async function enrolWithPassword(hive: EnrolmentServices, input: PasswordEnrolment, clientAddress: string) {
  await limitAttempts(hive, clientAddress);
  const request = await parseCertificateRequest(input.csr);
  const checked = await checkPassword(hive.db, { email: input.email, password: input.password, place: clientAddress });
  if (checked.outcome === 'locked') throw hiveError(429, checked.message);
  if (checked.outcome === 'refused') throw hiveError(401, 'Wrong email or password (set the password with POST /v1/password).');
  const { person } = checked;
  return withTransaction(hive.db, (client) => createMachine(hive, client, { orgId: person.orgId, personId: person.id, kind: 'temporary', name: input.name ?? null, request }));
}

export interface EnrolmentRequestInput {
  email: string;
  csr: string;
  name?: string;
}

/** The first leg of permanent enrolment: grants nothing; the claim secret is shown once. */
export async function requestEnrolment(hive: EnrolmentServices, input: EnrolmentRequestInput, clientAddress: string) {
  await limitAttempts(hive, clientAddress);
  await parseCertificateRequest(input.csr);
  const person = await repo.personForEnrolment(hive.db, input.email);
  const id = newId('enr_');
  const claimSecret = `hvc_${randomBytes(32).toString('base64url')}`;
  await repo.insertEnrolmentRequest(hive.db, {
    id,
    email: input.email,
    personId: person?.id ?? null,
    csr: input.csr,
    name: input.name ?? null,
    claimSecretHash: hashSecret(claimSecret),
    expiresAt: new Date(Date.now() + REQUEST_LIFETIME_MS),
  });
  return { request_id: id, claim_secret: claimSecret, expires_at: new Date(Date.now() + REQUEST_LIFETIME_MS).toISOString() };
}

/** Waiting requests of the caller's organisation; 403 for a credential without admin on the organisation. */
export async function pendingEnrolments(hive: EnrolmentServices, credential: HiveCredential) {
  await requireOrganisationAdmin(hive.db, credential, APPROVER_ONLY);
  const rows = await repo.pendingRequestsInView(hive.db, credential.tokenId);
  return {
    requests: await Promise.all(
      rows.map(async (row) => ({
        request_id: row.id,
        email: row.email,
        name: row.name,
        // What the requesting machine can show its user, to be compared before approving.
        key_fingerprint: await keyFingerprint(row.csr),
        created_at: row.created_at.toISOString(),
        expires_at: row.expires_at.toISOString(),
      })),
    ),
  };
}

/**
 * Admits a waiting request permanently, optionally naming the machine (409 when that name, or the
 * one requested, is taken or retired). 403 without admin on the organisation; a request of another
 * organisation, an unknown one or one no longer pending is 404 alike.
 */
export async function approveEnrolment(hive: EnrolmentServices, credential: HiveCredential, input: { request_id: string; name?: string }) {
  await requireOrganisationAdmin(hive.db, credential, APPROVER_ONLY);
  return withTransaction(hive.db, async (client) => {
    const request = await repo.pendingRequestInViewForUpdate(client, credential.tokenId, input.request_id);
    if (!request) throw hiveError(404, `No pending enrolment request ${input.request_id} in your organisation.`);
    const name = input.name ?? request.name;
    if (name && (await repo.machineNameTaken(client, request.org_id!, name))) {
      throw hiveError(409, `The machine name ${name} is taken in this organisation (a revoked machine's name is retired for good).`);
    }
    await repo.approveEnrolmentRequest(client, request.id, credential.personId ?? credential.tokenId, name);
    return { request_id: request.id, email: request.email, name, approved: true };
  });
}

/**
 * The last leg: once approved, the machine (permanent), its certificate and its token, once. 409
 * while the request waits; 404 for an unknown request, a wrong secret, or an expired request.
 */
export async function claimEnrolment(hive: EnrolmentServices, input: { request_id: string; claim_secret: string }) {
  return withTransaction(hive.db, async (client) => {
    const request = await repo.enrolmentRequestForUpdate(client, input.request_id);
    if (!request || !timingSafeEqual(request.claim_secret_hash, hashSecret(input.claim_secret)) || request.expired) {
      throw hiveError(404, 'No enrolment request matches this id and claim secret (or it has expired).');
    }
    if (request.status === 'pending') throw hiveError(409, 'The enrolment request is waiting for approval by an admin of the organisation.');
    if (request.status === 'claimed') throw hiveError(409, 'The enrolment request was already claimed.');
    const answer = await createMachine(hive, client, {
      orgId: request.org_id!,
      personId: request.person_id!,
      kind: 'permanent',
      name: request.name,
      request: await parseCertificateRequest(request.csr),
    });
    await repo.markEnrolmentClaimed(client, request.id, answer.machine.id);
    return answer;
  });
}

async function limitAttempts(hive: EnrolmentServices, clientAddress: string): Promise<void> {
  const window = await countInWindow(hive.db, `enrol:${clientAddress}`, ENROL_WINDOW_SECONDS);
  if (window.count > ENROL_ATTEMPTS_PER_HOUR) throw hiveError(429, `Too many enrolment attempts from this address; try again after ${window.resetsAt.toISOString()}.`);
}

async function keyFingerprint(csrPem: string): Promise<string> {
  const request = await parseCertificateRequest(csrPem);
  return Buffer.from(await request.publicKey.getThumbprint('SHA-256')).toString('hex');
}

