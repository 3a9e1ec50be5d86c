import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';

/**
 * All SQL of the client-token registry. Only this row is stored, never the token. Every query
 * that a developer drives is filtered by developer and customer, so another tenant's jti is
 * simply not found.
 */

export interface ClientTokenRow {
  jti: string;
  developer_id: string;
  customer_id: string;
  scope: string[];
  rpm_limit: number;
  origin_allowlist: string[];
  ip_hash: Buffer | null;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

const COLUMNS = 'jti, developer_id, customer_id, scope, rpm_limit, origin_allowlist, ip_hash, created_at, expires_at, revoked_at';

export async function insertClientToken(q: Queryable, token: Omit<ClientTokenRow, 'created_at' | 'revoked_at'>): Promise<ClientTokenRow> {
  const { rows } = await q.query<ClientTokenRow>(
    `INSERT INTO client_tokens (jti, developer_id, customer_id, scope, rpm_limit, origin_allowlist, ip_hash, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING ${COLUMNS}`,
    [token.jti, token.developer_id, token.customer_id, token.scope, token.rpm_limit, token.origin_allowlist, token.ip_hash, token.expires_at],
  );
  return rows[0]!;
}

/** The registry row a presented token names, with whether its developer account is still open. */
export async function findClientTokenForVerification(q: Queryable, jti: string): Promise<(ClientTokenRow & { account_active: boolean }) | undefined> {
  const { rows } = await q.query<ClientTokenRow & { account_active: boolean }>(
    `SELECT t.jti, t.developer_id, t.customer_id, t.scope, t.rpm_limit, t.origin_allowlist, t.ip_hash, t.created_at, t.expires_at, t.revoked_at,
            a.status = 'active' AS account_active
     FROM client_tokens t JOIN accounts a ON a.id = t.developer_id
     WHERE t.jti = $1`,
    [jti],
  );
  return rows[0];
}

/** Active = not revoked and not expired, in creation order, seeking past the cursor's row. */
export async function listActiveClientTokens(
  q: Queryable,
  developerId: string,
  customerId: string,
  page: { limit: number; after: CursorPosition | undefined },
): Promise<ClientTokenRow[]> {
  const { rows } = await q.query<ClientTokenRow>(
    `SELECT ${COLUMNS} FROM client_tokens
     WHERE developer_id = $1 AND customer_id = $2 AND revoked_at IS NULL AND expires_at > now()
       AND ($3::text IS NULL OR (created_at, jti) > (SELECT c.created_at, c.jti FROM client_tokens c WHERE c.customer_id = $2 AND c.jti = $3))
     ORDER BY created_at, jti
     LIMIT $4`,
    [developerId, customerId, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

/** Whether the token exists under this developer and customer; revoking twice keeps the first time. */
export async function revokeClientToken(q: Queryable, developerId: string, customerId: string, jti: string): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE client_tokens SET revoked_at = coalesce(revoked_at, now())
     WHERE developer_id = $1 AND customer_id = $2 AND jti = $3`,
    [developerId, customerId, jti],
  );
  return rowCount === 1;
}

/** Revokes the customer's active tokens; already revoked or expired ones are left alone and not counted. */
export async function revokeAllClientTokens(q: Queryable, developerId: string, customerId: string): Promise<number> {
  const { rowCount } = await q.query(
    `UPDATE client_tokens SET revoked_at = now()
     WHERE developer_id = $1 AND customer_id = $2 AND revoked_at IS NULL AND expires_at > now()`,
    [developerId, customerId],
  );
  return rowCount ?? 0;
}

/** Deletes registry rows of tokens that expired before `before`; a token past its exp never verifies anyway. */
export async function deleteExpiredClientTokens(q: Queryable, before: Date): Promise<number> {
  const { rowCount } = await q.query('DELETE FROM client_tokens WHERE expires_at < $1', [before]);
  return rowCount ?? 0;
}
