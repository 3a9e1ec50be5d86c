-- Up Migration

-- Provisioned end-user accounts carry a second secret for the vault (a later feature). It is
-- hashed like the login password and never returned; developers have none.
ALTER TABLE accounts ADD COLUMN vault_password_hash text;

-- The active-account cap counts a developer's open children on every create.
CREATE INDEX accounts_parent_active_idx ON accounts (parent_account_id) WHERE status = 'active';

-- Wallet-backed vouchers: minting moves amount_micros out of the developer's wallet (ledger kind
-- voucher_reserve); redeeming, once, credits a new account's wallet (ledger kind voucher_redeem).
-- Only the SHA-256 of the code and its display prefix are kept, like keys.
CREATE TABLE vouchers (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id          uuid NOT NULL REFERENCES accounts (id),
  code_hash           bytea NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
  display_prefix      text NOT NULL,
  amount_micros       bigint NOT NULL CHECK (amount_micros > 0),
  created_at          timestamptz NOT NULL DEFAULT now(),
  redeemed_at         timestamptz,
  redeemed_account_id uuid UNIQUE REFERENCES accounts (id),
  CHECK ((redeemed_at IS NULL) = (redeemed_account_id IS NULL))
);
CREATE INDEX vouchers_account_idx ON vouchers (account_id, created_at, id);

-- Down Migration
DROP TABLE vouchers;
DROP INDEX accounts_parent_active_idx;
ALTER TABLE accounts DROP COLUMN vault_password_hash;
