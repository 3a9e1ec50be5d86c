import type { Queryable } from '../../db/pool.js';
import { REACH_CTE } from '../repository.js';
import type { Role } from '../roles.js';

/**
 * SQL of the hive's browser dashboard: its sessions, the one-time codes that open it, the sign-in
 * lockout, and the reads of its pages. Reads of nodes and memories start from the reach of the
 * session's token (REACH_CTE, `$1` the token id), as the API's do, so nothing outside the
 * signed-in grant is ever loaded.
 */

export interface SignInCandidateRow {
  id: string;
  org_id: string;
  password_hash: string | null;
}

/** Addresses are stored lowercase (hive.people's check), so the typed one is looked up lowercased. */
export async function signInCandidate(db: Queryable, email: string): Promise<SignInCandidateRow | undefined> {
  const { rows } = await db.query<SignInCandidateRow>('SELECT id, org_id, password_hash FROM hive.people WHERE email = lower($1)', [email]);
  return rows[0];
}

/** The latest lock among `subjects` still in force, or undefined. */
export async function lockedUntil(db: Queryable, subjects: string[]): Promise<Date | undefined> {
  const { rows } = await db.query<{ until: Date | null }>(
    'SELECT max(locked_until) AS until FROM hive.sign_in_failures WHERE subject = ANY($1::text[]) AND locked_until > now()',
    [subjects],
  );
  return rows[0]?.until ?? undefined;
}

/**
 * Counts one wrong password against each subject. Failures count inside a window that opens at
 * the first of them; the `limit`-th inside it locks the subject for `lockSeconds`. A window older
 * than that starts again at one, so an old failure never adds to a new lock.
 */
export async function recordSignInFailure(db: Queryable, subjects: string[], policy: { limit: number; windowSeconds: number; lockSeconds: number }): Promise<void> {
  await db.query(
    `INSERT INTO hive.sign_in_failures AS f (subject, failures, window_started_at, locked_until)
     SELECT subject, 1, now(), CASE WHEN $2 <= 1 THEN now() + make_interval(secs => $4) END FROM unnest($1::text[]) AS subject
     ON CONFLICT (subject) DO UPDATE SET
       failures = CASE WHEN f.window_started_at > now() - make_interval(secs => $3) THEN f.failures + 1 ELSE 1 END,
       window_started_at = CASE WHEN f.window_started_at > now() - make_interval(secs => $3) THEN f.window_started_at ELSE now() END,
       locked_until = CASE WHEN f.window_started_at > now() - make_interval(secs => $3) AND f.failures + 1 >= $2
                           THEN now() + make_interval(secs => $4) ELSE NULL END`,
    [subjects, policy.limit, policy.windowSeconds, policy.lockSeconds],
  );
  // Subjects whose window and lock are long over mean nothing any more; a few go with each failure,
  // so addresses sprayed at the form do not pile up without a janitor.
  await db.query(
    `DELETE FROM hive.sign_in_failures WHERE subject IN (
       SELECT subject FROM hive.sign_in_failures
        WHERE window_started_at < now() - make_interval(secs => $1) AND (locked_until IS NULL OR locked_until < now())
        LIMIT 100)`,
    [policy.windowSeconds + policy.lockSeconds],
  );
}

export async function clearSignInFailures(db: Queryable, subject: string): Promise<void> {
  await db.query('DELETE FROM hive.sign_in_failures WHERE subject = $1', [subject]);
}

/** The expiry is the database's, on the clock that later checks it. */
export async function insertSession(db: Queryable, session: { secretHash: Buffer; personId: string; tokenId: string; expiresAt: Date }): Promise<void> {
  await db.query(
    'INSERT INTO hive.dashboard_sessions (secret_hash, person_id, token_id, expires_at) VALUES ($1, $2, $3, $4)',
    [session.secretHash, session.personId, session.tokenId, session.expiresAt],
  );
}

/** Sign-in sweeps the person's own dead sessions (their tokens expired with them), so the table stays bounded. */
export async function deleteExpiredSessions(db: Queryable, personId: string): Promise<void> {
  await db.query('DELETE FROM hive.dashboard_sessions WHERE person_id = $1 AND expires_at <= now()', [personId]);
}

export interface SessionRow {
  token_id: string;
  org_id: string;
  person_id: string;
  email: string;
  guardrail_authority: boolean;
  axiom_authority: boolean;
  expires_at: Date;
}

/** The person behind a live session whose token is live too (a revoked token ends its session). */
export async function liveSession(db: Queryable, secretHash: Buffer): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `SELECT s.token_id, t.org_id, p.id AS person_id, p.email, p.guardrail_authority, p.axiom_authority, s.expires_at
       FROM hive.dashboard_sessions s
       JOIN hive.tokens t ON t.id = s.token_id AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       JOIN hive.people p ON p.id = s.person_id
      WHERE s.secret_hash = $1 AND s.expires_at > now()`,
    [secretHash],
  );
  return rows[0];
}

/** Deletes the session and answers its token's id, to be revoked with it. */
export async function deleteSession(db: Queryable, secretHash: Buffer): Promise<string | undefined> {
  const { rows } = await db.query<{ token_id: string }>('DELETE FROM hive.dashboard_sessions WHERE secret_hash = $1 RETURNING token_id', [secretHash]);
  return rows[0]?.token_id;
}

export async function insertOpenCode(db: Queryable, code: { codeHash: Buffer; personId: string; expiresAt: Date }): Promise<void> {
  // The person's used-up and expired codes go as a new one is made.
  await db.query('DELETE FROM hive.dashboard_open_codes WHERE person_id = $1 AND expires_at <= now()', [code.personId]);
  await db.query('INSERT INTO hive.dashboard_open_codes (code_hash, person_id, expires_at) VALUES ($1, $2, $3)', [code.codeHash, code.personId, code.expiresAt]);
}

/** Takes a live code: deleted in the same statement, so two redemptions cannot both succeed. */
export async function takeOpenCode(db: Queryable, codeHash: Buffer): Promise<{ person_id: string; org_id: string } | undefined> {
  const { rows } = await db.query<{ person_id: string; org_id: string; live: boolean }>(
    `WITH taken AS (DELETE FROM hive.dashboard_open_codes WHERE code_hash = $1 RETURNING person_id, expires_at > now() AS live)
     SELECT taken.person_id, p.org_id, taken.live FROM taken JOIN hive.people p ON p.id = taken.person_id`,
    [codeHash],
  );
  return rows[0]?.live ? rows[0] : undefined;
}

export async function seatCount(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ seats: number }>('SELECT count(*)::int AS seats FROM hive.people WHERE org_id = $1', [orgId]);
  return rows[0]!.seats;
}

export interface PersonRow {
  id: string;
  email: string;
  guardrail_authority: boolean;
  axiom_authority: boolean;
  has_password: boolean;
  created_at: Date;
  grants: Array<{ path: string; role: Role }>;
}

export async function peopleOfOrganisation(db: Queryable, orgId: string): Promise<PersonRow[]> {
  const { rows } = await db.query<PersonRow>(
    `SELECT p.id, p.email, p.guardrail_authority, p.axiom_authority, p.password_hash IS NOT NULL AS has_password, p.created_at,
            coalesce(jsonb_agg(jsonb_build_object('path', n.name_path, 'role', rg.role) ORDER BY n.name_path) FILTER (WHERE rg.node_id IS NOT NULL), '[]') AS grants
       FROM hive.people p
       LEFT JOIN hive.role_grants rg ON rg.person_id = p.id
       LEFT JOIN hive.nodes n ON n.id = rg.node_id
      WHERE p.org_id = $1
      GROUP BY p.id
      ORDER BY p.email`,
    [orgId],
  );
  return rows;
}

export interface CredentialRow {
  id: string;
  display_prefix: string;
  name: string | null;
  email: string | null;
  grant_path: string | null;
  grant_role: Role | null;
  created_at: Date;
  expires_at: Date | null;
}

/**
 * The organisation's live tokens, newest first. The tokens behind browser sessions are not listed
 * (they are the sessions themselves, and end with sign-out or expiry), nor are machines' (listed
 * as the machines they belong to, and revoked with them).
 */
export async function liveCredentials(db: Queryable, orgId: string, limit: number): Promise<CredentialRow[]> {
  const { rows } = await db.query<CredentialRow>(
    `SELECT t.id, t.display_prefix, t.name, p.email, n.name_path AS grant_path, t.grant_role, t.created_at, t.expires_at
       FROM hive.tokens t
       LEFT JOIN hive.people p ON p.id = t.person_id
       LEFT JOIN hive.nodes n ON n.id = t.grant_node_id
      WHERE t.org_id = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
        AND NOT EXISTS (SELECT 1 FROM hive.dashboard_sessions s WHERE s.token_id = t.id)
        AND NOT EXISTS (SELECT 1 FROM hive.machines m WHERE m.token_id = t.id)
      ORDER BY t.created_at DESC, t.id
      LIMIT $2`,
    [orgId, limit],
  );
  return rows;
}

/** Revokes a token of `orgId` only: a token of another organisation is not found, and not touched. */
export async function revokeTokenInOrganisation(db: Queryable, orgId: string, tokenId: string): Promise<boolean> {
  const { rowCount } = await db.query('UPDATE hive.tokens SET revoked_at = now() WHERE id = $1 AND org_id = $2 AND revoked_at IS NULL', [tokenId, orgId]);
  return rowCount === 1;
}

export interface BrowsedMemoryRow {
  id: string;
  node_path: string;
  scope: string;
  title: string;
  kind: string;
  pinned: boolean;
  updated_at: Date;
}

/**
 * Current memories of the reach, or of the subtree at `path` (a node's id path) within it, most
 * recently written first.
 */
export async function memoriesToBrowse(db: Queryable, tokenId: string, path: string | null, limit: number): Promise<BrowsedMemoryRow[]> {
  const { rows } = await db.query<BrowsedMemoryRow>(
    `WITH ${REACH_CTE}
     SELECT m.id, n.name_path AS node_path, m.scope, m.title, m.kind, m.pinned, m.updated_at
       FROM hive.memories m JOIN reach ON reach.node_id = m.node_id JOIN hive.nodes n ON n.id = m.node_id
      WHERE m.forgotten_at IS NULL AND m.superseded_by IS NULL
        AND ($2::text IS NULL OR n.path = $2 OR starts_with(n.path, $2 || '/'))
      ORDER BY m.updated_at DESC, m.id
      LIMIT $3`,
    [tokenId, path, limit],
  );
  return rows;
}
