import { createHash, randomBytes } from 'node:crypto';
import { withTransaction, type Db } from '../../db/pool.js';
import { newId } from '../../ids.js';
import { requirePerson, type HiveCredential } from '../access.js';
import * as hiveRepo from '../repository.js';
import { mintToken } from '../tokens.js';
import * as repo from './repository.js';

/**
 * Sessions of the hive's browser dashboard, kept server side (hive.dashboard_sessions). The
 * browser holds a random 32-byte secret in a cookie; the table holds its SHA-256, so sign-out (a
 * deleted row) ends the session on the very next request, whoever holds a copy of the cookie.
 *
 * Each session carries a person token of its own, never shown to anyone: the pages read through
 * it with the same reach-scoped queries and domain functions as the API (a demotion applies to an
 * open session at once), and it is revoked when the session ends.
 */
export const SESSION_LIFETIME_MS = 12 * 60 * 60 * 1000;
/** A code from POST /v1/dashboard/session opens the dashboard once, within this long. */
export const OPEN_CODE_LIFETIME_MS = 2 * 60 * 1000;

/** 32 random bytes in base64url; anything else names no session and is not looked up. */
const SECRET_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export interface NewSession {
  /** The cookie value; returned here once and never stored. */
  secret: string;
  expiresAt: Date;
}

/** The signed-in person, as the API's routes see a caller, plus their address. */
export interface SignedIn {
  credential: HiveCredential & { personId: string };
  email: string;
}

export async function startSession(db: Db, person: { id: string; orgId: string }): Promise<NewSession> {
  const secret = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + SESSION_LIFETIME_MS);
  // The token's plaintext is dropped here: the session reaches it by id, and nobody can present it.
  const token = mintToken();
  const tokenId = newId('tok_');
  await withTransaction(db, async (client) => {
    await repo.deleteExpiredSessions(client, person.id);
    await hiveRepo.insertToken(client, {
      id: tokenId,
      orgId: person.orgId,
      hash: token.hash,
      displayPrefix: token.displayPrefix,
      name: 'dashboard session',
      personId: person.id,
      grant: null,
      createdBy: person.id,
      expiresAt,
    });
    await repo.insertSession(client, { secretHash: hashSecret(secret), personId: person.id, tokenId, expiresAt });
  });
  return { secret, expiresAt };
}

/** The signed-in person, or undefined for a missing, unknown, expired or signed-out session. */
export async function findSession(db: Db, secret: string | undefined): Promise<SignedIn | undefined> {
  if (secret === undefined || !SECRET_SHAPE.test(secret)) return undefined;
  const row = await repo.liveSession(db, hashSecret(secret));
  if (!row) return undefined;
  return {
    email: row.email,
    credential: {
      tokenId: row.token_id,
      orgId: row.org_id,
      personId: row.person_id,
      email: row.email,
      grant: null,
      guardrailAuthority: row.guardrail_authority,
      axiomAuthority: row.axiom_authority,
    },
  };
}

/** Deletes the session and revokes its token, together. */
export async function endSession(db: Db, secret: string | undefined): Promise<void> {
  if (secret === undefined || !SECRET_SHAPE.test(secret)) return;
  await withTransaction(db, async (client) => {
    const tokenId = await repo.deleteSession(client, hashSecret(secret));
    if (tokenId) await hiveRepo.revokeToken(client, tokenId);
  });
}

/**
 * POST /v1/dashboard/session: a code that opens the dashboard for the token's person, once and
 * within OPEN_CODE_LIFETIME_MS (the client command opens `url` in a browser). Only a person's
 * token mints one: a token with a grant of its own has nobody to sign in.
 */
export async function mintOpenCode(db: Db, credential: HiveCredential, baseUrl: string) {
  const personId = requirePerson(credential);
  const code = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + OPEN_CODE_LIFETIME_MS);
  await repo.insertOpenCode(db, { codeHash: hashSecret(code), personId, expiresAt });
  return { url: `${baseUrl}/dashboard/open?code=${code}`, code, expires_at: expiresAt.toISOString() };
}

/** Turns a live code into a session; undefined for an unknown, used or expired code. */
export async function redeemOpenCode(db: Db, code: string | undefined): Promise<NewSession | undefined> {
  if (code === undefined || !SECRET_SHAPE.test(code)) return undefined;
  const taken = await repo.takeOpenCode(db, hashSecret(code));
  return taken && startSession(db, { id: taken.person_id, orgId: taken.org_id });
}

function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}
