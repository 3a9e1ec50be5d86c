-- Up Migration

-- Signed-in developers of the dashboard (/app). The cookie carries a random 32-byte token; only
-- its SHA-256 is kept, so a leaked copy of this table cannot be replayed as a session. Sign-out
-- deletes the row; an expired row is refused on sight and swept when its account signs in again.
CREATE TABLE dashboard_sessions (
  token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX dashboard_sessions_account_idx ON dashboard_sessions (account_id, expires_at);

-- Down Migration
DROP TABLE dashboard_sessions;
