import type { QueryResultRow } from 'pg';
import { GroupCommit } from '../db/group-commit.js';
import type { Db, Queryable } from '../db/pool.js';

/**
 * All SQL of billing: reservations on wallets and budgets, settlement with its ledger row and
 * usage record, customer prepaid wallets, and usage reports. Each statement that moves money
 * guards itself in its WHERE clause, so concurrent calls can never take a wallet below zero.
 */

export type Payer = 'developer' | 'customer';

/**
 * 'fast' commits a metering statement without waiting for its WAL flush (synchronous_commit off for
 * that transaction only). The statement stays atomic and ordered: a crash of the PostgreSQL server
 * can lose only the last few hundred milliseconds of reservations and settlements, which leaves
 * those calls uncharged (never a wallet overdrawn or a budget overshot), and a later durable
 * commit (a top-up, a grant) makes every earlier one durable too. 'durable' waits for the flush.
 */
export type CommitMode = 'durable' | 'fast';
const commitSetting = (mode: CommitMode) => (mode === 'fast' ? 'off' : 'on');

export type AuthorizeOutcome = 'ok' | 'budget_exceeded' | 'wallet_empty' | 'customer_wallet_empty' | 'stale_credentials';

export interface AuthorizeCall {
  commit: CommitMode;
  generation: number | null;
  developerId: string;
  payerAccountId: string;
  customerId: string | null;
  budgetMicros: number | null;
  amountMicros: number;
  requestId: string | null;
  ttlSeconds: number;
  eventId: string;
}

export interface AuthorizeRow {
  outcome: AuthorizeOutcome;
  hold_id: string | null;
  payer: Payer | null;
  budget_month: string | null;
}

export interface FinishCall {
  commit: CommitMode;
  holdId: string;
  /** The hold's developer: the tenant of `events` (null when there are none). */
  developerId: string | null;
  events: Array<{ id: string; type: string; data: Record<string, unknown> }>;
  settle: boolean;
  costMicros: number;
  billableMicros: number;
  model: string | null;
  tokensIn: number;
  tokensOut: number;
  requestId: string | null;
  idempotencyKey: string | null;
  lowThresholdMicros: number;
  lowEventId: string;
  emptyEventId: string;
}

export interface FinishRow {
  charged: boolean;
  deducted_micros: string;
  balance_after_micros: string | null;
}

/**
 * The credential generation check, budget reservation, wallet reservation and the hold row, in
 * one statement (billing_authorize_group, migration 014). On a pool with group commit enabled,
 * calls that arrive together share one (see enableMeteringGroups). A null generation skips the check.
 */
export function authorizeHold(q: Queryable, call: AuthorizeCall): Promise<AuthorizeRow> {
  const groups = meteringGroups.get(q);
  return groups ? groups[call.commit].authorize.submit(call) : authorizeOne(q, call);
}

/**
 * Closes the hold, and when settling charges it with its ledger row, usage record and events, in
 * one statement (billing_finish_group, migration 014; shared by the calls that arrive together
 * on a pool with group commit enabled).
 */
export function finishHold(q: Queryable, call: FinishCall): Promise<FinishRow> {
  const groups = meteringGroups.get(q);
  return groups ? groups[call.commit].finish.submit(call) : finishOne(q, call);
}

type MeteringGroups = Record<CommitMode, { authorize: GroupCommit<AuthorizeCall, AuthorizeRow>; finish: GroupCommit<FinishCall, FinishRow> }>;
const meteringGroups = new WeakMap<Queryable, MeteringGroups>();

/**
 * Turns on group commit for the metering statements run on this pool (each API and worker process
 * does, see METERING_GROUP_CONCURRENCY): up to `concurrency` statements of each kind at once, and
 * the calls that arrive meanwhile leave together in the next one (migration 014).
 */
export function enableMeteringGroups(db: Db, concurrency: number): void {
  if (concurrency < 1) return;
  const limits = { concurrency, maxGroup: MAX_GROUP };
  const groupsFor = (commit: CommitMode) => ({
    authorize: new GroupCommit<AuthorizeCall, AuthorizeRow>((calls) => (calls.length === 1 ? authorizeOne(db, calls[0]!).then((row) => [row]) : authorizeGroup(db, commit, calls)), limits),
    finish: new GroupCommit<FinishCall, FinishRow>((calls) => (calls.length === 1 ? finishOne(db, calls[0]!).then((row) => [row]) : finishGroup(db, commit, calls)), limits),
  });
  meteringGroups.set(db, { fast: groupsFor('fast'), durable: groupsFor('durable') });
}

/** How the metering statements of a pool have run so far (undefined when it has no group commit). */
export function meteringGroupStats(db: Db): Record<'authorize' | 'finish', GroupCommit<unknown, unknown>['stats']> | undefined {
  const groups = meteringGroups.get(db);
  if (!groups) return undefined;
  const sum = (kind: 'authorize' | 'finish') => {
    const [fast, durable] = [groups.fast[kind].stats, groups.durable[kind].stats];
    return { statements: fast.statements + durable.statements, groupedCalls: fast.groupedCalls + durable.groupedCalls, refusedGroups: fast.refusedGroups + durable.refusedGroups };
  };
  return { authorize: sum('authorize'), finish: sum('finish') };
}

/** Calls in one group statement: a few hundred keeps its JSON small and its locks brief. */
const MAX_GROUP = 200;

/** A call alone runs the per-call function (migrations 009 and 013): cheaper than a group of one. */
async function authorizeOne(q: Queryable, call: AuthorizeCall): Promise<AuthorizeRow> {
  // set_config(..., true) lasts until this statement's own transaction commits, so it decides how that commit waits.
  const { rows } = await q.query<AuthorizeRow>({
    name: 'billing-authorize-one',
    text: `SELECT outcome, hold_id, payer, budget_month::text AS budget_month, set_config('synchronous_commit', $10, true)
     FROM billing_authorize_current($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    values: [call.generation, call.developerId, call.payerAccountId, call.customerId, call.budgetMicros, call.amountMicros, call.requestId, call.ttlSeconds, call.eventId, commitSetting(call.commit)],
  });
  return rows[0]!;
}

async function finishOne(q: Queryable, finish: FinishCall): Promise<FinishRow> {
  // The call's own events (e.g. chat.completion.finished) commit with its charge, and only when it
  // charged: a settlement repeated under the same idempotency key records nothing twice.
  const { rows } = await q.query<FinishRow>({
    name: 'billing-finish-one',
    text: `WITH finished AS MATERIALIZED (
       SELECT charged, deducted_micros, balance_after_micros, set_config('synchronous_commit', $13, true)
       FROM billing_finish($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ), recorded AS (
       INSERT INTO outbox_events (id, developer_id, type, data)
       SELECT event.id, $14::uuid, event.type, event.data
       FROM finished, jsonb_to_recordset($15::jsonb) AS event (id text, type text, data jsonb)
       WHERE finished.charged
     )
     SELECT charged, deducted_micros, balance_after_micros FROM finished`,
    values: [
      finish.holdId,
      finish.settle,
      finish.costMicros,
      finish.billableMicros,
      finish.model,
      finish.tokensIn,
      finish.tokensOut,
      finish.requestId,
      finish.idempotencyKey,
      finish.lowThresholdMicros,
      finish.lowEventId,
      finish.emptyEventId,
      commitSetting(finish.commit),
      finish.developerId,
      JSON.stringify(finish.events),
    ],
  });
  return rows[0]!;
}

/** Calls that arrived together, in one statement (migration 014); one row per call, in order. */
export function authorizeGroup(q: Queryable, commit: CommitMode, calls: AuthorizeCall[]): Promise<AuthorizeRow[]> {
  const entries = calls.map((call) => ({
    generation: call.generation,
    developer: call.developerId,
    payer_account: call.payerAccountId,
    customer: call.customerId,
    budget_micros: call.budgetMicros,
    amount: call.amountMicros,
    request_id: call.requestId,
    ttl_seconds: call.ttlSeconds,
    event_id: call.eventId,
  }));
  return groupStatement<AuthorizeRow>(q, 'billing_authorize_group', 'outcome, hold_id, payer, budget_month::text AS budget_month', commit, entries);
}

/** Settlements and releases that arrived together, in one statement (migration 014); one row per call, in order. */
export function finishGroup(q: Queryable, commit: CommitMode, calls: FinishCall[]): Promise<FinishRow[]> {
  const entries = calls.map((call) => ({
    hold: call.holdId,
    settle: call.settle,
    cost: call.costMicros,
    billable: call.billableMicros,
    model: call.model,
    tokens_in: call.tokensIn,
    tokens_out: call.tokensOut,
    request_id: call.requestId,
    idempotency_key: call.idempotencyKey,
    low_micros: call.lowThresholdMicros,
    low_event_id: call.lowEventId,
    empty_event_id: call.emptyEventId,
    developer: call.developerId,
    events: call.events,
  }));
  return groupStatement<FinishRow>(q, 'billing_finish_group', 'charged, deducted_micros, balance_after_micros', commit, entries);
}

/**
 * One group function of migration 014, as a prepared statement: the calls go as a JSON array,
 * each with its ordinal, and one row comes back per call, in their order.
 */
async function groupStatement<Row extends QueryResultRow>(
  q: Queryable,
  fn: 'billing_authorize_group' | 'billing_finish_group',
  columns: string,
  commit: CommitMode,
  calls: object[],
): Promise<Row[]> {
  const { rows } = await q.query<Row>({
    name: fn,
    text: `SELECT ${columns}, set_config('synchronous_commit', $2, true) FROM ${fn}($1::jsonb) ORDER BY ordinal`,
    values: [JSON.stringify(calls.map((call, ordinal) => ({ ordinal, ...call }))), commitSetting(commit)],
  });
  return rows;
}

export interface OpenGrantCall {
  generation: number;
  developerId: string;
  payerAccountId: string;
  customerId: string | null;
  desiredMicros: number;
  minimumMicros: number;
  /** The grant takes at most 1/share of the wallet's available balance. */
  share: number;
  ttlSeconds: number;
  eventId: string;
}

export interface OpenGrantRow {
  outcome: AuthorizeOutcome | 'too_small';
  hold_id: string | null;
  payer: Payer | null;
  amount_micros: string | null;
  balance_micros: string | null;
}

/** A quota grant: one hold worth many calls of one payer (billing_grant_open, migration 016). */
export async function openGrant(q: Queryable, call: OpenGrantCall): Promise<OpenGrantRow> {
  const { rows } = await q.query<OpenGrantRow>({
    name: 'billing-grant-open',
    text: `SELECT outcome, hold_id, payer, amount_micros::text, balance_micros::text FROM billing_grant_open($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    values: [call.generation, call.developerId, call.payerAccountId, call.customerId, call.desiredMicros, call.minimumMicros, call.share, call.ttlSeconds, call.eventId],
  });
  return rows[0]!;
}

export interface GrantEntry {
  seq: number;
  customer: string | null;
  cost: number;
  billable: number;
  model: string;
  tokens_in: number;
  tokens_out: number;
  request_id: string | null;
  events: Array<{ id: string; type: string; data: Record<string, unknown> }>;
}

export interface ChargeGrantRow {
  charged_micros: string;
  balance_after_micros: string | null;
  current: boolean;
}

/** Charges calls settled under a grant, each with its usage record and ledger row (billing_grant_charge, migration 016). */
export async function chargeGrant(
  q: Queryable,
  charge: { commit: CommitMode; holdId: string; generation: number; entries: GrantEntry[]; lowThresholdMicros: number; lowEventId: string },
): Promise<ChargeGrantRow> {
  const { rows } = await q.query<ChargeGrantRow>({
    name: 'billing-grant-charge',
    text: `SELECT charged_micros::text, balance_after_micros::text, current, set_config('synchronous_commit', $6, true) FROM billing_grant_charge($1, $2, $3, $4, $5)`,
    values: [charge.holdId, charge.generation, JSON.stringify(charge.entries), charge.lowThresholdMicros, charge.lowEventId, commitSetting(charge.commit)],
  });
  return rows[0] ?? { charged_micros: '0', balance_after_micros: null, current: false };
}

/** Holds whose call never settled (the API process died mid-call), oldest first. */
export async function expiredHoldIds(q: Queryable, limit: number): Promise<string[]> {
  const { rows } = await q.query<{ id: string }>(
    `SELECT id FROM billing_holds WHERE status = 'held' AND expires_at < now() ORDER BY expires_at LIMIT $1`,
    [limit],
  );
  return rows.map((row) => row.id);
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
