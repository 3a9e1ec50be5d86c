-- Up Migration

-- The hive's wallet (spec 3, issue 30): one per organisation, in integer micro-dollars, as the
-- gateway's wallets (migration 002). The balance never goes below zero and every change of it is
-- a ledger row written in the same statement or transaction as the balance. An organisation whose
-- balance is zero is suspended for writes; reads and export still work.
CREATE TABLE hive.wallets (
  org_id         text PRIMARY KEY REFERENCES hive.organisations (id) ON DELETE CASCADE,
  balance_micros bigint NOT NULL DEFAULT 0 CHECK (balance_micros >= 0),
  updated_at     timestamptz NOT NULL DEFAULT now()
);

-- kind: signup_credit | topup | refund | remember | recall | embedding. `reference` names what
-- moved the money: the Checkout Session of a top-up, the refund of a refund, the memory of a
-- remember or an embedding.
CREATE TABLE hive.wallet_ledger (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org_id               text NOT NULL REFERENCES hive.wallets (org_id) ON DELETE CASCADE,
  amount_micros        bigint NOT NULL CHECK (amount_micros <> 0),
  balance_after_micros bigint NOT NULL CHECK (balance_after_micros >= 0),
  kind                 text NOT NULL CHECK (kind IN ('signup_credit', 'topup', 'refund', 'remember', 'recall', 'embedding')),
  reference            text,
  created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wallet_ledger_org_idx ON hive.wallet_ledger (org_id, id);
-- A payment moves money once however often the payment provider delivers its event: a second
-- credit of one Checkout Session, or a second take-back of one refund, cannot be written.
CREATE UNIQUE INDEX wallet_ledger_payment_idx ON hive.wallet_ledger (kind, reference) WHERE kind IN ('topup', 'refund');

-- Card top-ups through Stripe Checkout: a row when the session is made (nothing credited), marked
-- credited by the one webhook delivery that credits it. The payment intent maps a refund (a
-- charge.refunded event names the charge's payment intent) back to the top-up and its
-- organisation; refunded_micros is what refunds have taken back so far, so a refund takes only the
-- increase of the charge's amount_refunded.
CREATE TABLE hive.wallet_topups (
  session_id       text PRIMARY KEY,
  org_id           text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  person_id        text REFERENCES hive.people (id) ON DELETE SET NULL,
  amount_micros    bigint NOT NULL CHECK (amount_micros > 0),
  payment_intent   text UNIQUE,
  credited_micros  bigint CHECK (credited_micros >= 0),
  refunded_micros  bigint NOT NULL DEFAULT 0 CHECK (refunded_micros >= 0),
  created_at       timestamptz NOT NULL DEFAULT now(),
  credited_at      timestamptz
);
CREATE INDEX wallet_topups_org_idx ON hive.wallet_topups (org_id, created_at DESC);

-- Organisations made before this migration keep working: each gets a wallet with the default
-- signup credit (HIVE_SIGNUP_CREDIT_USD's default, 5 USD); new ones get theirs at signup.
INSERT INTO hive.wallets (org_id, balance_micros) SELECT id, 5000000 FROM hive.organisations;
INSERT INTO hive.wallet_ledger (org_id, amount_micros, balance_after_micros, kind, reference)
SELECT org_id, balance_micros, balance_micros, 'signup_credit', 'migration 030' FROM hive.wallets;

UPDATE hive.schema_info SET version = '6', updated_at = now();

-- Down Migration
DROP TABLE hive.wallet_topups;
DROP TABLE hive.wallet_ledger;
DROP TABLE hive.wallets;
UPDATE hive.schema_info SET version = '5', updated_at = now();
