-- Up Migration

-- Migration 016 announced auth-generation changes with a trigger `AFTER UPDATE OF auth_generation`.
-- A column-specific trigger fires only when the UPDATE names that column in its SET list, and
-- changes made by BEFORE triggers do not count: a status, funding or parent change, whose bump
-- bump_account_auth_generation (migration 013) makes in a BEFORE trigger, was never announced,
-- so an API process kept serving that account's calls from its quota grants until they ended.
-- The trigger's WHEN clause already picks the rows whose generation changed; it needs no column list.
DROP TRIGGER accounts_auth_generation_notify ON accounts;
CREATE TRIGGER accounts_auth_generation_notify AFTER UPDATE ON accounts
  FOR EACH ROW WHEN (NEW.auth_generation IS DISTINCT FROM OLD.auth_generation) EXECUTE FUNCTION notify_auth_generation();

-- Down Migration
DROP TRIGGER accounts_auth_generation_notify ON accounts;
CREATE TRIGGER accounts_auth_generation_notify AFTER UPDATE OF auth_generation ON accounts
  FOR EACH ROW WHEN (NEW.auth_generation IS DISTINCT FROM OLD.auth_generation) EXECUTE FUNCTION notify_auth_generation();
