-- Up Migration

-- A developer's slot aliases (spec 1, "Model references": slot:<alias>). The target is a model
-- reference, resolved on every call, so a slot may point at another slot defined later; cycles
-- are refused when a call follows them (400 slot_cycle).
CREATE TABLE model_slots (
  developer_id uuid NOT NULL REFERENCES accounts (id),
  name         text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
  target       text NOT NULL CHECK (length(target) BETWEEN 1 AND 512),
  description  text CHECK (length(description) <= 512),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (developer_id, name)
);

-- A developer's dynamic profiles (dyn:<name>): ordered rules over the request's shape, each naming
-- a model reference, and the reference used when no rule matches.
CREATE TABLE dynamic_profiles (
  developer_id  uuid NOT NULL REFERENCES accounts (id),
  name          text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
  description   text CHECK (length(description) <= 512),
  rules         jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(rules) = 'array'),
  default_model text NOT NULL CHECK (length(default_model) BETWEEN 1 AND 512),
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (developer_id, name)
);

-- Down Migration
DROP TABLE dynamic_profiles;
DROP TABLE model_slots;
