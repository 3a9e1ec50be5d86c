import { nobodysPasswordHash, verifyPassword } from '../../accounts/passwords.js';
import type { Db } from '../../db/pool.js';
import * as repo from './repository.js';
import { startSession, type NewSession } from './sessions.js';

/**
 * Dashboard sign-in with the address and password set at signup (or with POST /v1/password).
 * Spec 3: ten wrong passwords for an address, or from one place (the client address), lock
 * sign-in for fifteen minutes; a wrong password and an unknown address get the same answer.
 */
export const SIGN_IN_LOCK = { limit: 10, windowSeconds: 15 * 60, lockSeconds: 15 * 60 } as const;

/** The one answer to every refused password, so the form does not tell which addresses have accounts. */
export const SIGN_IN_REFUSED = 'The email or password is not right.';

export type PasswordCheck =
  | { outcome: 'accepted'; person: { id: string; orgId: string } }
  | { outcome: 'refused'; message: string }
  | { outcome: 'locked'; message: string; until: Date };

export type SignInOutcome = { outcome: 'signed_in'; session: NewSession } | Exclude<PasswordCheck, { outcome: 'accepted' }>;

/**
 * An address and password checked under the lockout: every place a password is typed (the
 * dashboard's sign-in, and password enrolment could be too) goes through here, so one count
 * guards them all.
 */
export async function checkPassword(db: Db, input: { email: string; password: string; place: string }): Promise<PasswordCheck> {
  const address = input.email.trim().toLowerCase();
  const subjects = [`address:${address}`, `place:${input.place}`];
  const until = await repo.lockedUntil(db, subjects);
  // A lock answers before any password is read, whether or not the address exists: an unknown
  // address collects failures and locks exactly like a known one.
  if (until) return { outcome: 'locked', until, message: lockedMessage(until) };

  // Made (once per process) before the lookup, whatever the address, so that not even the first
  // unknown address of a process takes longer than a known one.
  const dummy = await nobodysPasswordHash();
  const candidate = await repo.signInCandidate(db, address);
  // One scrypt run whatever the address: an unknown address, or a person with no password yet, is
  // checked against a hash of nobody's password, so the answer takes as long as a wrong password.
  const matches = await verifyPassword(input.password, candidate?.password_hash ?? dummy);
  if (!candidate?.password_hash || !matches) {
    await repo.recordSignInFailure(db, subjects, SIGN_IN_LOCK);
    return { outcome: 'refused', message: SIGN_IN_REFUSED };
  }
  // The place's count stays: a right password for one address says nothing about guesses at others.
  await repo.clearSignInFailures(db, subjects[0]!);
  return { outcome: 'accepted', person: { id: candidate.id, orgId: candidate.org_id } };
}

/** The dashboard's sign-in: the password checked under the lockout, then a session. */
export async function signIn(db: Db, input: { email: string; password: string; place: string }): Promise<SignInOutcome> {
  const checked = await checkPassword(db, input);
  if (checked.outcome !== 'accepted') return checked;
  return { outcome: 'signed_in', session: await startSession(db, checked.person) };
}

function lockedMessage(until: Date): string {
  return `Sign-in is locked after ten wrong passwords, for fifteen minutes: try again after ${until.toISOString().slice(11, 16)} UTC.`;
}
