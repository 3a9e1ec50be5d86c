import type { Queryable } from '../db/pool.js';

/**
 * All SQL of billing: reservations on wallets and budgets, settlement with its ledger row and
 * usage record, customer prepaid wallets, and usage reports. Each statement that moves money
 * guards itself in its WHERE clause, so concurrent calls can never take a wallet below zero.
 */

export type Payer = 'developer' | 'customer';

export interface HoldRow {
  id: string;
  developer_id: string;
  customer_id: string | null;
  payer: Payer;
  amount_micros: string;
  budget_month: string | null;
  request_id: string | null;
  status: 'held' | 'settled' | 'released';
}

const HOLD_COLUMNS = 'id, developer_id, customer_id, payer, amount_micros, budget_month::text AS budget_month, request_id, status';

/** Whether a customer has a prepaid wallet; such a customer pays for its own calls. */
export async function customerWalletExists(q: Queryable, customerId: string): Promise<boolean> {
  const { rowCount } = await q.query('SELECT 1 FROM customer_wallets WHERE customer_id = $1', [customerId]);
  return rowCount === 1;
}

/** Reserves on the paying wallet if its available balance covers the amount; false if not. */
export async function reserveOnWallet(q: Queryable, payer: Payer, ownerId: string, amountMicros: number): Promise<boolean> {
  const table = payer === 'developer' ? 'wallets' : 'customer_wallets';
  const owner = payer === 'developer' ? 'account_id' : 'customer_id';
  const { rowCount } = await q.query(
    `UPDATE ${table} SET reserved_micros = reserved_micros + $2, updated_at = now()
     WHERE ${owner} = $1 AND balance_micros - reserved_micros >= $2`,
    [ownerId, amountMicros],
  );
  return rowCount === 1;
}

/**
 * Reserves against the customer's budget of the current UTC month. Refused once spent plus
 * everything in flight plus this call would pass the budget.
 */
export async function reserveOnBudget(q: Queryable, customerId: string, budgetMicros: number, amountMicros: number): Promise<{ reserved: boolean; month: string }> {
  const { rows } = await q.query<{ month: string; reserved: boolean }>(
    `WITH this_month AS (SELECT date_trunc('month', now() AT TIME ZONE 'UTC')::date AS month),
     ensured AS (
       INSERT INTO customer_budget_months (customer_id, month) SELECT $1, month FROM this_month
       ON CONFLICT (customer_id, month) DO NOTHING)
     SELECT month::text AS month, false AS reserved FROM this_month`,
    [customerId],
  );
  const month = rows[0]!.month;
  const { rowCount } = await q.query(
    `UPDATE customer_budget_months SET reserved_micros = reserved_micros + $3
     WHERE customer_id = $1 AND month = $2::date AND spent_micros + reserved_micros + $3 <= $4
       AND spent_micros < $4`,
    [customerId, month, amountMicros, budgetMicros],
  );
  return { reserved: rowCount === 1, month };
}

/** True the first time a customer's budget is reported exceeded this month, so the event fires once. */
export async function markBudgetExceededNotified(q: Queryable, customerId: string, month: string): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE customer_budget_months SET exceeded_notified = true WHERE customer_id = $1 AND month = $2::date AND NOT exceeded_notified`,
    [customerId, month],
  );
  return rowCount === 1;
}

export async function insertHold(
  q: Queryable,
  hold: { developerId: string; customerId: string | null; payer: Payer; amountMicros: number; budgetMonth: string | null; requestId: string | null; ttlSeconds: number },
): Promise<HoldRow> {
  const { rows } = await q.query<HoldRow>(
    `INSERT INTO billing_holds (developer_id, customer_id, payer, amount_micros, budget_month, request_id, expires_at)
     VALUES ($1, $2, $3, $4, $5::date, $6, now() + make_interval(secs => $7))
     RETURNING ${HOLD_COLUMNS}`,
    [hold.developerId, hold.customerId, hold.payer, hold.amountMicros, hold.budgetMonth, hold.requestId, hold.ttlSeconds],
  );
  return rows[0]!;
}

/** Closes an open hold exactly once; undefined if it was already settled or released. */
export async function finishHold(q: Queryable, holdId: string, status: 'settled' | 'released'): Promise<HoldRow | undefined> {
  const { rows } = await q.query<HoldRow>(
    `UPDATE billing_holds SET status = $2, finished_at = now() WHERE id = $1 AND status = 'held' RETURNING ${HOLD_COLUMNS}`,
    [holdId, status],
  );
  return rows[0];
}

/**
 * Gives back a reservation and charges the actual cost on the paying wallet, writing the ledger
 * row in the same statement. Returns the balance before and after, for threshold events.
 */
export async function chargeWallet(
  q: Queryable,
  payer: Payer,
  ownerId: string,
  reservedMicros: number,
  costMicros: number,
  reference: string | null,
): Promise<{ before: number; after: number }> {
  const [table, owner, ledger] =
    payer === 'developer' ? ['wallets', 'account_id', 'wallet_ledger'] : ['customer_wallets', 'customer_id', 'customer_wallet_ledger'];
  const { rows } = await q.query<{ before: string; after: string }>(
    `WITH moved AS (
       UPDATE ${table} SET reserved_micros = reserved_micros - $2, balance_micros = balance_micros - $3, updated_at = now()
       WHERE ${owner} = $1
       RETURNING ${owner} AS owner, balance_micros),
     entry AS (
       INSERT INTO ${ledger} (${owner}, amount_micros, balance_after_micros, kind, reference)
       SELECT owner, -$3::bigint, balance_micros, 'usage', $4 FROM moved WHERE $3::bigint > 0)
     SELECT (balance_micros + $3)::text AS before, balance_micros::text AS after FROM moved`,
    [ownerId, reservedMicros, costMicros, reference],
  );
  if (!rows[0]) throw new Error(`no ${payer} wallet for ${ownerId}`);
  return { before: Number(rows[0].before), after: Number(rows[0].after) };
}

export async function settleBudget(q: Queryable, customerId: string, month: string, reservedMicros: number, costMicros: number): Promise<void> {
  await q.query(
    `UPDATE customer_budget_months SET reserved_micros = reserved_micros - $3, spent_micros = spent_micros + $4
     WHERE customer_id = $1 AND month = $2::date`,
    [customerId, month, reservedMicros, costMicros],
  );
}

export async function insertUsageRecord(
  q: Queryable,
  usage: {
    developerId: string;
    customerId: string | null;
    holdId: string | null;
    requestId: string | null;
    idempotencyKey: string | null;
    model: string;
    tokensIn: number;
    tokensOut: number;
    costMicros: number;
    billableMicros: number;
  },
): Promise<boolean> {
  const { rowCount } = await q.query(
    `INSERT INTO usage_records (developer_id, customer_id, hold_id, request_id, idempotency_key, model, tokens_in, tokens_out, cost_micros, billable_micros)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (developer_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`,
    [usage.developerId, usage.customerId, usage.holdId, usage.requestId, usage.idempotencyKey, usage.model, usage.tokensIn, usage.tokensOut, usage.costMicros, usage.billableMicros],
  );
  return rowCount === 1;
}

export interface CustomerWalletRow {
  customer_id: string;
  balance_micros: string;
  reserved_micros: string;
}

export async function findCustomerWallet(q: Queryable, customerId: string): Promise<CustomerWalletRow | undefined> {
  const { rows } = await q.query<CustomerWalletRow>('SELECT customer_id, balance_micros, reserved_micros FROM customer_wallets WHERE customer_id = $1', [customerId]);
  return rows[0];
}

/**
 * Moves money between a developer wallet and one of its customers' prepaid wallets, both ledger rows
 * in one statement. Positive amounts fund the customer; negative ones give back. Returns undefined
 * when the giving side's available balance cannot cover it.
 */
export async function transferToCustomer(q: Queryable, developerId: string, customerId: string, amountMicros: number, kind: string): Promise<CustomerWalletRow | undefined> {
  await q.query(
    `INSERT INTO customer_wallets (customer_id, developer_id) VALUES ($1, $2) ON CONFLICT (customer_id) DO NOTHING`,
    [customerId, developerId],
  );
  const { rows } = await q.query<CustomerWalletRow>(
    `WITH developer AS (
       UPDATE wallets SET balance_micros = balance_micros - $3, updated_at = now()
       WHERE account_id = $1 AND balance_micros - reserved_micros >= $3
       RETURNING account_id, balance_micros),
     customer AS (
       UPDATE customer_wallets SET balance_micros = balance_micros + $3, updated_at = now()
       WHERE customer_id = $2 AND developer_id = $1 AND balance_micros - reserved_micros >= -$3 AND EXISTS (SELECT 1 FROM developer)
       RETURNING customer_id, balance_micros, reserved_micros),
     developer_entry AS (
       INSERT INTO wallet_ledger (account_id, amount_micros, balance_after_micros, kind, reference)
       SELECT account_id, -$3::bigint, balance_micros, $4, $2 FROM developer WHERE EXISTS (SELECT 1 FROM customer)),
     customer_entry AS (
       INSERT INTO customer_wallet_ledger (customer_id, amount_micros, balance_after_micros, kind)
       SELECT customer_id, $3, balance_micros, $4 FROM customer)
     SELECT customer_id, balance_micros::text, reserved_micros::text FROM customer`,
    [developerId, customerId, amountMicros, kind],
  );
  return rows[0];
}

export interface UsageGroupRow {
  bucket: string;
  requests: string;
  tokens_in: string;
  tokens_out: string;
  cost_micros: string;
  billable_micros: string;
}

export async function usageTotals(
  q: Queryable,
  filter: { developerId: string; customerId: string | null; from: Date; to: Date; groupBy: 'day' | 'model' },
): Promise<UsageGroupRow[]> {
  const bucket = filter.groupBy === 'day' ? `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')` : 'model';
  const { rows } = await q.query<UsageGroupRow>(
    `SELECT ${bucket} AS bucket, count(*)::text AS requests, sum(tokens_in)::text AS tokens_in, sum(tokens_out)::text AS tokens_out,
            sum(cost_micros)::text AS cost_micros, sum(billable_micros)::text AS billable_micros
     FROM usage_records
     WHERE developer_id = $1 AND ($2::text IS NULL OR customer_id = $2) AND created_at >= $3 AND created_at < $4
     GROUP BY 1 ORDER BY 1`,
    [filter.developerId, filter.customerId, filter.from, filter.to],
  );
  return rows;
}
