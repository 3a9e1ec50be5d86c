-- Up Migration

-- The hive's browser dashboard (spec 3, "Browser routes"; issue 30): sessions kept server side,
-- the one-time codes that open the dashboard from the client command, and the sign-in lockout.

-- A signed-in browser. The cookie carries a random 32-byte secret; only its SHA-256 is kept, so a
-- copy of this table cannot be replayed. Each session reads through a person token of its own
-- (`token_id`, revoked with the session), so every page is scoped by the very reach query the API
-- uses. Sign-out deletes the row: a copied cookie names nothing after it.
CREATE TABLE hive.dashboard_sessions (
  secret_hash bytea PRIMARY KEY CHECK (octet_length(secret_hash) = 32),
  person_id   text NOT NULL REFERENCES hive.people (id) ON DELETE CASCADE,
  token_id    text NOT NULL UNIQUE REFERENCES hive.tokens (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX dashboard_sessions_person_idx ON hive.dashboard_sessions (person_id, expires_at);

-- POST /v1/dashboard/session: a short-lived code, used once, that turns into a session.
CREATE TABLE hive.dashboard_open_codes (
  code_hash  bytea PRIMARY KEY CHECK (octet_length(code_hash) = 32),
  person_id  text NOT NULL REFERENCES hive.people (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX dashboard_open_codes_person_idx ON hive.dashboard_open_codes (person_id);

-- Wrong passwords by subject: `address:<email>` or `place:<client address>`. Ten inside a window
-- lock the subject until `locked_until`; an unknown address is counted like a known one, so the
-- lock tells nothing about which addresses have accounts.
CREATE TABLE hive.sign_in_failures (
  subject           text PRIMARY KEY,
  failures          integer NOT NULL CHECK (failures > 0),
  window_started_at timestamptz NOT NULL,
  locked_until      timestamptz
);
-- Each failure sweeps a few subjects whose window and lock are long over.
CREATE INDEX sign_in_failures_window_idx ON hive.sign_in_failures (window_started_at);

UPDATE hive.schema_info SET version = '7', updated_at = now();

-- Down Migration
DROP TABLE hive.sign_in_failures;
DROP TABLE hive.dashboard_open_codes;
DROP TABLE hive.dashboard_sessions;
UPDATE hive.schema_info SET version = '6', updated_at = now();
