import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';

/** All SQL of customers. Every query is filtered by developer: another developer's id is simply not found. */

export interface CustomerRow {
  id: string;
  developer_id: string;
  external_id: string | null;
  monthly_budget_micros: string | null;
  rpm_limit: number | null;
  tpm_limit: number | null;
  default_billable_markup_pct: string | null;
  default_billable_amount_micros: string | null;
  lazy_create_customers: boolean;
  metadata: Record<string, string>;
  status: 'active' | 'archived';
  created_on_first_use: boolean;
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

export interface CustomerValues {
  external_id?: string | null;
  monthly_budget_micros?: number | null;
  rpm_limit?: number | null;
  tpm_limit?: number | null;
  default_billable_markup_pct?: number | null;
  default_billable_amount_micros?: number | null;
  lazy_create_customers?: boolean;
  metadata?: Record<string, string>;
}

const COLUMNS = `id, developer_id, external_id, monthly_budget_micros, rpm_limit, tpm_limit, default_billable_markup_pct,
  default_billable_amount_micros, lazy_create_customers, metadata, status, created_on_first_use, created_at, updated_at, archived_at`;

const SETTABLE = [
  'external_id',
  'monthly_budget_micros',
  'rpm_limit',
  'tpm_limit',
  'default_billable_markup_pct',
  'default_billable_amount_micros',
  'lazy_create_customers',
  'metadata',
] as const;

export async function insertCustomer(q: Queryable, developerId: string, id: string, values: CustomerValues, createdOnFirstUse: boolean): Promise<CustomerRow | undefined> {
  const columns = SETTABLE.filter((column) => values[column] !== undefined);
  const params: unknown[] = [id, developerId, createdOnFirstUse, ...columns.map((column) => encode(column, values[column]))];
  const { rows } = await q.query<CustomerRow>(
    `INSERT INTO customers (id, developer_id, created_on_first_use${columns.map((c) => `, ${c}`).join('')})
     VALUES ($1, $2, $3${columns.map((_, i) => `, $${i + 4}`).join('')})
     ON CONFLICT (developer_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
     RETURNING ${COLUMNS}`,
    params,
  );
  return rows[0];
}

export async function updateCustomer(q: Queryable, developerId: string, id: string, values: CustomerValues): Promise<CustomerRow | undefined> {
  const columns = SETTABLE.filter((column) => values[column] !== undefined);
  const { rows } = await q.query<CustomerRow>(
    `UPDATE customers SET ${columns.map((column, i) => `${column} = $${i + 3}`).join(', ')}, updated_at = now()
     WHERE developer_id = $1 AND id = $2
     RETURNING ${COLUMNS}`,
    [developerId, id, ...columns.map((column) => encode(column, values[column]))],
  );
  return rows[0];
}

export async function archiveCustomer(q: Queryable, developerId: string, id: string): Promise<CustomerRow | undefined> {
  const { rows } = await q.query<CustomerRow>(
    `UPDATE customers SET status = 'archived', archived_at = now(), updated_at = now()
     WHERE developer_id = $1 AND id = $2 AND status = 'active'
     RETURNING ${COLUMNS}`,
    [developerId, id],
  );
  return rows[0];
}

export async function findCustomerById(q: Queryable, developerId: string, id: string): Promise<CustomerRow | undefined> {
  const { rows } = await q.query<CustomerRow>({ name: 'customer-by-id', text: `SELECT ${COLUMNS} FROM customers WHERE developer_id = $1 AND id = $2`, values: [developerId, id] });
  return rows[0];
}

export async function findCustomerByExternalId(q: Queryable, developerId: string, externalId: string): Promise<CustomerRow | undefined> {
  const { rows } = await q.query<CustomerRow>({ name: 'customer-by-external-id', text: `SELECT ${COLUMNS} FROM customers WHERE developer_id = $1 AND external_id = $2`, values: [developerId, externalId] });
  return rows[0];
}

export async function listCustomers(
  q: Queryable,
  developerId: string,
  page: { limit: number; after: CursorPosition | undefined },
  status: 'active' | 'archived' | undefined,
): Promise<CustomerRow[]> {
  const { rows } = await q.query<CustomerRow>(
    `SELECT ${COLUMNS} FROM customers
     WHERE developer_id = $1
       AND ($2::text IS NULL OR status = $2)
       AND ($3::text IS NULL OR (created_at, id) > (SELECT c.created_at, c.id FROM customers c WHERE c.developer_id = $1 AND c.id = $3))
     ORDER BY created_at, id
     LIMIT $4`,
    [developerId, status ?? null, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

export async function developerAllowsLazyCreation(q: Queryable, developerId: string): Promise<boolean> {
  const { rows } = await q.query<{ lazy_create_customers: boolean }>('SELECT lazy_create_customers FROM accounts WHERE id = $1', [developerId]);
  return rows[0]?.lazy_create_customers ?? false;
}

function encode(column: (typeof SETTABLE)[number], value: unknown): unknown {
  return column === 'metadata' ? JSON.stringify(value) : value;
}
