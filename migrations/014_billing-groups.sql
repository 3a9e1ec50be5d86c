-- Up Migration

-- Group commit for the metering statements. Under load many calls reserve and settle at once (a
-- batch keeps hundreds of lines in flight; an API replica serves a thousand calls a second), and
-- one statement per call is what limits them: a round trip and a commit each, and every call of a
-- developer updating the same wallet row, whose versions pile up faster than PostgreSQL prunes
-- them. These functions take a group of calls as a JSON array (each call with its `ordinal`) and
-- decide every call as the per-call functions of migrations 009 and 013 do, in order, but write
-- each wallet row and budget month once per group, and the holds, usage records, ledger rows and
-- events in one insert each. A call that arrives alone still runs the per-call function.
--
-- Lock order. Every statement that moves money locks holds first, then budget months, then
-- developer wallets, then customer wallets, each kind sorted by key, before it writes anything:
-- two groups, a group and a per-call statement (holds, budget, wallet), or a group and a
-- customer top-up (developer wallet, then customer wallet) always meet in the same order and
-- never deadlock. FOR NO KEY UPDATE is the lock UPDATE itself takes.

-- A group's calls as rows (inlined by the planner wherever they are read).
CREATE FUNCTION billing_authorize_calls(p_calls jsonb)
RETURNS TABLE (ordinal integer, generation bigint, developer uuid, payer_account uuid, customer text, budget_micros bigint,
               amount bigint, request_id text, ttl_seconds integer, event_id text)
LANGUAGE sql IMMUTABLE AS $$
  SELECT * FROM jsonb_to_recordset(p_calls) AS calls (
    ordinal integer, generation bigint, developer uuid, payer_account uuid, customer text, budget_micros bigint,
    amount bigint, request_id text, ttl_seconds integer, event_id text)
$$;

CREATE FUNCTION billing_finish_calls(p_calls jsonb)
RETURNS TABLE (ordinal integer, hold uuid, settle boolean, cost bigint, billable bigint, model text, tokens_in integer,
               tokens_out integer, request_id text, idempotency_key text, low_micros bigint, low_event_id text,
               empty_event_id text, developer uuid, events jsonb)
LANGUAGE sql IMMUTABLE AS $$
  SELECT * FROM jsonb_to_recordset(p_calls) AS calls (
    ordinal integer, hold uuid, settle boolean, cost bigint, billable bigint, model text, tokens_in integer,
    tokens_out integer, request_id text, idempotency_key text, low_micros bigint, low_event_id text,
    empty_event_id text, developer uuid, events jsonb)
$$;

CREATE FUNCTION billing_authorize_group(p_calls jsonb)
RETURNS TABLE (ordinal integer, outcome text, hold_id uuid, payer text, budget_month date)
LANGUAGE plpgsql
-- Every row these functions read is found by its key. plpgsql keeps a generic plan after five
-- calls; one made while billing_holds was nearly empty (a new deployment) would scan the whole
-- table once it is large, and growth alone never replaces a cached plan. With sequential scans
-- off, the cached plans use the keys whatever the tables' size when they were made.
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
  v_month date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
  -- What each budget month has spent and reserved, what each wallet can still give, by key.
  v_spent jsonb;
  v_reserved jsonb;
  v_available jsonb;
  v_generations jsonb;
  c record;
  v_payer text;
  v_wallet text;
  v_budgeted boolean;
  v_hold uuid;
  o_ordinal integer[] := '{}';
  o_outcome text[] := '{}';
  o_hold uuid[] := '{}';
  o_payer text[] := '{}';
  o_month date[] := '{}';
  -- The calls reserved: their holds.
  a_ordinal integer[] := '{}';
  a_hold uuid[] := '{}';
  a_payer text[] := '{}';
  a_month date[] := '{}';
  -- Customers whose budget refused a call: the first refusal's call, for the event.
  v_refused jsonb := '{}';
BEGIN
  SELECT COALESCE(jsonb_object_agg(a.id, a.auth_generation), '{}') INTO v_generations
    FROM accounts a WHERE a.id IN (SELECT developer FROM billing_authorize_calls(p_calls) WHERE generation IS NOT NULL);

  INSERT INTO customer_budget_months (customer_id, month)
  SELECT DISTINCT customer, v_month FROM billing_authorize_calls(p_calls)
   WHERE customer IS NOT NULL AND budget_micros IS NOT NULL ORDER BY 1
  ON CONFLICT DO NOTHING;
  WITH locked AS (
    SELECT m.customer_id, m.spent_micros, m.reserved_micros FROM customer_budget_months m
     WHERE m.month = v_month AND m.customer_id IN (SELECT customer FROM billing_authorize_calls(p_calls) WHERE budget_micros IS NOT NULL)
     ORDER BY m.customer_id FOR NO KEY UPDATE)
  SELECT COALESCE(jsonb_object_agg(customer_id, spent_micros), '{}'), COALESCE(jsonb_object_agg(customer_id, reserved_micros), '{}')
    INTO v_spent, v_reserved FROM locked;

  -- Developer wallets first: UNION ALL runs its branches in order.
  WITH developer_wallet AS (
    SELECT 'developer:' || w.account_id AS key, w.balance_micros - w.reserved_micros AS available FROM wallets w
     WHERE w.account_id IN (SELECT payer_account FROM billing_authorize_calls(p_calls)) ORDER BY w.account_id FOR NO KEY UPDATE),
  customer_wallet AS (
    SELECT 'customer:' || w.customer_id AS key, w.balance_micros - w.reserved_micros AS available FROM customer_wallets w
     WHERE w.customer_id IN (SELECT customer FROM billing_authorize_calls(p_calls)) ORDER BY w.customer_id FOR NO KEY UPDATE)
  SELECT COALESCE(jsonb_object_agg(key, available), '{}') INTO v_available
    FROM (SELECT * FROM developer_wallet UNION ALL SELECT * FROM customer_wallet) AS wallet;

  FOR c IN SELECT * FROM billing_authorize_calls(p_calls) ORDER BY ordinal LOOP
    o_ordinal := o_ordinal || c.ordinal;
    IF c.generation IS NOT NULL AND (v_generations ->> c.developer::text)::bigint IS DISTINCT FROM c.generation THEN
      o_outcome := o_outcome || 'stale_credentials'::text; o_hold := o_hold || NULL::uuid; o_payer := o_payer || NULL::text; o_month := o_month || NULL::date;
      CONTINUE;
    END IF;
    v_budgeted := c.customer IS NOT NULL AND c.budget_micros IS NOT NULL;
    IF v_budgeted AND NOT (
         (v_spent ->> c.customer)::bigint < c.budget_micros
         AND (v_spent ->> c.customer)::bigint + (v_reserved ->> c.customer)::bigint + c.amount <= c.budget_micros) THEN
      IF NOT v_refused ? c.customer THEN
        v_refused := v_refused || jsonb_build_object(c.customer, jsonb_build_object('developer', c.developer, 'budget', c.budget_micros, 'event_id', c.event_id));
      END IF;
      o_outcome := o_outcome || 'budget_exceeded'::text; o_hold := o_hold || NULL::uuid; o_payer := o_payer || NULL::text; o_month := o_month || v_month;
      CONTINUE;
    END IF;
    IF c.customer IS NOT NULL AND v_available ? ('customer:' || c.customer) THEN
      v_payer := 'customer';
      v_wallet := 'customer:' || c.customer;
    ELSE
      v_payer := 'developer';
      v_wallet := 'developer:' || c.payer_account;
    END IF;
    IF COALESCE((v_available ->> v_wallet)::bigint, -1) < c.amount THEN
      o_outcome := o_outcome || (CASE WHEN v_payer = 'customer' THEN 'customer_wallet_empty' ELSE 'wallet_empty' END)::text;
      o_hold := o_hold || NULL::uuid; o_payer := o_payer || v_payer; o_month := o_month || (CASE WHEN v_budgeted THEN v_month END);
      CONTINUE;
    END IF;
    v_available := jsonb_set(v_available, ARRAY[v_wallet], to_jsonb((v_available ->> v_wallet)::bigint - c.amount));
    IF v_budgeted THEN
      v_reserved := jsonb_set(v_reserved, ARRAY[c.customer], to_jsonb((v_reserved ->> c.customer)::bigint + c.amount));
    END IF;
    v_hold := gen_random_uuid();
    a_ordinal := a_ordinal || c.ordinal; a_hold := a_hold || v_hold; a_payer := a_payer || v_payer; a_month := a_month || (CASE WHEN v_budgeted THEN v_month END);
    o_outcome := o_outcome || 'ok'::text; o_hold := o_hold || v_hold; o_payer := o_payer || v_payer; o_month := o_month || (CASE WHEN v_budgeted THEN v_month END);
  END LOOP;

  -- Each row once: the group's reservations summed per budget month and per wallet.
  UPDATE customer_budget_months m SET reserved_micros = m.reserved_micros + d.amount
    FROM (SELECT c.customer, sum(c.amount) AS amount FROM unnest(a_ordinal, a_hold, a_payer, a_month) AS h (ordinal, id, payer, budget_month) JOIN billing_authorize_calls(p_calls) c USING (ordinal)
           WHERE h.budget_month IS NOT NULL GROUP BY c.customer) d
   WHERE m.customer_id = d.customer AND m.month = v_month;
  UPDATE customer_wallets w SET reserved_micros = w.reserved_micros + d.amount, updated_at = now()
    FROM (SELECT c.customer, sum(c.amount) AS amount FROM unnest(a_ordinal, a_hold, a_payer, a_month) AS h (ordinal, id, payer, budget_month) JOIN billing_authorize_calls(p_calls) c USING (ordinal)
           WHERE h.payer = 'customer' GROUP BY c.customer) d
   WHERE w.customer_id = d.customer;
  UPDATE wallets w SET reserved_micros = w.reserved_micros + d.amount, updated_at = now()
    FROM (SELECT c.payer_account, sum(c.amount) AS amount FROM unnest(a_ordinal, a_hold, a_payer, a_month) AS h (ordinal, id, payer, budget_month) JOIN billing_authorize_calls(p_calls) c USING (ordinal)
           WHERE h.payer = 'developer' GROUP BY c.payer_account) d
   WHERE w.account_id = d.payer_account;
  INSERT INTO billing_holds (id, developer_id, payer_account_id, customer_id, payer, amount_micros, budget_month, request_id, expires_at)
  SELECT h.id, c.developer, c.payer_account, c.customer, h.payer, c.amount, h.budget_month, c.request_id, now() + make_interval(secs => c.ttl_seconds)
    FROM unnest(a_ordinal, a_hold, a_payer, a_month) AS h (ordinal, id, payer, budget_month) JOIN billing_authorize_calls(p_calls) c USING (ordinal) ORDER BY h.ordinal;

  -- customer.budget_exceeded once per customer and month, from the first call its budget refused.
  WITH refused AS (
    SELECT r.key AS customer, r.value AS call FROM jsonb_each(v_refused) AS r),
  notified AS (
    UPDATE customer_budget_months m SET exceeded_notified = true FROM refused
     WHERE m.customer_id = refused.customer AND m.month = v_month AND NOT m.exceeded_notified
    RETURNING refused.customer, refused.call)
  INSERT INTO outbox_events (id, developer_id, type, data)
  SELECT n.call ->> 'event_id', (n.call ->> 'developer')::uuid, 'customer.budget_exceeded', jsonb_build_object(
           'customer_id', n.customer, 'month', to_char(v_month, 'YYYY-MM-DD'), 'monthly_budget_usd', (n.call ->> 'budget')::bigint / 1e6)
    FROM notified n;

  RETURN QUERY SELECT * FROM unnest(o_ordinal, o_outcome, o_hold, o_payer, o_month);
END $$;

-- Each call's own events (chat.completion.finished, say) are recorded with its charge, and only
-- when it charged; a hold already finished, or an idempotency key already charged, charges nothing.
CREATE FUNCTION billing_finish_group(p_calls jsonb)
RETURNS TABLE (ordinal integer, charged boolean, deducted_micros bigint, balance_after_micros bigint)
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
  v_held uuid[];
  v_budgets text[];
  v_months date[];
  v_customer_wallets text[];
  v_developer_wallets uuid[];
BEGIN
  -- Every lookup goes by primary key (= ANY of an array): a test of status = 'held' would let the
  -- planner walk the partial index of open holds, full of entries of holds finished since the
  -- last vacuum. Locked, the held holds cannot change under this statement.
  WITH locked AS (
    SELECT h.id, h.status, h.customer_id, h.budget_month, h.payer, h.payer_account_id FROM billing_holds h
     WHERE h.id = ANY (ARRAY(SELECT hold FROM billing_finish_calls(p_calls)))
     ORDER BY h.id FOR NO KEY UPDATE)
  SELECT array_agg(id) FILTER (WHERE status = 'held'),
         array_agg(customer_id) FILTER (WHERE status = 'held' AND budget_month IS NOT NULL),
         array_agg(budget_month) FILTER (WHERE status = 'held' AND budget_month IS NOT NULL),
         array_agg(customer_id) FILTER (WHERE status = 'held' AND payer = 'customer'),
         array_agg(payer_account_id) FILTER (WHERE status = 'held' AND payer = 'developer')
    INTO v_held, v_budgets, v_months, v_customer_wallets, v_developer_wallets
    FROM locked;
  PERFORM 1 FROM customer_budget_months m
   WHERE (m.customer_id, m.month) IN (SELECT * FROM unnest(v_budgets, v_months))
   ORDER BY m.customer_id, m.month FOR NO KEY UPDATE;
  PERFORM 1 FROM wallets w WHERE w.account_id = ANY (v_developer_wallets) ORDER BY w.account_id FOR NO KEY UPDATE;
  PERFORM 1 FROM customer_wallets w WHERE w.customer_id = ANY (v_customer_wallets) ORDER BY w.customer_id FOR NO KEY UPDATE;

  RETURN QUERY
  WITH calls AS MATERIALIZED (
    SELECT * FROM billing_finish_calls(p_calls)
  ), finished AS (
    UPDATE billing_holds h SET status = CASE WHEN c.settle THEN 'settled' ELSE 'released' END, finished_at = now()
      FROM calls c
     WHERE h.id = ANY (v_held) AND h.id = c.hold
    RETURNING c.ordinal, h.id, h.developer_id, h.customer_id, h.payer, h.payer_account_id, h.budget_month, h.amount_micros
  ), usage AS (
    INSERT INTO usage_records (developer_id, customer_id, hold_id, request_id, idempotency_key, model, tokens_in, tokens_out, cost_micros, billable_micros)
    SELECT f.developer_id, f.customer_id, f.id, c.request_id, c.idempotency_key, c.model, c.tokens_in, c.tokens_out,
           LEAST(GREATEST(c.cost, 0), f.amount_micros), GREATEST(c.billable, 0)
      FROM finished f JOIN calls c USING (ordinal)
     WHERE c.settle ORDER BY f.ordinal
    ON CONFLICT (developer_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING hold_id
  ), charges AS (
    SELECT f.*, c.request_id, c.low_micros, c.low_event_id, c.empty_event_id, c.events,
           u.hold_id IS NOT NULL AS charged,
           CASE WHEN u.hold_id IS NOT NULL THEN LEAST(GREATEST(c.cost, 0), f.amount_micros) ELSE 0 END AS cost,
           CASE WHEN f.payer = 'customer' THEN f.customer_id ELSE f.payer_account_id::text END AS wallet
      FROM finished f JOIN calls c USING (ordinal) LEFT JOIN usage u ON u.hold_id = f.id
  ), budgets AS (
    UPDATE customer_budget_months m SET reserved_micros = m.reserved_micros - d.amount, spent_micros = m.spent_micros + d.cost
      FROM (SELECT customer_id, budget_month, sum(amount_micros) AS amount, sum(cost) AS cost FROM charges
             WHERE budget_month IS NOT NULL GROUP BY customer_id, budget_month) d
     WHERE m.customer_id = d.customer_id AND m.month = d.budget_month
  ), customer_balances AS (
    UPDATE customer_wallets w SET reserved_micros = w.reserved_micros - d.amount, balance_micros = w.balance_micros - d.cost, updated_at = now()
      FROM (SELECT customer_id, sum(amount_micros) AS amount, sum(cost) AS cost FROM charges WHERE payer = 'customer' GROUP BY customer_id) d
     WHERE w.customer_id = d.customer_id
    RETURNING 'customer' AS payer, w.customer_id AS wallet, w.balance_micros
  ), developer_balances AS (
    UPDATE wallets w SET reserved_micros = w.reserved_micros - d.amount, balance_micros = w.balance_micros - d.cost, updated_at = now()
      FROM (SELECT payer_account_id, sum(amount_micros) AS amount, sum(cost) AS cost FROM charges WHERE payer = 'developer' GROUP BY payer_account_id) d
     WHERE w.account_id = d.payer_account_id
    RETURNING 'developer' AS payer, w.account_id::text AS wallet, w.balance_micros
  ), running AS (
    -- Each call's balance after its own charge: the wallet's final balance plus the group's charges that came after it.
    SELECT ch.*, b.balance_micros
             + sum(ch.cost) OVER (PARTITION BY ch.payer, ch.wallet)
             - sum(ch.cost) OVER (PARTITION BY ch.payer, ch.wallet ORDER BY ch.ordinal) AS balance_after
      FROM charges ch
      JOIN (SELECT * FROM customer_balances UNION ALL SELECT * FROM developer_balances) b ON b.payer = ch.payer AND b.wallet = ch.wallet
  ), customer_ledger AS (
    INSERT INTO customer_wallet_ledger (customer_id, amount_micros, balance_after_micros, kind, reference)
    SELECT customer_id, -cost, balance_after, 'usage', request_id FROM running WHERE payer = 'customer' AND cost > 0 ORDER BY ordinal
  ), developer_ledger AS (
    INSERT INTO wallet_ledger (account_id, amount_micros, balance_after_micros, kind, reference)
    SELECT payer_account_id, -cost, balance_after, 'usage', request_id FROM running WHERE payer = 'developer' AND cost > 0 ORDER BY ordinal
  ), wallet_events AS (
    SELECT r.ordinal, r.low_event_id, r.empty_event_id, r.balance_after, r.cost, r.low_micros,
           CASE WHEN r.payer = 'customer' THEN r.developer_id ELSE r.payer_account_id END AS tenant,
           CASE WHEN r.payer = 'customer'
                THEN jsonb_build_object('owner', 'customer', 'customer_id', r.customer_id, 'balance_usd', r.balance_after / 1e6)
                ELSE jsonb_build_object('owner', 'developer', 'account_id', r.payer_account_id, 'balance_usd', r.balance_after / 1e6) END AS wallet
      FROM running r WHERE r.cost > 0
  ), recorded AS (
    INSERT INTO outbox_events (id, developer_id, type, data)
    SELECT low_event_id, tenant, 'wallet.low', jsonb_build_object('wallet', wallet, 'threshold_usd', low_micros / 1e6) FROM wallet_events
     WHERE balance_after + cost >= low_micros AND balance_after < low_micros AND balance_after > 0
    UNION ALL
    SELECT empty_event_id, tenant, 'wallet.empty', jsonb_build_object('wallet', wallet) FROM wallet_events WHERE balance_after = 0
    UNION ALL
    SELECT event.id, ch.developer_id, event.type, event.data
      FROM charges ch, jsonb_to_recordset(ch.events) AS event (id text, type text, data jsonb) WHERE ch.charged
  )
  SELECT c.ordinal, COALESCE(r.charged, false), COALESCE(r.cost, 0)::bigint, r.balance_after::bigint
    FROM calls c LEFT JOIN running r USING (ordinal)
   ORDER BY c.ordinal;
END $$;

-- Down Migration
DROP FUNCTION billing_finish_group(jsonb);
DROP FUNCTION billing_authorize_group(jsonb);
