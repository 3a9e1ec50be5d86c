-- Up Migration

-- An account is a developer (who signs up and owns keys) or an end-user account a developer
-- provisioned with an rsk_ key. Both use a UUID id and may hold ko_ keys.
CREATE TABLE accounts (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  owner_type        text NOT NULL CHECK (owner_type IN ('developer', 'api_end_user')),
  parent_account_id uuid REFERENCES accounts (id),
  email             text NOT NULL,
  username          text,
  display_name      text,
  password_hash     text NOT NULL,
  funding           text NOT NULL DEFAULT 'standalone' CHECK (funding IN ('standalone', 'linked')),
  status            text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'closed')),
  created_at        timestamptz NOT NULL DEFAULT now(),
  closed_at         timestamptz,
  CHECK ((owner_type = 'developer') = (parent_account_id IS NULL)),
  CHECK ((status = 'closed') = (closed_at IS NOT NULL))
);
CREATE UNIQUE INDEX accounts_email_key ON accounts (lower(email));
CREATE UNIQUE INDEX accounts_username_key ON accounts (lower(username)) WHERE username IS NOT NULL;
CREATE INDEX accounts_parent_idx ON accounts (parent_account_id, created_at, id) WHERE parent_account_id IS NOT NULL;

-- Integer micro-dollars. The balance never goes below zero; every change is a ledger row
-- written in the same transaction as the balance.
CREATE TABLE wallets (
  account_id     uuid PRIMARY KEY REFERENCES accounts (id),
  balance_micros bigint NOT NULL DEFAULT 0 CHECK (balance_micros >= 0),
  updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE wallet_ledger (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id           uuid NOT NULL REFERENCES wallets (account_id),
  amount_micros        bigint NOT NULL CHECK (amount_micros <> 0),
  balance_after_micros bigint NOT NULL CHECK (balance_after_micros >= 0),
  kind                 text NOT NULL,
  reference            text,
  note                 text,
  created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wallet_ledger_account_idx ON wallet_ledger (account_id, id);

-- ko_ developer keys: only the SHA-256 of the full key and its display prefix are kept.
-- Revocation is a hard delete, so the next request finds no row.
CREATE TABLE api_keys (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id     uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  key_hash       bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
  display_prefix text NOT NULL CHECK (char_length(display_prefix) = 11),
  name           text NOT NULL CHECK (char_length(name) <= 80),
  scopes         text[] NOT NULL CHECK (cardinality(scopes) >= 1),
  expires_at     timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_account_idx ON api_keys (account_id, created_at);

-- rsk_ provisioning keys: one active key per developer; minting a new one replaces the old.
CREATE TABLE provisioning_keys (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id     uuid NOT NULL UNIQUE REFERENCES accounts (id) ON DELETE CASCADE,
  key_hash       bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
  display_prefix text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE provisioning_keys;
DROP TABLE api_keys;
DROP TABLE wallet_ledger;
DROP TABLE wallets;
DROP TABLE accounts;
