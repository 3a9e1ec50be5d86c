import type { Queryable } from '../db/pool.js';
import { hiveError } from './errors.js';
import { rankOnOrganisation, reachedNode, tokenByHash, type ReachedNodeRow } from './repository.js';
import { rankOf, roleOfRank, type Role } from './roles.js';
import { hashSecret, isTokenFormat } from './tokens.js';

/**
 * Who is calling: the token, its organisation, and the person it carries or the grant of its own.
 * Roles are not part of it: every scoped query reads them afresh (repository.ts REACH_CTE).
 */
export interface HiveCredential {
  tokenId: string;
  orgId: string;
  personId: string | null;
  email: string | null;
  grant: { nodeId: string; role: Role } | null;
  guardrailAuthority: boolean;
  axiomAuthority: boolean;
}

/** The Bearer token of a request: 401 when there is none, or it is not a live hive token. */
export async function authenticate(db: Queryable, authorization: string | undefined): Promise<HiveCredential> {
  const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
  if (!match) throw hiveError(401, 'This route needs a credential: send Authorization: Bearer <token>.');
  const token = match[1]!;
  const row = isTokenFormat(token) ? await tokenByHash(db, hashSecret(token)) : undefined;
  if (!row) throw hiveError(401, 'The token is not valid: unknown, revoked or expired.');
  return {
    tokenId: row.id,
    orgId: row.org_id,
    personId: row.person_id,
    email: row.email,
    grant: row.grant_node_id ? { nodeId: row.grant_node_id, role: row.grant_role! } : null,
    guardrailAuthority: row.guardrail_authority,
    axiomAuthority: row.axiom_authority,
  };
}

/**
 * The node `ref` (an id or a name path such as `acme/backend`) with the caller's role on it, when
 * the caller holds at least `least` there. A node outside the reach is refused exactly as one that
 * does not exist, so a probe learns nothing about other organisations' trees.
 */
export async function nodeWithRole(db: Queryable, credential: HiveCredential, ref: string, least: Role): Promise<ReachedNodeRow> {
  const node = await reachedNode(db, credential.tokenId, ref);
  if (!node) throw hiveError(403, `This credential has no grant on node ${ref}.`);
  requireRank(node.rank, least, `node ${node.name_path}`);
  return node;
}

/** 403 (saying `why`) unless the credential holds admin or owner on its organisation's root node. */
export async function requireOrganisationAdmin(db: Queryable, credential: HiveCredential, why: string): Promise<void> {
  if ((await rankOnOrganisation(db, credential.tokenId)) < rankOf('admin')) throw hiveError(403, why);
}

/** 403 unless `rank` is at least `least`. */
export function requireRank(rank: number, least: Role, what: string): void {
  if (rank < rankOf(least)) throw hiveError(403, `This needs the ${least} role on ${what}; this credential holds ${roleOfRank(rank)}.`);
}

/** Routes that act for a person (setting a password) refuse a token that carries a grant of its own. */
export function requirePerson(credential: HiveCredential): string {
  if (!credential.personId) throw hiveError(403, 'This route acts for a person; this token carries a grant of its own, not a person.');
  return credential.personId;
}
