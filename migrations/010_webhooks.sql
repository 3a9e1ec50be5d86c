-- Up Migration

-- A developer's registered receiver of signed events (spec 1, "Webhook endpoint").
-- The signing secret is kept as it is: the worker needs it to compute every signature.
CREATE TABLE webhook_endpoints (
  id                         text PRIMARY KEY CHECK (id LIKE 'wh\_%'),
  developer_id               uuid NOT NULL REFERENCES accounts (id),
  url                        text NOT NULL,
  description                text,
  events                     text[] NOT NULL CHECK (cardinality(events) > 0),
  status                     text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled_after_failures')),
  secret                     text NOT NULL CHECK (secret LIKE 'whsec\_%'),
  previous_secret            text CHECK (previous_secret LIKE 'whsec\_%'),
  previous_secret_expires_at timestamptz,
  rotation_grace_minutes     integer NOT NULL CHECK (rotation_grace_minutes BETWEEN 0 AND 10080),
  failure_streak             integer NOT NULL DEFAULT 0 CHECK (failure_streak >= 0),
  last_success_at            timestamptz,
  last_failure_at            timestamptz,
  disabled_at                timestamptz,
  created_at                 timestamptz NOT NULL DEFAULT now(),
  updated_at                 timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT webhook_endpoints_url_key UNIQUE (developer_id, url)
);
CREATE INDEX webhook_endpoints_list_idx ON webhook_endpoints (developer_id, created_at, id);
CREATE INDEX webhook_endpoints_active_idx ON webhook_endpoints (developer_id) WHERE status = 'active';

-- One delivery per (event, endpoint): the relay inserts with ON CONFLICT DO NOTHING, so a relay
-- that dies after its insert and runs again never makes a second delivery of the same event.
-- status: pending (first attempt due) -> succeeded | retrying (a Temporal workflow owns it)
--         retrying -> succeeded | dead;  dead -> replayed (POST .../retry) -> succeeded | dead.
CREATE TABLE webhook_deliveries (
  id                   text PRIMARY KEY CHECK (id LIKE 'whdel\_%'),
  endpoint_id          text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  developer_id         uuid NOT NULL REFERENCES accounts (id),
  event_id             text NOT NULL REFERENCES outbox_events (id) ON DELETE CASCADE,
  event_type           text NOT NULL,
  origin               text NOT NULL DEFAULT 'event' CHECK (origin IN ('event', 'test')),
  status               text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'succeeded', 'dead', 'replayed')),
  attempt_count        integer NOT NULL DEFAULT 0,
  next_attempt_at      timestamptz,
  last_attempt_at      timestamptz,
  last_response_status integer,
  last_error           text,
  replay_count         integer NOT NULL DEFAULT 0,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  completed_at         timestamptz,
  CONSTRAINT webhook_deliveries_event_endpoint_key UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at, id);
-- The sweep looks for deliveries whose queued attempt may have been lost.
CREATE INDEX webhook_deliveries_unsent_idx ON webhook_deliveries (updated_at) WHERE status IN ('pending', 'replayed');

-- Every HTTP attempt of a delivery, for GET /v1/webhooks/{id}/deliveries.
CREATE TABLE webhook_delivery_attempts (
  delivery_id     text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt         integer NOT NULL,
  attempted_at    timestamptz NOT NULL DEFAULT now(),
  response_status integer,
  error           text,
  duration_ms     integer NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);

-- Wakes the relay at commit: NOTIFY is delivered when the inserting transaction commits, and
-- identical notifications of one transaction collapse into one.
CREATE FUNCTION outbox_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('outbox_events', '');
  RETURN NULL;
END
$$;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_notify();

-- Down Migration
DROP TRIGGER outbox_events_notify ON outbox_events;
DROP FUNCTION outbox_events_notify();
DROP TABLE webhook_delivery_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
