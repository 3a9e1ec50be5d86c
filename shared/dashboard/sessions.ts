import { createHash, randomBytes } from 'node:crypto';
import { nobodysPasswordHash, verifyPassword } from '../accounts/passwords.js';
import type { Db } from '../db/pool.js';
import * as repo from './repository.js';

/**
 * Sign-in sessions of the developer dashboard (/app), kept server-side in PostgreSQL. The browser
 * holds a random 32-byte token; the database holds only its SHA-256, so sign-out (a deleted row)
 * and a closed account end the session on the very next request.
 */
export const SESSION_LIFETIME_MS = 12 * 60 * 60 * 1000;

/** 32 random bytes in base64url; anything else cannot name a session and is not looked up. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export interface DashboardSession {
  /** The cookie value; returned here once and never stored. */
  token: string;
  accountId: string;
  expiresAt: Date;
}

export interface SessionAccount {
  accountId: string;
  email: string;
}

/**
 * A developer's email and password, checked against the scrypt hash. Every refusal looks the same
 * (undefined): an unknown email, a wrong password, a closed account or an end-user account, so the
 * page cannot be used to learn which emails have accounts.
 */
export async function signIn(db: Db, credentials: { email: string; password: string }): Promise<DashboardSession | undefined> {
  const dummy = await nobodysPasswordHash();
  const candidate = await repo.findSignInCandidate(db, credentials.email);
  // Exactly one scrypt run whether or not the email exists, so the response time does not tell either.
  const passwordMatches = await verifyPassword(credentials.password, candidate?.password_hash ?? dummy);
  if (!candidate || !passwordMatches || candidate.owner_type !== 'developer' || candidate.status !== 'active') return undefined;

  const token = randomBytes(32).toString('base64url');
  await repo.deleteExpiredSessions(db, candidate.id);
  const expiresAt = await repo.insertSession(db, { tokenHash: hashToken(token), accountId: candidate.id, lifetimeMs: SESSION_LIFETIME_MS });
  return { token, accountId: candidate.id, expiresAt };
}

/** The signed-in developer, or undefined for a missing, unknown, expired or signed-out token. */
export async function findSessionAccount(db: Db, token: string | undefined): Promise<SessionAccount | undefined> {
  if (token === undefined || !TOKEN_SHAPE.test(token)) return undefined;
  const row = await repo.findSessionAccount(db, hashToken(token));
  return row && { accountId: row.account_id, email: row.email };
}

export async function signOut(db: Db, token: string | undefined): Promise<void> {
  if (token !== undefined && TOKEN_SHAPE.test(token)) await repo.deleteSession(db, hashToken(token));
}

function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}
