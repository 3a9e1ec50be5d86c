-- Up Migration

-- The memory hive's second slice (spec 3, issue 29): tasks, sessions (opened by a brief, closed by
-- /v1/session/end) and the per-person user model (traits, each with its evidence).

-- Tasks on a node. Open until done or dropped; `due_at` is when it falls due (snoozing moves it,
-- keeping the first due date in `first_due_at`). A task may point at the memory it is about.
CREATE TABLE hive.tasks (
  id            text PRIMARY KEY CHECK (id ~ '^tsk_[0-9A-Za-z]{24}$'),
  org_id        text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  node_id       text NOT NULL REFERENCES hive.nodes (id),
  title         text NOT NULL,
  body          text NOT NULL DEFAULT '',
  status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done', 'dropped')),
  due_at        timestamptz,
  first_due_at  timestamptz,
  snoozes       integer NOT NULL DEFAULT 0,
  assignee_id   text REFERENCES hive.people (id) ON DELETE SET NULL,
  memory_id     text REFERENCES hive.memories (id),
  created_at    timestamptz NOT NULL DEFAULT now(),
  created_by    text REFERENCES hive.people (id) ON DELETE SET NULL,
  created_token text,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  closed_at     timestamptz,
  closed_by     text REFERENCES hive.people (id) ON DELETE SET NULL,
  closed_token  text,
  close_note    text,
  CHECK ((status = 'open') = (closed_at IS NULL))
);
CREATE INDEX tasks_node_idx ON hive.tasks (node_id, status, due_at);
CREATE INDEX tasks_assignee_idx ON hive.tasks (assignee_id) WHERE status = 'open';

-- A session: opened by POST /v1/brief for one token on one node, closed by POST /v1/session/end,
-- which reports what that token wrote between the two.
CREATE TABLE hive.sessions (
  id         text PRIMARY KEY CHECK (id ~ '^ses_[0-9A-Za-z]{24}$'),
  org_id     text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  node_id    text NOT NULL REFERENCES hive.nodes (id),
  token_id   text NOT NULL REFERENCES hive.tokens (id) ON DELETE CASCADE,
  person_id  text REFERENCES hive.people (id) ON DELETE SET NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  ended_at   timestamptz,
  summary    text
);
CREATE INDEX sessions_token_idx ON hive.sessions (token_id, started_at DESC);

-- The per-person user model: one line per trait (normalised text is its identity), each with the
-- evidence it rests on. Saying a trait again adds evidence instead of a second line.
CREATE TABLE hive.traits (
  id         text PRIMARY KEY CHECK (id ~ '^trt_[0-9A-Za-z]{24}$'),
  org_id     text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  person_id  text NOT NULL REFERENCES hive.people (id) ON DELETE CASCADE,
  trait      text NOT NULL,
  trait_key  text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (person_id, trait_key)
);

CREATE TABLE hive.trait_evidence (
  id          text PRIMARY KEY CHECK (id ~ '^tev_[0-9A-Za-z]{24}$'),
  trait_id    text NOT NULL REFERENCES hive.traits (id) ON DELETE CASCADE,
  text        text NOT NULL,
  memory_id   text REFERENCES hive.memories (id),
  event_id    text REFERENCES hive.events (id),
  source      text,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  recorded_by text REFERENCES hive.people (id) ON DELETE SET NULL,
  recorded_token text
);
CREATE INDEX trait_evidence_trait_idx ON hive.trait_evidence (trait_id, recorded_at);

-- What the export and the reports read by organisation and by who wrote it.
CREATE INDEX memories_org_idx ON hive.memories (org_id, node_id);
CREATE INDEX events_token_idx ON hive.events (token_id, created_at);

UPDATE hive.schema_info SET version = '3', updated_at = now();

-- Down Migration
DROP INDEX hive.events_token_idx;
DROP INDEX hive.memories_org_idx;
DROP TABLE hive.trait_evidence;
DROP TABLE hive.traits;
DROP TABLE hive.sessions;
DROP TABLE hive.tasks;
UPDATE hive.schema_info SET version = '2', updated_at = now();
