-- Up Migration

-- A hold records whose wallet pays for the call. Usually that is the calling account; a linked
-- provisioned account has no wallet of its own and bills its parent developer's.
ALTER TABLE billing_holds ADD COLUMN payer_account_id uuid REFERENCES accounts (id);
UPDATE billing_holds SET payer_account_id = developer_id;
ALTER TABLE billing_holds ALTER COLUMN payer_account_id SET NOT NULL;

DROP FUNCTION billing_authorize(uuid, text, bigint, bigint, text, integer, text);

-- As in migration 008, with the paying account separate from the calling one.
CREATE FUNCTION billing_authorize(
  p_developer uuid, p_payer_account uuid, p_customer text, p_budget_micros bigint, p_amount bigint,
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
     WHERE account_id = p_payer_account AND balance_micros - reserved_micros >= p_amount;
  END IF;
  IF NOT FOUND THEN
    IF v_month IS NOT NULL THEN
      UPDATE customer_budget_months SET reserved_micros = reserved_micros - p_amount WHERE customer_id = p_customer AND month = v_month;
    END IF;
    RETURN QUERY SELECT (CASE WHEN v_payer = 'customer' THEN 'customer_wallet_empty' ELSE 'wallet_empty' END)::text, NULL::uuid, v_payer, v_month;
    RETURN;
  END IF;

  INSERT INTO billing_holds (developer_id, payer_account_id, customer_id, payer, amount_micros, budget_month, request_id, expires_at)
  VALUES (p_developer, p_payer_account, p_customer, v_payer, p_amount, v_month, p_request_id, now() + make_interval(secs => p_ttl_seconds))
  RETURNING id INTO v_hold;
  RETURN QUERY SELECT 'ok'::text, v_hold, v_payer, v_month;
END $$;

-- As in migration 008, charging the hold's paying account; its wallet events go to that account.
CREATE OR REPLACE FUNCTION billing_finish(
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
     WHERE account_id = h.payer_account_id RETURNING balance_micros INTO v_after;
    IF v_cost > 0 THEN
      INSERT INTO wallet_ledger (account_id, amount_micros, balance_after_micros, kind, reference)
      VALUES (h.payer_account_id, -v_cost, v_after, 'usage', p_request_id);
    END IF;
    v_wallet := jsonb_build_object('owner', 'developer', 'account_id', h.payer_account_id, 'balance_usd', v_after / 1e6);
  END IF;

  IF v_cost > 0 AND v_after + v_cost >= p_low_micros AND v_after < p_low_micros AND v_after > 0 THEN
    INSERT INTO outbox_events (id, developer_id, type, data)
    VALUES (p_low_event_id, CASE WHEN h.payer = 'customer' THEN h.developer_id ELSE h.payer_account_id END, 'wallet.low', jsonb_build_object('wallet', v_wallet, 'threshold_usd', p_low_micros / 1e6));
  END IF;
  IF v_cost > 0 AND v_after = 0 THEN
    INSERT INTO outbox_events (id, developer_id, type, data) VALUES (p_empty_event_id, CASE WHEN h.payer = 'customer' THEN h.developer_id ELSE h.payer_account_id END, 'wallet.empty', jsonb_build_object('wallet', v_wallet));
  END IF;

  RETURN QUERY SELECT v_charged, v_cost, v_after;
END $$;

-- Down Migration
-- Not reversible on its own: the 008 functions it replaced would be gone. Roll back 008 with it.
DO $$ BEGIN RAISE EXCEPTION 'migration 009 is reversible only together with 008 (roll back both)'; END $$;
