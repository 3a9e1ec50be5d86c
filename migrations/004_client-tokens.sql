-- Up Migration

-- The revocation registry of client tokens (spec 1, "Client token"). The token itself is a signed
-- JWT handed to the browser and never stored; this row, keyed by its jti, is what verification
-- checks on every request, so revoking a token is one UPDATE that takes effect immediately.
-- ip_hash is sha256(customer_id || '|' || client_ip) recorded at mint when bind_ip was asked for.
CREATE TABLE client_tokens (
  jti              text PRIMARY KEY CHECK (jti LIKE 'ctok\_%'),
  developer_id     uuid NOT NULL REFERENCES accounts (id),
  customer_id      text NOT NULL REFERENCES customers (id),
  scope            text[] NOT NULL CHECK (cardinality(scope) > 0),
  rpm_limit        integer NOT NULL CHECK (rpm_limit BETWEEN 1 AND 600),
  origin_allowlist text[] NOT NULL DEFAULT '{}',
  ip_hash          bytea CHECK (octet_length(ip_hash) = 32),
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL,
  revoked_at       timestamptz
);
-- Listing and revoke_all work on one customer's unrevoked tokens, in creation order.
CREATE INDEX client_tokens_customer_idx ON client_tokens (customer_id, created_at, jti) WHERE revoked_at IS NULL;

-- Down Migration
DROP TABLE client_tokens;
