-- Up Migration

-- The metered hot path keeps verified keys and customers in each API process's memory instead of
-- reading them from PostgreSQL on every call. What makes that safe is this counter: every change
-- that could alter who may call, or under which customer limits (a key revoked, an account closed
-- or relinked, a customer patched, archived or deleted), bumps its developer's generation, and the
-- reservation of every cached call checks, in the same statement that reserves the money, that the
-- generation it was verified under is still current. A revoked key therefore never reaches an
-- upstream provider, however many replicas cache it.
ALTER TABLE accounts ADD COLUMN auth_generation bigint NOT NULL DEFAULT 0;

CREATE FUNCTION bump_account_auth_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status OR NEW.funding IS DISTINCT FROM OLD.funding
     OR NEW.parent_account_id IS DISTINCT FROM OLD.parent_account_id THEN
    NEW.auth_generation := OLD.auth_generation + 1;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER accounts_auth_generation BEFORE UPDATE ON accounts
  FOR EACH ROW EXECUTE FUNCTION bump_account_auth_generation();

CREATE FUNCTION bump_owner_auth_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'api_keys' THEN
    UPDATE accounts SET auth_generation = auth_generation + 1 WHERE id = OLD.account_id;
  ELSE
    UPDATE accounts SET auth_generation = auth_generation + 1 WHERE id = OLD.developer_id;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER api_keys_auth_generation AFTER UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION bump_owner_auth_generation();
CREATE TRIGGER customers_auth_generation AFTER UPDATE OR DELETE ON customers
  FOR EACH ROW EXECUTE FUNCTION bump_owner_auth_generation();

-- billing_authorize (migration 009) behind a generation check: 'stale_credentials' when the
-- caller's cached verification is out of date (nothing is reserved; the caller verifies again).
-- A NULL generation skips the check (callers that verified from PostgreSQL just now).
CREATE FUNCTION billing_authorize_current(
  p_generation bigint, p_developer uuid, p_payer_account uuid, p_customer text, p_budget_micros bigint,
  p_amount bigint, p_request_id text, p_ttl_seconds integer, p_event_id text)
RETURNS TABLE (outcome text, hold_id uuid, payer text, budget_month date)
LANGUAGE plpgsql AS $$
BEGIN
  IF p_generation IS NOT NULL AND NOT EXISTS (SELECT 1 FROM accounts WHERE id = p_developer AND auth_generation = p_generation) THEN
    RETURN QUERY SELECT 'stale_credentials'::text, NULL::uuid, NULL::text, NULL::date;
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM billing_authorize(p_developer, p_payer_account, p_customer, p_budget_micros, p_amount, p_request_id, p_ttl_seconds, p_event_id);
END $$;

-- Down Migration
DROP FUNCTION billing_authorize_current(bigint, uuid, uuid, text, bigint, bigint, text, integer, text);
DROP TRIGGER customers_auth_generation ON customers;
DROP TRIGGER api_keys_auth_generation ON api_keys;
DROP FUNCTION bump_owner_auth_generation();
DROP TRIGGER accounts_auth_generation ON accounts;
DROP FUNCTION bump_account_auth_generation();
ALTER TABLE accounts DROP COLUMN auth_generation;
