-- Up Migration

-- Quota grants: how a busy payer's calls are metered without a PostgreSQL round trip each.
--
-- A grant is one hold worth many calls (a credit-control "granted unit", as in RFC 4006), taken by
-- one API process for a payer that calls it often. The process then reserves each call against
-- the grant in its own memory, settles it there, and charges the settled calls here in bulk a few
-- times a second, each with its own usage record and ledger row. The wallet's guard is the same
-- as for any hold: the grant's amount was reserved before the first call used it, so however many
-- calls run at once on however many replicas, no wallet goes below zero.
--
-- A grant never takes more than a small share of what its wallet has available (p_share), so a
-- payer near the end of its money is metered call by call, with the exact refusals it always had.
-- Customers with a monthly budget always are (the API never asks a grant for them).

-- Opens a grant of up to p_desired micro-dollars: the generation check of billing_authorize_current,
-- then billing_authorize (migration 009) for the amount, capped at 1/p_share of the available
-- balance. 'too_small' when that cap is below p_minimum. Also returns the wallet's balance, which
-- the process counts down to report X-Svc-Wallet-Balance until its first charge reports a new one.
CREATE FUNCTION billing_grant_open(
  p_generation bigint, p_developer uuid, p_payer_account uuid, p_customer text,
  p_desired bigint, p_minimum bigint, p_share integer, p_ttl_seconds integer, p_event_id text)
RETURNS TABLE (outcome text, hold_id uuid, payer text, amount_micros bigint, balance_micros bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_balance bigint;
  v_amount bigint;
  v_outcome text;
  v_hold uuid;
  v_payer text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM accounts WHERE id = p_developer AND auth_generation = p_generation) THEN
    RETURN QUERY SELECT 'stale_credentials'::text, NULL::uuid, NULL::text, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;
  SELECT w.balance_micros, (w.balance_micros - w.reserved_micros) / p_share INTO v_balance, v_amount FROM customer_wallets w WHERE w.customer_id = p_customer;
  IF NOT FOUND THEN
    SELECT w.balance_micros, (w.balance_micros - w.reserved_micros) / p_share INTO v_balance, v_amount FROM wallets w WHERE w.account_id = p_payer_account;
  END IF;
  v_amount := LEAST(p_desired, v_amount);
  IF v_amount IS NULL OR v_amount < p_minimum THEN
    RETURN QUERY SELECT 'too_small'::text, NULL::uuid, NULL::text, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;
  SELECT a.outcome, a.hold_id, a.payer INTO v_outcome, v_hold, v_payer
    FROM billing_authorize(p_developer, p_payer_account, p_customer, NULL, v_amount, 'quota-grant', p_ttl_seconds, p_event_id) a;
  RETURN QUERY SELECT v_outcome, v_hold, v_payer, v_amount, v_balance;
END $$;

-- Charges calls settled under a grant: each entry (in `seq` order) becomes a usage record and,
-- when it cost anything, a ledger row with the balance after it; the sum leaves the wallet's
-- balance and its reservation, and the grant's hold shrinks by it, so releasing the hold later
-- (billing_finish) gives back only what no call used. Entries carry keys `grant:<hold>:<seq>`:
-- a charge repeated after a lost reply records and charges nothing twice. A hold no longer held
-- (released by the sweep after its process died) charges nothing. `current` tells the process
-- whether its credentials' generation still holds; when it does not, the process stops using the grant.
CREATE FUNCTION billing_grant_charge(p_hold uuid, p_generation bigint, p_entries jsonb, p_low_micros bigint, p_low_event_id text)
RETURNS TABLE (charged_micros bigint, balance_after_micros bigint, current boolean)
LANGUAGE plpgsql
-- As in migration 014: cached plans keep using keys whatever the tables' size when they were made.
SET enable_seqscan = off
AS $$
DECLARE
  h billing_holds;
BEGIN
  -- Lock order as in migration 014: the hold, then its wallet.
  SELECT * INTO h FROM billing_holds WHERE id = p_hold AND status = 'held' FOR NO KEY UPDATE;
  IF h.id IS NULL THEN
    RETURN QUERY SELECT 0::bigint, NULL::bigint, false;
    RETURN;
  END IF;

  -- One statement: a sum over more than the hold holds fails the hold's CHECK (amount_micros >= 0).
  RETURN QUERY
  WITH entries AS (
    SELECT * FROM jsonb_to_recordset(p_entries) AS e (
      seq integer, customer text, cost bigint, billable bigint, model text, tokens_in integer, tokens_out integer, request_id text, events jsonb)
  ), recorded AS (
    INSERT INTO usage_records (developer_id, customer_id, request_id, idempotency_key, model, tokens_in, tokens_out, cost_micros, billable_micros)
    SELECT h.developer_id, e.customer, e.request_id, 'grant:' || p_hold || ':' || e.seq, e.model, e.tokens_in, e.tokens_out, GREATEST(e.cost, 0), GREATEST(e.billable, 0)
      FROM entries e ORDER BY e.seq
    ON CONFLICT (developer_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING idempotency_key
  ), charges AS MATERIALIZED (
    SELECT e.seq, GREATEST(e.cost, 0) AS cost, e.request_id, e.events, sum(GREATEST(e.cost, 0)) OVER (ORDER BY e.seq) AS running
      FROM entries e JOIN recorded r ON r.idempotency_key = 'grant:' || p_hold || ':' || e.seq
  ), total AS MATERIALIZED (
    SELECT COALESCE(sum(cost), 0)::bigint AS amount FROM charges
  ), shrunk AS (
    UPDATE billing_holds SET amount_micros = amount_micros - total.amount FROM total WHERE id = p_hold
  ), developer_wallet AS (
    UPDATE wallets w SET reserved_micros = w.reserved_micros - total.amount, balance_micros = w.balance_micros - total.amount, updated_at = now()
      FROM total WHERE h.payer = 'developer' AND w.account_id = h.payer_account_id
    RETURNING w.balance_micros, jsonb_build_object('owner', 'developer', 'account_id', w.account_id) AS wallet, w.account_id AS tenant
  ), customer_wallet AS (
    UPDATE customer_wallets w SET reserved_micros = w.reserved_micros - total.amount, balance_micros = w.balance_micros - total.amount, updated_at = now()
      FROM total WHERE h.payer = 'customer' AND w.customer_id = h.customer_id
    RETURNING w.balance_micros, jsonb_build_object('owner', 'customer', 'customer_id', w.customer_id) AS wallet, h.developer_id AS tenant
  ), after AS MATERIALIZED (
    SELECT * FROM developer_wallet UNION ALL SELECT * FROM customer_wallet
  ), developer_ledger AS (
    INSERT INTO wallet_ledger (account_id, amount_micros, balance_after_micros, kind, reference)
    SELECT h.payer_account_id, -c.cost, a.balance_micros + t.amount - c.running, 'usage', c.request_id
      FROM charges c, total t, after a WHERE h.payer = 'developer' AND c.cost > 0 ORDER BY c.seq
  ), customer_ledger AS (
    INSERT INTO customer_wallet_ledger (customer_id, amount_micros, balance_after_micros, kind, reference)
    SELECT h.customer_id, -c.cost, a.balance_micros + t.amount - c.running, 'usage', c.request_id
      FROM charges c, total t, after a WHERE h.payer = 'customer' AND c.cost > 0 ORDER BY c.seq
  ), recorded_events AS (
    -- wallet.low when this charge took the balance across the threshold. (wallet.empty cannot come
    -- from a grant: it holds a small share of the balance, and the rest stays in the wallet.)
    INSERT INTO outbox_events (id, developer_id, type, data)
    SELECT p_low_event_id, a.tenant, 'wallet.low', jsonb_build_object('wallet', a.wallet || jsonb_build_object('balance_usd', a.balance_micros / 1e6), 'threshold_usd', p_low_micros / 1e6)
      FROM after a, total t
     WHERE t.amount > 0 AND a.balance_micros + t.amount >= p_low_micros AND a.balance_micros < p_low_micros AND a.balance_micros > 0
    UNION ALL
    SELECT event.id, h.developer_id, event.type, event.data
      FROM charges c, jsonb_to_recordset(c.events) AS event (id text, type text, data jsonb)
  )
  SELECT t.amount, a.balance_micros, EXISTS (SELECT 1 FROM accounts WHERE id = h.developer_id AND auth_generation = p_generation)
    FROM total t, after a;
END $$;

-- Every change of a developer's auth generation (migration 013: a key revoked, an account closed,
-- a customer archived...) is announced at commit. An API process holding grants of that developer
-- stops using them before it serves another call from memory: the revocation takes effect on the
-- next request, as it does for calls that reserve in PostgreSQL.
CREATE FUNCTION notify_auth_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('svc_auth_generation', NEW.id::text);
  RETURN NULL;
END $$;
CREATE TRIGGER accounts_auth_generation_notify AFTER UPDATE OF auth_generation ON accounts
  FOR EACH ROW WHEN (NEW.auth_generation IS DISTINCT FROM OLD.auth_generation) EXECUTE FUNCTION notify_auth_generation();

-- Down Migration
DROP TRIGGER accounts_auth_generation_notify ON accounts;
DROP FUNCTION notify_auth_generation();
DROP FUNCTION billing_grant_charge(uuid, bigint, jsonb, bigint, text);
DROP FUNCTION billing_grant_open(bigint, uuid, uuid, text, bigint, bigint, integer, integer, text);
