-- Up Migration

-- A call reserves its maximum cost before the upstream call and settles the actual cost after.
-- Reservations are not balance changes (no ledger row); available = balance - reserved, never < 0.
ALTER TABLE wallets
  ADD COLUMN reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
  ADD CONSTRAINT wallets_available_check CHECK (balance_micros - reserved_micros >= 0);

-- A customer's prepaid wallet, funded from its developer's wallet; attributed calls draw on it.
CREATE TABLE customer_wallets (
  customer_id     text PRIMARY KEY REFERENCES customers (id),
  developer_id    uuid NOT NULL REFERENCES accounts (id),
  balance_micros  bigint NOT NULL DEFAULT 0 CHECK (balance_micros >= 0),
  reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CHECK (balance_micros - reserved_micros >= 0)
);

CREATE TABLE customer_wallet_ledger (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  customer_id          text NOT NULL REFERENCES customer_wallets (customer_id),
  amount_micros        bigint NOT NULL CHECK (amount_micros <> 0),
  balance_after_micros bigint NOT NULL CHECK (balance_after_micros >= 0),
  kind                 text NOT NULL,
  reference            text,
  note                 text,
  created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customer_wallet_ledger_customer_idx ON customer_wallet_ledger (customer_id, id);

-- Spend against a customer's monthly budget, per calendar month in UTC.
CREATE TABLE customer_budget_months (
  customer_id     text NOT NULL REFERENCES customers (id),
  month           date NOT NULL,
  spent_micros    bigint NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
  reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
  exceeded_notified boolean NOT NULL DEFAULT false,
  PRIMARY KEY (customer_id, month)
);

-- One reservation per metered call, settled or released exactly once.
CREATE TABLE billing_holds (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  developer_id   uuid NOT NULL REFERENCES accounts (id),
  customer_id    text REFERENCES customers (id),
  payer          text NOT NULL CHECK (payer IN ('developer', 'customer')),
  amount_micros  bigint NOT NULL CHECK (amount_micros >= 0),
  budget_month   date,
  request_id     text,
  status         text NOT NULL DEFAULT 'held' CHECK (status IN ('held', 'settled', 'released')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz NOT NULL,
  finished_at    timestamptz
);
CREATE INDEX billing_holds_open_idx ON billing_holds (expires_at) WHERE status = 'held';

-- A usage record per metered call: what it used, what it cost, what the developer bills for it.
CREATE TABLE usage_records (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  developer_id    uuid NOT NULL REFERENCES accounts (id),
  customer_id     text REFERENCES customers (id),
  hold_id         uuid UNIQUE REFERENCES billing_holds (id),
  request_id      text,
  idempotency_key text,
  model           text NOT NULL,
  tokens_in       integer NOT NULL DEFAULT 0 CHECK (tokens_in >= 0),
  tokens_out      integer NOT NULL DEFAULT 0 CHECK (tokens_out >= 0),
  cost_micros     bigint NOT NULL CHECK (cost_micros >= 0),
  billable_micros bigint NOT NULL CHECK (billable_micros >= 0),
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX usage_records_idempotency_key ON usage_records (developer_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX usage_records_developer_idx ON usage_records (developer_id, created_at);
CREATE INDEX usage_records_customer_idx ON usage_records (customer_id, created_at) WHERE customer_id IS NOT NULL;

-- Down Migration
DROP TABLE usage_records;
DROP TABLE billing_holds;
DROP TABLE customer_budget_months;
DROP TABLE customer_wallet_ledger;
DROP TABLE customer_wallets;
ALTER TABLE wallets DROP CONSTRAINT wallets_available_check, DROP COLUMN reserved_micros;
