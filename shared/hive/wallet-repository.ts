import pg from 'pg';
import { GroupCommit } from '../db/group-commit.js';
import type { Db, Queryable } from '../db/pool.js';

/**
 * All SQL of the hive's wallet (migration 030): balances, their ledger, and card top-ups. Each
 * statement that moves money guards itself in its WHERE clause and writes its ledger row in the
 * same statement, so concurrent requests can never take a balance below zero or lose a row.
 */

export type LedgerKind = 'signup_credit' | 'topup' | 'refund' | 'remember' | 'recall' | 'embedding';
export type UsageKind = Extract<LedgerKind, 'remember' | 'recall' | 'embedding'>;

export interface LedgerRow {
  kind: LedgerKind;
  amount_micros: string;
  reference: string | null;
  created_at: Date;
}

/** A new organisation's wallet with its starting credit (and the ledger row of that credit). */
export async function openWallet(db: Queryable, orgId: string, creditMicros: number): Promise<void> {
  await db.query(
    `WITH opened AS (
       INSERT INTO hive.wallets (org_id, balance_micros) VALUES ($1, $2) RETURNING org_id, balance_micros
     )
     INSERT INTO hive.wallet_ledger (org_id, amount_micros, balance_after_micros, kind, reference)
     SELECT org_id, balance_micros, balance_micros, 'signup_credit', NULL FROM opened WHERE balance_micros > 0`,
    [orgId, creditMicros],
  );
}

/** The balance; null for an organisation without a wallet (treated as empty). */
export async function walletBalance(db: Queryable, orgId: string): Promise<bigint | null> {
  const { rows } = await db.query<{ balance_micros: string }>({ name: 'hive-wallet-balance', text: 'SELECT balance_micros FROM hive.wallets WHERE org_id = $1', values: [orgId] });
  return rows[0] ? BigInt(rows[0].balance_micros) : null;
}

/** The most recent ledger rows, newest first. */
export async function recentLedger(db: Queryable, orgId: string, limit: number): Promise<LedgerRow[]> {
  const { rows } = await db.query<LedgerRow>(
    'SELECT kind, amount_micros, reference, created_at FROM hive.wallet_ledger WHERE org_id = $1 ORDER BY id DESC LIMIT $2',
    [orgId, limit],
  );
  return rows;
}

export interface DebitCall {
  orgId: string;
  amountMicros: number;
  kind: UsageKind;
  reference: string | null;
}

export interface Debited {
  charged: bigint;
  balanceAfter: bigint;
}

/**
 * Takes up to `amountMicros` from a wallet that is not empty, with its ledger row. The last debit
 * of a wallet takes what is left, so the balance lands on zero, never below. Undefined when
 * nothing was taken (the wallet empty or missing).
 *
 * On a pool, concurrent debits share one statement (a group commit, see enableDebitGroups), so a
 * busy organisation's wallet row is locked once per group, for that statement only, rather than
 * once per call. Inside a transaction (a client) the debit is one statement of that transaction
 * and its row stays locked until the commit.
 */
export function debitWallet(db: Queryable, debit: DebitCall): Promise<Debited | undefined> {
  const group = debitGroupOf(db);
  return group ? group.submit(debit) : debitOne(db, debit);
}

/** Calls in one group statement: a few hundred keeps its JSON small and its locks brief (as the gateway's). */
const MAX_DEBIT_GROUP = 200;
/** Concurrency of a pool's group when its process did not set one (METERING_GROUP_CONCURRENCY's default). */
const DEFAULT_DEBIT_CONCURRENCY = 1;
/** Each pool's group commit of debits; null: turned off (single statements). */
const debitGroups = new WeakMap<Queryable, GroupCommit<DebitCall, Debited | undefined> | null>();

/**
 * Group commit for the wallet debits run on this pool (the hive's composition root does, with
 * METERING_GROUP_CONCURRENCY): up to `concurrency` debit statements at once, and the debits that
 * arrive meanwhile leave together in the next one. 0 turns it off. A pool no process set up (the
 * worker's, which charges embeddings) gets one lazily at the default concurrency on its first debit.
 */
export function enableDebitGroups(db: Db, concurrency: number): void {
  debitGroups.set(db, concurrency < 1 ? null : newDebitGroup(db, concurrency));
}

/** How the debits of a pool have run so far (undefined when they are not grouped). */
export function debitGroupStats(db: Db): GroupCommit<unknown, unknown>['stats'] | undefined {
  return debitGroups.get(db)?.stats;
}

function newDebitGroup(db: Db, concurrency: number): GroupCommit<DebitCall, Debited | undefined> {
  return new GroupCommit<DebitCall, Debited | undefined>(
    (calls) => (calls.length === 1 ? debitOne(db, calls[0]!).then((row) => [row]) : debitWalletGroup(db, calls)),
    { concurrency, maxGroup: MAX_DEBIT_GROUP },
  );
}

function debitGroupOf(db: Queryable): GroupCommit<DebitCall, Debited | undefined> | undefined {
  // Only a pool: calls on a transaction's client belong to that transaction.
  if (!(db instanceof pg.Pool)) return undefined;
  let group = debitGroups.get(db);
  if (group === undefined) {
    group = newDebitGroup(db, DEFAULT_DEBIT_CONCURRENCY);
    debitGroups.set(db, group);
  }
  return group ?? undefined;
}

/** One debit, one statement: the row is locked only for it (or, inside a transaction, until it commits). */
async function debitOne(db: Queryable, debit: DebitCall): Promise<Debited | undefined> {
  // FOR UPDATE reads the row as it stands after any concurrent debit it waited for, so LEAST() is
  // computed from the balance the UPDATE changes.
  const { rows } = await db.query<{ charged: string; balance_micros: string }>({
    name: 'hive-wallet-debit-one',
    text: `WITH wallet AS (
       SELECT org_id, balance_micros FROM hive.wallets WHERE org_id = $1 AND balance_micros > 0 FOR UPDATE
     ), debited AS (
       UPDATE hive.wallets w SET balance_micros = w.balance_micros - LEAST(wallet.balance_micros, $2), updated_at = now()
         FROM wallet WHERE w.org_id = wallet.org_id
       RETURNING w.org_id, w.balance_micros, LEAST(wallet.balance_micros, $2) AS charged
     ), entry AS (
       INSERT INTO hive.wallet_ledger (org_id, amount_micros, balance_after_micros, kind, reference)
       SELECT org_id, -charged, balance_micros, $3, $4 FROM debited WHERE charged > 0
     )
     SELECT charged, balance_micros FROM debited`,
    values: [debit.orgId, debit.amountMicros, debit.kind, debit.reference],
  });
  const row = rows[0];
  return row && BigInt(row.charged) > 0n ? { charged: BigInt(row.charged), balanceAfter: BigInt(row.balance_micros) } : undefined;
}

/**
 * Debits that arrived together, in one statement; one result per call, in their order. Each
 * wallet is locked once (in org_id order, so two groups never deadlock), debited once by what the
 * group takes from it, and given one ledger row per call that took something. Within a wallet the
 * calls are charged in order, exactly as that many single debits one after another: call i takes
 * least(its amount, what the calls before it left), and its ledger row's balance_after is the
 * balance right after it, so a wallet never goes below zero and its ledger still sums to its balance.
 */
export async function debitWalletGroup(db: Queryable, calls: DebitCall[]): Promise<Array<Debited | undefined>> {
  const entries = calls.map((call, ordinal) => ({ ordinal, org_id: call.orgId, amount: call.amountMicros, kind: call.kind, reference: call.reference }));
  const { rows } = await db.query<{ ordinal: number; charged: string | null; balance_after: string | null }>({
    name: 'hive-wallet-debit-group',
    // FOR UPDATE reads each row as it stands after any concurrent debit it waited for; the window
    // sums what the calls before each one asked of the same wallet.
    text: `WITH calls AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS c (ordinal int, org_id text, amount bigint, kind text, reference text)
     ), wallet AS (
       SELECT org_id, balance_micros FROM hive.wallets
        WHERE org_id IN (SELECT org_id FROM calls) AND balance_micros > 0
        ORDER BY org_id FOR UPDATE
     ), asked AS (
       SELECT c.ordinal, c.org_id, c.amount, c.kind, c.reference, wallet.balance_micros,
              coalesce(sum(c.amount) OVER (PARTITION BY c.org_id ORDER BY c.ordinal ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS asked_before
         FROM calls c JOIN wallet ON wallet.org_id = c.org_id
     ), charged AS (
       SELECT ordinal, org_id, kind, reference,
              LEAST(amount, GREATEST(balance_micros - asked_before, 0))::bigint AS charged,
              GREATEST(balance_micros - asked_before - amount, 0)::bigint AS balance_after
         FROM asked
     ), debited AS (
       UPDATE hive.wallets w SET balance_micros = w.balance_micros - taken.total, updated_at = now()
         FROM (SELECT org_id, sum(charged)::bigint AS total FROM charged GROUP BY org_id) taken
        WHERE w.org_id = taken.org_id AND taken.total > 0
     ), entry AS (
       INSERT INTO hive.wallet_ledger (org_id, amount_micros, balance_after_micros, kind, reference)
       SELECT org_id, -charged, balance_after, kind, reference FROM charged WHERE charged > 0 ORDER BY ordinal
     )
     SELECT c.ordinal, charged.charged, charged.balance_after FROM calls c LEFT JOIN charged ON charged.ordinal = c.ordinal ORDER BY c.ordinal`,
    values: [JSON.stringify(entries)],
  });
  return rows.map((row) => (row.charged !== null && BigInt(row.charged) > 0n ? { charged: BigInt(row.charged), balanceAfter: BigInt(row.balance_after!) } : undefined));
}

/** Adds to a wallet with its ledger row; the unique payment index refuses a second row of one reference (23505). */
export async function creditWallet(db: Queryable, credit: { orgId: string; amountMicros: bigint; kind: 'topup'; reference: string }): Promise<bigint> {
  const { rows } = await db.query<{ balance_micros: string }>(
    `WITH credited AS (
       INSERT INTO hive.wallets AS w (org_id, balance_micros) VALUES ($1, $2)
       ON CONFLICT (org_id) DO UPDATE SET balance_micros = w.balance_micros + EXCLUDED.balance_micros, updated_at = now()
       RETURNING org_id, balance_micros
     ), entry AS (
       INSERT INTO hive.wallet_ledger (org_id, amount_micros, balance_after_micros, kind, reference)
       SELECT org_id, $2, balance_micros, $3, $4 FROM credited
     )
     SELECT balance_micros FROM credited`,
    [credit.orgId, credit.amountMicros.toString(), credit.kind, credit.reference],
  );
  return BigInt(rows[0]!.balance_micros);
}

/** Takes back up to `amountMicros` (what is left, at most), with its ledger row; the amount taken. */
export async function takeBack(db: Queryable, take: { orgId: string; amountMicros: bigint; kind: 'refund'; reference: string }): Promise<bigint> {
  const { rows } = await db.query<{ taken: string }>(
    `WITH wallet AS (
       SELECT org_id, balance_micros FROM hive.wallets WHERE org_id = $1 FOR UPDATE
     ), taken AS (
       UPDATE hive.wallets w SET balance_micros = w.balance_micros - LEAST(wallet.balance_micros, $2::bigint), updated_at = now()
         FROM wallet WHERE w.org_id = wallet.org_id
       RETURNING w.org_id, w.balance_micros, LEAST(wallet.balance_micros, $2::bigint) AS taken
     ), entry AS (
       INSERT INTO hive.wallet_ledger (org_id, amount_micros, balance_after_micros, kind, reference)
       SELECT org_id, -taken, balance_micros, $3, $4 FROM taken WHERE taken > 0
     )
     SELECT taken FROM taken`,
    [take.orgId, take.amountMicros.toString(), take.kind, take.reference],
  );
  return rows[0] ? BigInt(rows[0].taken) : 0n;
}

export interface TopUpRow {
  session_id: string;
  org_id: string;
  amount_micros: string;
  payment_intent: string | null;
  credited_micros: string | null;
  refunded_micros: string;
}

/** A Checkout Session made for a top-up; nothing is credited until its webhook says it was paid. */
export async function insertTopUp(db: Queryable, topUp: { sessionId: string; orgId: string; personId: string; amountMicros: number }): Promise<void> {
  await db.query(
    'INSERT INTO hive.wallet_topups (session_id, org_id, person_id, amount_micros) VALUES ($1, $2, $3, $4)',
    [topUp.sessionId, topUp.orgId, topUp.personId, topUp.amountMicros],
  );
}

/**
 * Marks a paid session credited, once: the first of any number of concurrent deliveries gets the
 * row back; the others wait on its row lock and then find it credited (undefined). A session the
 * hive did not record (made elsewhere, but signed by Stripe and carrying an organisation) is recorded here.
 */
export async function markTopUpCredited(
  db: Queryable,
  paid: { sessionId: string; orgId: string; amountMicros: bigint; paymentIntent: string | null },
): Promise<TopUpRow | undefined> {
  const { rows } = await db.query<TopUpRow>(
    `INSERT INTO hive.wallet_topups AS t (session_id, org_id, amount_micros, payment_intent, credited_micros, credited_at)
     VALUES ($1, $2, $3, $4, $3, now())
     ON CONFLICT (session_id) DO UPDATE SET payment_intent = EXCLUDED.payment_intent, credited_micros = EXCLUDED.credited_micros, credited_at = now()
      WHERE t.credited_at IS NULL
     RETURNING session_id, org_id, amount_micros, payment_intent, credited_micros, refunded_micros`,
    [paid.sessionId, paid.orgId, paid.amountMicros.toString(), paid.paymentIntent],
  );
  return rows[0];
}

/** The credited top-up paid by `paymentIntent`, locked for a refund. */
export async function creditedTopUpForUpdate(db: Queryable, paymentIntent: string): Promise<TopUpRow | undefined> {
  const { rows } = await db.query<TopUpRow>(
    `SELECT session_id, org_id, amount_micros, payment_intent, credited_micros, refunded_micros
       FROM hive.wallet_topups WHERE payment_intent = $1 AND credited_at IS NOT NULL FOR UPDATE`,
    [paymentIntent],
  );
  return rows[0];
}

export async function setRefunded(db: Queryable, sessionId: string, refundedMicros: bigint): Promise<void> {
  await db.query('UPDATE hive.wallet_topups SET refunded_micros = $2 WHERE session_id = $1', [sessionId, refundedMicros.toString()]);
}

/** Whether `personId` holds admin or owner on the root node of `orgId` (billing is the organisation's). */
export async function isOrganisationAdmin(db: Queryable, orgId: string, personId: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM hive.role_grants g JOIN hive.nodes n ON n.id = g.node_id
      WHERE g.person_id = $2 AND n.org_id = $1 AND n.parent_id IS NULL AND g.role IN ('admin', 'owner')`,
    [orgId, personId],
  );
  return rows.length > 0;
}
