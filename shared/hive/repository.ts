import type { Queryable } from '../db/pool.js';
import type { Role } from './roles.js';

/**
 * SQL of the hive's identity side: organisations, nodes, people, role grants, tokens, device codes
 * and the store-kept rate windows. Memory SQL is in memory-repository.ts.
 */

/** The version of the hive's tables, as the last migration that changed them set it (migration 018 on). */
export async function readSchemaVersion(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ version: string }>('SELECT version FROM hive.schema_info');
  if (!rows[0]) throw new Error('hive.schema_info holds no version row');
  return rows[0].version;
}

/** The token's grants (`$1` the token id): its person's roles, or the grant it carries itself. */
const TOKEN_GRANTS = `SELECT rg.node_id, rg.role
      FROM hive.tokens t JOIN hive.role_grants rg ON rg.person_id = t.person_id
     WHERE t.id = $1 AND t.revoked_at IS NULL
    UNION ALL
    SELECT t.grant_node_id, t.grant_role
      FROM hive.tokens t
     WHERE t.id = $1 AND t.revoked_at IS NULL AND t.grant_node_id IS NOT NULL`;

const RANK_OF_ROLE = `CASE g.role WHEN 'reader' THEN 1 WHEN 'member' THEN 2 WHEN 'admin' THEN 3 WHEN 'owner' THEN 4 END`;

/**
 * The nodes a token reaches, with the best role it holds on each: a person's grants (read now, so
 * a demotion applies to every token they hold) or the token's own grant, each inherited by every
 * node below it, ranked as roles.ts ranks them. `$1` is the token id; every scoped read starts from this CTE, so what lies
 * outside it is never loaded. A revoked token reaches nothing even mid-request.
 */
export const REACH_CTE = `reach AS (
  SELECT n.id AS node_id, max(${RANK_OF_ROLE}) AS rank
  FROM (
    ${TOKEN_GRANTS}
  ) g
  JOIN hive.nodes gn ON gn.id = g.node_id
  JOIN hive.nodes n ON n.org_id = gn.org_id AND (n.id = gn.id OR starts_with(n.path, gn.path || '/'))
  GROUP BY n.id
)`;

export interface TokenRow {
  id: string;
  org_id: string;
  person_id: string | null;
  email: string | null;
  grant_node_id: string | null;
  grant_role: Role | null;
  guardrail_authority: boolean;
  axiom_authority: boolean;
}

/** A live token by its hash, with the person it carries (if any). */
export async function tokenByHash(db: Queryable, hash: Buffer): Promise<TokenRow | undefined> {
  const { rows } = await db.query<TokenRow>({
    // Named, as the other statements every remember runs are: each connection parses and plans it
    // once. Parsing and planning were more than half of a remember's database time (bench, 2026-11-27).
    name: 'hive-token-by-hash',
    text: `SELECT t.id, t.org_id, t.person_id, p.email, t.grant_node_id, t.grant_role,
            coalesce(p.guardrail_authority, false) AS guardrail_authority, coalesce(p.axiom_authority, false) AS axiom_authority
       FROM hive.tokens t LEFT JOIN hive.people p ON p.id = t.person_id
      WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
    values: [hash],
  });
  return rows[0];
}

export interface InsertToken {
  id: string;
  orgId: string;
  hash: Buffer;
  displayPrefix: string;
  name: string | null;
  personId: string | null;
  grant: { nodeId: string; role: Role } | null;
  createdBy: string | null;
  expiresAt: Date | null;
}

export async function insertToken(db: Queryable, token: InsertToken): Promise<{ created_at: Date }> {
  const { rows } = await db.query<{ created_at: Date }>(
    `INSERT INTO hive.tokens (id, org_id, token_hash, display_prefix, name, person_id, grant_node_id, grant_role, created_by, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING created_at`,
    [token.id, token.orgId, token.hash, token.displayPrefix, token.name, token.personId, token.grant?.nodeId ?? null, token.grant?.role ?? null, token.createdBy, token.expiresAt],
  );
  return rows[0]!;
}

export async function revokeToken(db: Queryable, tokenId: string): Promise<Date | undefined> {
  const { rows } = await db.query<{ revoked_at: Date }>(`UPDATE hive.tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING revoked_at`, [tokenId]);
  return rows[0]?.revoked_at;
}

/** Counts one attempt in the current fixed window of `key` and answers the window's count so far. */
export async function countInWindow(db: Queryable, key: string, windowSeconds: number): Promise<{ count: number; resetsAt: Date }> {
  // Old windows of this key go in the same statement's wake; nothing else reads them.
  await db.query(`DELETE FROM hive.rate_windows WHERE key = $1 AND window_start < now() - make_interval(secs => $2 * 2)`, [key, windowSeconds]);
  const { rows } = await db.query<{ count: number; resets_at: Date }>(
    `INSERT INTO hive.rate_windows (key, window_start, count)
     VALUES ($1, to_timestamp(floor(extract(epoch FROM now()) / $2) * $2), 1)
     ON CONFLICT (key, window_start) DO UPDATE SET count = hive.rate_windows.count + 1
     RETURNING count, window_start + make_interval(secs => $2) AS resets_at`,
    [key, windowSeconds],
  );
  return { count: rows[0]!.count, resetsAt: rows[0]!.resets_at };
}

export async function personIdByEmail(db: Queryable, email: string): Promise<{ id: string; org_id: string } | undefined> {
  const { rows } = await db.query<{ id: string; org_id: string }>('SELECT id, org_id FROM hive.people WHERE email = $1', [email]);
  return rows[0];
}

export async function insertOrganisation(db: Queryable, org: { id: string; name: string }): Promise<{ created_at: Date }> {
  const { rows } = await db.query<{ created_at: Date }>('INSERT INTO hive.organisations (id, name) VALUES ($1, $2) RETURNING created_at', [org.id, org.name]);
  return rows[0]!;
}

export interface OrganisationRow {
  id: string;
  name: string;
  created_at: Date;
  root_node_id: string;
  people: number;
  balance_micros: string;
}

/** Every organisation, oldest first, with its root node, how many people it holds and its balance (operators' list). */
export async function listOrganisations(db: Queryable): Promise<OrganisationRow[]> {
  const { rows } = await db.query<OrganisationRow>(
    `SELECT o.id, o.name, o.created_at, n.id AS root_node_id,
            (SELECT count(*)::int FROM hive.people p WHERE p.org_id = o.id) AS people,
            coalesce(w.balance_micros, 0) AS balance_micros
       FROM hive.organisations o
       JOIN hive.nodes n ON n.org_id = o.id AND n.parent_id IS NULL
       LEFT JOIN hive.wallets w ON w.org_id = o.id
      ORDER BY o.created_at, o.id`,
  );
  return rows;
}

export interface NodeRow {
  id: string;
  org_id: string;
  parent_id: string | null;
  name: string;
  depth: number;
  path: string;
  name_path: string;
  created_at: Date;
}

export async function insertRootNode(db: Queryable, node: { id: string; orgId: string; name: string; createdBy: string | null }): Promise<NodeRow> {
  const { rows } = await db.query<NodeRow>(
    `INSERT INTO hive.nodes (id, org_id, parent_id, name, depth, path, name_path, created_by)
     VALUES ($1, $2, NULL, $3, 0, $1, $3, $4) RETURNING *`,
    [node.id, node.orgId, node.name, node.createdBy],
  );
  return rows[0]!;
}

/** A child of `parent`; undefined when the parent already has a child of that name. */
export async function insertChildNode(db: Queryable, node: { id: string; parent: NodeRow; name: string; createdBy: string | null }): Promise<NodeRow | undefined> {
  const { rows } = await db.query<NodeRow>(
    `INSERT INTO hive.nodes (id, org_id, parent_id, name, depth, path, name_path, created_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (org_id, name_path) DO NOTHING RETURNING *`,
    [node.id, node.parent.org_id, node.parent.id, node.name, node.parent.depth + 1, `${node.parent.path}/${node.id}`, `${node.parent.name_path}/${node.name}`, node.createdBy],
  );
  return rows[0];
}

/** A node of the organisation by id or name path; its root node when `ref` is null. No token: operators only. */
export async function nodeOfOrganisation(db: Queryable, orgId: string, ref: string | null): Promise<NodeRow | undefined> {
  const { rows } = await db.query<NodeRow>(
    `SELECT * FROM hive.nodes WHERE org_id = $1 AND CASE WHEN $2::text IS NULL THEN parent_id IS NULL ELSE id = $2 OR name_path = $2 END`,
    [orgId, ref],
  );
  return rows[0];
}

export interface ReachedNodeRow extends NodeRow {
  rank: number;
}

/** One node in the token's reach, named by id or by its name path; undefined when outside the reach (or nowhere). */
export async function reachedNode(db: Queryable, tokenId: string, ref: string): Promise<ReachedNodeRow | undefined> {
  // The one node first (by id, or by name path within the token's organisation), then the
  // token's grants on it or above it: a write's check reads a node and its grants, not the reach.
  const { rows } = await db.query<ReachedNodeRow>({
    name: 'hive-reached-node',
    // Columns by name: a prepared statement's result may not change shape under it.
    text: `WITH grants AS (${TOKEN_GRANTS})
     SELECT n.id, n.org_id, n.parent_id, n.name, n.depth, n.path, n.name_path, n.created_at, r.rank
       FROM hive.tokens t
       JOIN hive.nodes n ON n.org_id = t.org_id AND (n.id = $2 OR n.name_path = $2)
       CROSS JOIN LATERAL (
         SELECT max(${RANK_OF_ROLE}) AS rank
           FROM grants g JOIN hive.nodes gn ON gn.id = g.node_id
          WHERE gn.org_id = n.org_id AND (gn.id = n.id OR starts_with(n.path, gn.path || '/'))
       ) r
      WHERE t.id = $1 AND t.revoked_at IS NULL AND r.rank IS NOT NULL`,
    values: [tokenId, ref],
  });
  return rows[0];
}

/** The token's role on its organisation's root node (0 when it reaches the root not at all). */
export async function rankOnOrganisation(db: Queryable, tokenId: string): Promise<number> {
  const { rows } = await db.query<{ rank: number }>(
    `WITH ${REACH_CTE}
     SELECT reach.rank FROM reach JOIN hive.nodes n ON n.id = reach.node_id WHERE n.parent_id IS NULL`,
    [tokenId],
  );
  return rows[0]?.rank ?? 0;
}

/** Every node in the token's reach, parents before children. */
export async function reachedNodes(db: Queryable, tokenId: string): Promise<ReachedNodeRow[]> {
  const { rows } = await db.query<ReachedNodeRow>(
    `WITH ${REACH_CTE}
     SELECT n.*, reach.rank FROM reach JOIN hive.nodes n ON n.id = reach.node_id
      ORDER BY n.name_path`,
    [tokenId],
  );
  return rows;
}

export async function insertPerson(
  db: Queryable,
  person: { id: string; orgId: string; email: string; passwordHash: string | null; guardrailAuthority: boolean; axiomAuthority: boolean },
): Promise<{ created_at: Date } | undefined> {
  const { rows } = await db.query<{ created_at: Date }>(
    `INSERT INTO hive.people (id, org_id, email, password_hash, guardrail_authority, axiom_authority)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (email) DO NOTHING RETURNING created_at`,
    [person.id, person.orgId, person.email, person.passwordHash, person.guardrailAuthority, person.axiomAuthority],
  );
  return rows[0];
}

export async function setPasswordHash(db: Queryable, personId: string, passwordHash: string): Promise<void> {
  await db.query('UPDATE hive.people SET password_hash = $2 WHERE id = $1', [personId, passwordHash]);
}

/** Raises an authority flag where `true` is passed; `false` or undefined leaves it as it is. */
export async function grantAuthority(db: Queryable, personId: string, flags: { guardrail?: boolean; axiom?: boolean }): Promise<{ guardrail_authority: boolean; axiom_authority: boolean }> {
  const { rows } = await db.query<{ guardrail_authority: boolean; axiom_authority: boolean }>(
    `UPDATE hive.people SET guardrail_authority = guardrail_authority OR $2, axiom_authority = axiom_authority OR $3
      WHERE id = $1 RETURNING guardrail_authority, axiom_authority`,
    [personId, flags.guardrail === true, flags.axiom === true],
  );
  return rows[0]!;
}

/** Sets the person's role on the node: a second grant on the same node replaces the first. */
export async function upsertRoleGrant(db: Queryable, grant: { personId: string; nodeId: string; role: Role; grantedBy: string | null }): Promise<void> {
  await db.query(
    `INSERT INTO hive.role_grants (person_id, node_id, role, granted_by) VALUES ($1, $2, $3, $4)
     ON CONFLICT (person_id, node_id) DO UPDATE SET role = EXCLUDED.role, granted_by = EXCLUDED.granted_by, granted_at = now()`,
    [grant.personId, grant.nodeId, grant.role, grant.grantedBy],
  );
}

export interface GrantRow {
  node_id: string;
  name_path: string;
  role: Role;
}

export async function grantsOfPerson(db: Queryable, personId: string): Promise<GrantRow[]> {
  const { rows } = await db.query<GrantRow>(
    `SELECT rg.node_id, n.name_path, rg.role FROM hive.role_grants rg JOIN hive.nodes n ON n.id = rg.node_id
      WHERE rg.person_id = $1 ORDER BY n.name_path`,
    [personId],
  );
  return rows;
}

export async function nodeById(db: Queryable, nodeId: string): Promise<NodeRow | undefined> {
  const { rows } = await db.query<NodeRow>('SELECT * FROM hive.nodes WHERE id = $1', [nodeId]);
  return rows[0];
}

export async function organisationName(db: Queryable, orgId: string): Promise<string> {
  const { rows } = await db.query<{ name: string }>('SELECT name FROM hive.organisations WHERE id = $1', [orgId]);
  return rows[0]!.name;
}

export async function insertDeviceCode(db: Queryable, code: { id: string; deviceCodeHash: Buffer; userCode: string; expiresAt: Date }): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO hive.device_codes (id, device_code_hash, user_code, expires_at) VALUES ($1, $2, $3, $4) ON CONFLICT (user_code) DO NOTHING`,
    [code.id, code.deviceCodeHash, code.userCode, code.expiresAt],
  );
  return rowCount === 1;
}

/** A pending device code, locked for its approval; an expired one counts as none. */
export async function pendingDeviceCodeForUpdate(db: Queryable, userCode: string): Promise<{ id: string; person_id: string | null } | undefined> {
  const { rows } = await db.query<{ id: string; person_id: string | null }>(
    `SELECT id, person_id FROM hive.device_codes WHERE user_code = $1 AND expires_at > now() FOR UPDATE`,
    [userCode],
  );
  return rows[0];
}

export async function approveDeviceCode(db: Queryable, id: string, personId: string, approvedBy: string | null): Promise<void> {
  await db.query(`UPDATE hive.device_codes SET person_id = $2, approved_by = $3, approved_at = now() WHERE id = $1`, [id, personId, approvedBy]);
}

export interface DeviceCodeRow {
  id: string;
  person_id: string | null;
  org_id: string | null;
  expired: boolean;
}

/** The device code a poll names, locked: the poll that takes the token deletes it in the same transaction. */
export async function deviceCodeByHashForUpdate(db: Queryable, hash: Buffer): Promise<DeviceCodeRow | undefined> {
  const { rows } = await db.query<DeviceCodeRow>(
    `SELECT d.id, d.person_id, p.org_id, d.expires_at <= now() AS expired
       FROM hive.device_codes d LEFT JOIN hive.people p ON p.id = d.person_id
      WHERE d.device_code_hash = $1 FOR UPDATE OF d`,
    [hash],
  );
  return rows[0];
}

export async function deleteDeviceCode(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM hive.device_codes WHERE id = $1', [id]);
}

export interface EventRow {
  id: string;
  node_id: string;
  node_path: string;
  kind: string;
  text: string;
  data: Record<string, unknown> | null;
  person_id: string | null;
  token_id: string | null;
  created_at: Date;
}

export async function insertEvent(
  db: Queryable,
  event: { id: string; node: NodeRow; kind: string; text: string; data: Record<string, unknown> | null; personId: string | null; tokenId: string },
): Promise<EventRow> {
  const { rows } = await db.query<EventRow>(
    `INSERT INTO hive.events (id, org_id, node_id, kind, text, data, person_id, token_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING id, node_id, $9::text AS node_path, kind, text, data, person_id, token_id, created_at`,
    [event.id, event.node.org_id, event.node.id, event.kind, event.text, event.data, event.personId, event.tokenId, event.node.name_path],
  );
  return rows[0]!;
}

/** Recent events of the reach, newest first; `path` narrows to a node and what lies below it. */
export async function recentEventsInReach(db: Queryable, tokenId: string, filter: { path: string | null; kinds: string[] | null; since: string | null; limit: number }): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `WITH ${REACH_CTE}
     SELECT e.id, e.node_id, n.name_path AS node_path, e.kind, e.text, e.data, e.person_id, e.token_id, e.created_at
       FROM hive.events e JOIN reach ON reach.node_id = e.node_id JOIN hive.nodes n ON n.id = e.node_id
      WHERE ($2::text IS NULL OR n.path = $2 OR starts_with(n.path, $2 || '/'))
        AND ($3::text[] IS NULL OR e.kind = ANY($3::text[]))
        AND ($4::timestamptz IS NULL OR e.created_at >= $4)
      ORDER BY e.created_at DESC, e.id DESC
      LIMIT $5`,
    [tokenId, filter.path, filter.kinds, filter.since, filter.limit],
  );
  return rows;
}
