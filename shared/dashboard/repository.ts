import type { Queryable } from '../db/pool.js';
import type { OwnerType } from '../accounts/repository.js';

/** All SQL of the dashboard domain: the sign-in sessions of developers (dashboard_sessions). */

export interface SignInCandidateRow {
  id: string;
  owner_type: OwnerType;
  status: 'active' | 'closed';
  password_hash: string;
}

export interface SessionAccountRow {
  account_id: string;
  email: string;
  expires_at: Date;
}

/** Emails are unique case-insensitively (accounts_email_key on lower(email)), so this finds at most one. */
export async function findSignInCandidate(q: Queryable, email: string): Promise<SignInCandidateRow | undefined> {
  const { rows } = await q.query<SignInCandidateRow>(
    'SELECT id, owner_type, status, password_hash FROM accounts WHERE lower(email) = lower($1)',
    [email],
  );
  return rows[0];
}

/** The expiry is computed by the database, on the same clock that later checks it. */
export async function insertSession(q: Queryable, session: { tokenHash: Buffer; accountId: string; lifetimeMs: number }): Promise<Date> {
  const { rows } = await q.query<{ expires_at: Date }>(
    `INSERT INTO dashboard_sessions (token_hash, account_id, expires_at)
     VALUES ($1, $2, now() + $3 * interval '1 millisecond')
     RETURNING expires_at`,
    [session.tokenHash, session.accountId, session.lifetimeMs],
  );
  return rows[0]!.expires_at;
}

/** Sign-in sweeps the account's own dead sessions, so the table stays bounded without a janitor. */
export async function deleteExpiredSessions(q: Queryable, accountId: string): Promise<void> {
  await q.query('DELETE FROM dashboard_sessions WHERE account_id = $1 AND expires_at <= now()', [accountId]);
}

/** The account behind a live session; an expired session, or one of a closed account, finds nothing. */
export async function findSessionAccount(q: Queryable, tokenHash: Buffer): Promise<SessionAccountRow | undefined> {
  const { rows } = await q.query<SessionAccountRow>(
    `SELECT s.account_id, a.email, s.expires_at
     FROM dashboard_sessions s JOIN accounts a ON a.id = s.account_id
     WHERE s.token_hash = $1 AND s.expires_at > now()
       AND a.owner_type = 'developer' AND a.status = 'active'`,
    [tokenHash],
  );
  return rows[0];
}

export async function deleteSession(q: Queryable, tokenHash: Buffer): Promise<void> {
  await q.query('DELETE FROM dashboard_sessions WHERE token_hash = $1', [tokenHash]);
}
