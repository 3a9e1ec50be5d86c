-- Up Migration

-- The memory hive's first slice (spec 3, issue 29): organisations and their node trees, people
-- with a role per node, tokens, device codes, memories with their versions, and activity events.

CREATE TABLE hive.organisations (
  id         text PRIMARY KEY CHECK (id ~ '^org_[0-9A-Za-z]{24}$'),
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The tree: the organisation's root node (depth 0), its projects (depth 1), deeper nodes below.
-- `path` is the ids from the root down, joined by '/', so "N and everything below it" is a prefix
-- test; `name_path` is the same walk by names, how people and agents write a node.
CREATE TABLE hive.nodes (
  id         text PRIMARY KEY CHECK (id ~ '^nd_[0-9A-Za-z]{24}$'),
  org_id     text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  parent_id  text REFERENCES hive.nodes (id),
  name       text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
  depth      integer NOT NULL CHECK (depth >= 0),
  path       text NOT NULL,
  name_path  text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text,
  CHECK ((parent_id IS NULL) = (depth = 0)),
  UNIQUE (org_id, name_path)
);
CREATE UNIQUE INDEX nodes_one_root_idx ON hive.nodes (org_id) WHERE parent_id IS NULL;
CREATE INDEX nodes_path_idx ON hive.nodes (org_id, path text_pattern_ops);

-- A person belongs to one organisation; an address has one account across the hive.
CREATE TABLE hive.people (
  id                  text PRIMARY KEY CHECK (id ~ '^per_[0-9A-Za-z]{24}$'),
  org_id              text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  email               text NOT NULL UNIQUE CHECK (email = lower(email)),
  password_hash       text,
  guardrail_authority boolean NOT NULL DEFAULT false,
  axiom_authority     boolean NOT NULL DEFAULT false,
  created_at          timestamptz NOT NULL DEFAULT now()
);

-- A role per node, inherited downward. Read at every use of a token, never copied into one.
CREATE TABLE hive.role_grants (
  person_id  text NOT NULL REFERENCES hive.people (id) ON DELETE CASCADE,
  node_id    text NOT NULL REFERENCES hive.nodes (id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('reader', 'member', 'admin', 'owner')),
  granted_by text,
  granted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (person_id, node_id)
);
CREATE INDEX role_grants_node_idx ON hive.role_grants (node_id);

-- Tokens: random, shown once, stored as their SHA-256. A token carries either a person (whose
-- roles apply at the moment of use) or a grant of its own (one node and one role).
CREATE TABLE hive.tokens (
  id             text PRIMARY KEY CHECK (id ~ '^tok_[0-9A-Za-z]{24}$'),
  org_id         text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  token_hash     bytea NOT NULL UNIQUE,
  display_prefix text NOT NULL,
  name           text,
  person_id      text REFERENCES hive.people (id) ON DELETE CASCADE,
  grant_node_id  text REFERENCES hive.nodes (id) ON DELETE CASCADE,
  grant_role     text CHECK (grant_role IN ('reader', 'member', 'admin', 'owner')),
  CHECK ((person_id IS NULL) <> (grant_node_id IS NULL)),
  CHECK ((grant_node_id IS NULL) = (grant_role IS NULL)),
  created_by     text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz,
  revoked_at     timestamptz
);
CREATE INDEX tokens_person_idx ON hive.tokens (person_id) WHERE revoked_at IS NULL;

-- Device flow for people: start hands out a code; an admin approves it for an address, a node and
-- a role; the first poll after approval takes the token and the row goes.
CREATE TABLE hive.device_codes (
  id               text PRIMARY KEY CHECK (id ~ '^dev_[0-9A-Za-z]{24}$'),
  device_code_hash bytea NOT NULL UNIQUE,
  user_code        text NOT NULL UNIQUE,
  person_id        text REFERENCES hive.people (id) ON DELETE CASCADE,
  approved_by      text,
  approved_at      timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL
);

-- Fixed-window counters kept in the store (signup by client address), so every replica counts alike.
CREATE TABLE hive.rate_windows (
  key          text NOT NULL,
  window_start timestamptz NOT NULL,
  count        integer NOT NULL,
  PRIMARY KEY (key, window_start)
);

-- Memories. Identity is node + scope + normalised title: one live row per identity, refined in
-- place with its earlier versions in hive.memory_versions. A memory may supersede others (they
-- keep their rows, `superseded_by` pointing at it). Forget leaves the row as a tombstone: content
-- and vector gone, identity, who and when kept.
CREATE TABLE hive.memories (
  id                text PRIMARY KEY CHECK (id ~ '^mem_[0-9A-Za-z]{24}$'),
  org_id            text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  node_id           text NOT NULL REFERENCES hive.nodes (id),
  scope             text NOT NULL,
  title             text NOT NULL,
  title_key         text NOT NULL,
  body              text NOT NULL DEFAULT '',
  kind              text NOT NULL CHECK (kind IN ('note', 'fact', 'decision', 'preference', 'procedure', 'guardrail', 'axiom')),
  pinned            boolean NOT NULL DEFAULT false,
  version           integer NOT NULL DEFAULT 1,
  superseded_by     text REFERENCES hive.memories (id),
  created_at        timestamptz NOT NULL DEFAULT now(),
  created_by        text REFERENCES hive.people (id) ON DELETE SET NULL,
  created_token     text,
  created_source    text,
  updated_at        timestamptz NOT NULL DEFAULT now(),
  updated_by        text REFERENCES hive.people (id) ON DELETE SET NULL,
  updated_token     text,
  updated_source    text,
  verified_at       timestamptz,
  verified_by       text REFERENCES hive.people (id) ON DELETE SET NULL,
  verified_token    text,
  forgotten_at      timestamptz,
  forgotten_by      text REFERENCES hive.people (id) ON DELETE SET NULL,
  forgotten_token   text,
  embedding         vector,
  embedding_model   text,
  embedded_version  integer,
  search            tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', body), 'B')) STORED
);
CREATE UNIQUE INDEX memories_identity_idx ON hive.memories (node_id, scope, title_key) WHERE forgotten_at IS NULL;
CREATE INDEX memories_search_idx ON hive.memories USING gin (search) WHERE forgotten_at IS NULL;
CREATE INDEX memories_node_idx ON hive.memories (node_id, updated_at DESC) WHERE forgotten_at IS NULL;
CREATE INDEX memories_superseded_by_idx ON hive.memories (superseded_by) WHERE superseded_by IS NOT NULL;

-- Earlier versions of a memory, as they stood, with who wrote each.
CREATE TABLE hive.memory_versions (
  memory_id   text NOT NULL REFERENCES hive.memories (id) ON DELETE CASCADE,
  version     integer NOT NULL,
  scope       text NOT NULL,
  title       text NOT NULL,
  body        text NOT NULL,
  kind        text NOT NULL,
  written_at  timestamptz NOT NULL,
  written_by  text REFERENCES hive.people (id) ON DELETE SET NULL,
  written_token text,
  source      text,
  replaced_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (memory_id, version)
);

-- Activity events (POST /v1/log, read back with POST /v1/events).
CREATE TABLE hive.events (
  id         text PRIMARY KEY CHECK (id ~ '^evt_[0-9A-Za-z]{24}$'),
  org_id     text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  node_id    text NOT NULL REFERENCES hive.nodes (id),
  kind       text NOT NULL,
  text       text NOT NULL,
  data       jsonb,
  person_id  text REFERENCES hive.people (id) ON DELETE SET NULL,
  token_id   text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_node_idx ON hive.events (node_id, created_at DESC);

UPDATE hive.schema_info SET version = '2', updated_at = now();

-- Down Migration
DROP TABLE hive.events;
DROP TABLE hive.memory_versions;
DROP TABLE hive.memories;
DROP TABLE hive.rate_windows;
DROP TABLE hive.device_codes;
DROP TABLE hive.tokens;
DROP TABLE hive.role_grants;
DROP TABLE hive.people;
DROP TABLE hive.nodes;
DROP TABLE hive.organisations;
UPDATE hive.schema_info SET version = '1', updated_at = now();
