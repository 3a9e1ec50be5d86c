-- Up Migration

-- Developer-level switch for creating unknown customers on first use (spec 1, "Attribution").
ALTER TABLE accounts ADD COLUMN lazy_create_customers boolean NOT NULL DEFAULT true;

-- A customer is a billing subject for one of a developer's end users, not a login.
CREATE TABLE customers (
  id                             text PRIMARY KEY CHECK (id LIKE 'cus\_%'),
  developer_id                   uuid NOT NULL REFERENCES accounts (id),
  external_id                    text,
  monthly_budget_micros          bigint CHECK (monthly_budget_micros >= 0),
  rpm_limit                      integer CHECK (rpm_limit > 0),
  tpm_limit                      integer CHECK (tpm_limit > 0),
  default_billable_markup_pct    numeric(14, 6) CHECK (default_billable_markup_pct >= 0),
  default_billable_amount_micros bigint CHECK (default_billable_amount_micros >= 0),
  lazy_create_customers          boolean NOT NULL DEFAULT true,
  metadata                       jsonb NOT NULL DEFAULT '{}'::jsonb,
  status                         text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
  created_on_first_use           boolean NOT NULL DEFAULT false,
  created_at                     timestamptz NOT NULL DEFAULT now(),
  updated_at                     timestamptz NOT NULL DEFAULT now(),
  archived_at                    timestamptz,
  CHECK (default_billable_markup_pct IS NULL OR default_billable_amount_micros IS NULL)
);
CREATE UNIQUE INDEX customers_external_id_key ON customers (developer_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX customers_list_idx ON customers (developer_id, created_at, id);

-- Events are written here in the same transaction as the change that causes them; a relay turns
-- them into webhook deliveries, so no event is lost if a process dies.
CREATE TABLE outbox_events (
  id           text PRIMARY KEY CHECK (id LIKE 'evt\_%'),
  developer_id uuid NOT NULL REFERENCES accounts (id),
  type         text NOT NULL,
  data         jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  relayed_at   timestamptz
);
CREATE INDEX outbox_events_pending_idx ON outbox_events (created_at, id) WHERE relayed_at IS NULL;
CREATE INDEX outbox_events_developer_idx ON outbox_events (developer_id, created_at);

-- Down Migration
DROP TABLE outbox_events;
DROP TABLE customers;
ALTER TABLE accounts DROP COLUMN lazy_create_customers;
