-- Up Migration

-- Reserve and settle run as one statement each. Every metered call of a developer touches the
-- same wallet row; as single statements the row lock is held for microseconds, not across
-- several client round trips, so concurrent calls do not queue behind each other's network time.

-- Reserves a call's maximum cost on the customer's monthly budget (when it has one) and on the
-- paying wallet (the customer's prepaid wallet when it has one, else the developer's).
-- outcome: ok | budget_exceeded | wallet_empty | customer_wallet_empty. A refusal reserves nothing.
CREATE FUNCTION billing_authorize(
  p_developer uuid, p_customer text, p_budget_micros bigint, p_amount bigint,
  p_request_id text, p_ttl_seconds integer, p_event_id text)
RETURNS TABLE (outcome text, hold_id uuid, payer text, budget_month date)
LANGUAGE plpgsql AS $$
DECLARE
  v_month date;
  v_payer text := 'developer';
  v_hold uuid;
BEGIN
  IF p_customer IS NOT NULL AND p_budget_micros IS NOT NULL THEN
    v_month := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
    INSERT INTO customer_budget_months (customer_id, month) VALUES (p_customer, v_month) ON CONFLICT DO NOTHING;
    UPDATE customer_budget_months SET reserved_micros = reserved_micros + p_amount
     WHERE customer_id = p_customer AND month = v_month
       AND spent_micros < p_budget_micros AND spent_micros + reserved_micros + p_amount <= p_budget_micros;
    IF NOT FOUND THEN
      -- customer.budget_exceeded once per customer and month, however many calls are refused.
      UPDATE customer_budget_months SET exceeded_notified = true
       WHERE customer_id = p_customer AND month = v_month AND NOT exceeded_notified;
      IF FOUND THEN
        INSERT INTO outbox_events (id, developer_id, type, data)
        VALUES (p_event_id, p_developer, 'customer.budget_exceeded', jsonb_build_object(
          'customer_id', p_customer, 'month', to_char(v_month, 'YYYY-MM-DD'), 'monthly_budget_usd', p_budget_micros / 1e6));
      END IF;
      RETURN QUERY SELECT 'budget_exceeded'::text, NULL::uuid, NULL::text, v_month;
      RETURN;
    END IF;
  END IF;

  IF p_customer IS NOT NULL AND EXISTS (SELECT 1 FROM customer_wallets WHERE customer_id = p_customer) THEN
    v_payer := 'customer';
    UPDATE customer_wallets SET reserved_micros = reserved_micros + p_amount, updated_at = now()
     WHERE customer_id = p_customer AND balance_micros - reserved_micros >= p_amount;
  ELSE
    UPDATE wallets SET reserved_micros = reserved_micros + p_amount, updated_at = now()
     WHERE account_id = p_developer AND balance_micros - reserved_micros >= p_amount;
  END IF;
  IF NOT FOUND THEN
    IF v_month IS NOT NULL THEN
      UPDATE customer_budget_months SET reserved_micros = reserved_micros - p_amount WHERE customer_id = p_customer AND month = v_month;
    END IF;
    RETURN QUERY SELECT (CASE WHEN v_payer = 'customer' THEN 'customer_wallet_empty' ELSE 'wallet_empty' END)::text, NULL::uuid, v_payer, v_month;
    RETURN;
  END IF;

  INSERT INTO billing_holds (developer_id, customer_id, payer, amount_micros, budget_month, request_id, expires_at)
  VALUES (p_developer, p_customer, v_payer, p_amount, v_month, p_request_id, now() + make_interval(secs => p_ttl_seconds))
  RETURNING id INTO v_hold;
  RETURN QUERY SELECT 'ok'::text, v_hold, v_payer, v_month;
END $$;

-- Closes a hold exactly once. With p_settle it charges min(cost, reserved) and records the usage
-- (an idempotency key already settled charges nothing); without it, it releases the reservation.
-- Writes the ledger row and the wallet.low / wallet.empty events of a crossing in the same statement.
CREATE FUNCTION billing_finish(
  p_hold uuid, p_settle boolean, p_cost bigint, p_billable bigint, p_model text,
  p_tokens_in integer, p_tokens_out integer, p_request_id text, p_idempotency_key text,
  p_low_micros bigint, p_low_event_id text, p_empty_event_id text)
RETURNS TABLE (charged boolean, deducted_micros bigint, balance_after_micros bigint)
LANGUAGE plpgsql AS $$
DECLARE
  h billing_holds;
  v_cost bigint := 0;
  v_charged boolean := false;
  v_after bigint;
  v_rows integer;
  v_wallet jsonb;
BEGIN
  UPDATE billing_holds SET status = CASE WHEN p_settle THEN 'settled' ELSE 'released' END, finished_at = now()
   WHERE id = p_hold AND status = 'held' RETURNING * INTO h;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, 0::bigint, NULL::bigint;
    RETURN;
  END IF;

  IF p_settle THEN
    INSERT INTO usage_records (developer_id, customer_id, hold_id, request_id, idempotency_key, model, tokens_in, tokens_out, cost_micros, billable_micros)
    VALUES (h.developer_id, h.customer_id, h.id, p_request_id, p_idempotency_key, p_model, p_tokens_in, p_tokens_out,
            LEAST(GREATEST(p_cost, 0), h.amount_micros), GREATEST(p_billable, 0))
    ON CONFLICT (developer_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    IF v_rows = 1 THEN
      v_charged := true;
      v_cost := LEAST(GREATEST(p_cost, 0), h.amount_micros);
    END IF;
  END IF;

  IF h.budget_month IS NOT NULL THEN
    UPDATE customer_budget_months SET reserved_micros = reserved_micros - h.amount_micros, spent_micros = spent_micros + v_cost
     WHERE customer_id = h.customer_id AND month = h.budget_month;
  END IF;

  IF h.payer = 'customer' THEN
    UPDATE customer_wallets SET reserved_micros = reserved_micros - h.amount_micros, balance_micros = balance_micros - v_cost, updated_at = now()
     WHERE customer_id = h.customer_id RETURNING balance_micros INTO v_after;
    IF v_cost > 0 THEN
      INSERT INTO customer_wallet_ledger (customer_id, amount_micros, balance_after_micros, kind, reference)
      VALUES (h.customer_id, -v_cost, v_after, 'usage', p_request_id);
    END IF;
    v_wallet := jsonb_build_object('owner', 'customer', 'customer_id', h.customer_id, 'balance_usd', v_after / 1e6);
  ELSE
    UPDATE wallets SET reserved_micros = reserved_micros - h.amount_micros, balance_micros = balance_micros - v_cost, updated_at = now()
     WHERE account_id = h.developer_id RETURNING balance_micros INTO v_after;
    IF v_cost > 0 THEN
      INSERT INTO wallet_ledger (account_id, amount_micros, balance_after_micros, kind, reference)
      VALUES (h.developer_id, -v_cost, v_after, 'usage', p_request_id);
    END IF;
    v_wallet := jsonb_build_object('owner', 'developer', 'balance_usd', v_after / 1e6);
  END IF;

  IF v_cost > 0 AND v_after + v_cost >= p_low_micros AND v_after < p_low_micros AND v_after > 0 THEN
    INSERT INTO outbox_events (id, developer_id, type, data)
    VALUES (p_low_event_id, h.developer_id, 'wallet.low', jsonb_build_object('wallet', v_wallet, 'threshold_usd', p_low_micros / 1e6));
  END IF;
  IF v_cost > 0 AND v_after = 0 THEN
    INSERT INTO outbox_events (id, developer_id, type, data) VALUES (p_empty_event_id, h.developer_id, 'wallet.empty', jsonb_build_object('wallet', v_wallet));
  END IF;

  RETURN QUERY SELECT v_charged, v_cost, v_after;
END $$;

-- Down Migration
DROP FUNCTION billing_finish(uuid, boolean, bigint, bigint, text, integer, integer, text, text, bigint, text, text);
DROP FUNCTION billing_authorize(uuid, text, bigint, bigint, text, integer, text);
