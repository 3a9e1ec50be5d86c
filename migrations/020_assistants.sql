-- Up Migration

-- Assistants, threads, messages and runs (spec 1, "Other resources"; OpenAI's Assistants v2).
CREATE TABLE assistants (
  id             text PRIMARY KEY CHECK (id LIKE 'asst\_%'),
  developer_id   uuid NOT NULL REFERENCES accounts (id),
  name           text,
  description    text,
  model          text NOT NULL,
  instructions   text,
  tools          jsonb NOT NULL DEFAULT '[]',
  tool_resources jsonb,
  temperature    double precision,
  top_p          double precision,
  response_format jsonb,
  metadata       jsonb,
  deleted_at     timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
-- A name is unique among the developer's active assistants (409 assistant_name_in_use).
CREATE UNIQUE INDEX assistants_active_name_idx ON assistants (developer_id, name) WHERE deleted_at IS NULL AND name IS NOT NULL;
CREATE INDEX assistants_list_idx ON assistants (developer_id, created_at, id) WHERE deleted_at IS NULL;

CREATE TABLE threads (
  id             text PRIMARY KEY CHECK (id LIKE 'thread\_%'),
  developer_id   uuid NOT NULL REFERENCES accounts (id),
  -- The customer a client token that made the thread is pinned to; its tokens reach only its threads.
  customer_id    text REFERENCES customers (id),
  tool_resources jsonb,
  metadata       jsonb,
  message_count  integer NOT NULL DEFAULT 0 CHECK (message_count BETWEEN 0 AND 5000),
  deleted_at     timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE thread_messages (
  id           text PRIMARY KEY CHECK (id LIKE 'msg\_%'),
  thread_id    text NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  seq          integer NOT NULL,
  role         text NOT NULL CHECK (role IN ('user', 'assistant')),
  content      jsonb NOT NULL,
  attachments  jsonb,
  assistant_id text,
  run_id       text,
  -- The run step that wrote an assistant message: a step run again writes the same message, never a second.
  step_index   integer,
  metadata     jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (thread_id, seq)
);
CREATE UNIQUE INDEX thread_messages_step_idx ON thread_messages (run_id, step_index) WHERE run_id IS NOT NULL;

-- A run: the row callers poll, driven by the Temporal workflow whose id is the run id.
CREATE TABLE runs (
  id                    text PRIMARY KEY CHECK (id LIKE 'run\_%'),
  thread_id             text NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  assistant_id          text NOT NULL REFERENCES assistants (id),
  developer_id          uuid NOT NULL REFERENCES accounts (id),
  payer_account_id      uuid NOT NULL REFERENCES accounts (id),
  customer_id           text REFERENCES customers (id),
  status                text NOT NULL DEFAULT 'queued'
                        CHECK (status IN ('queued', 'in_progress', 'requires_action', 'cancelling', 'cancelled', 'completed', 'failed', 'expired')),
  model                 text NOT NULL,
  instructions          text NOT NULL DEFAULT '',
  tools                 jsonb NOT NULL DEFAULT '[]',
  tool_resources        jsonb,
  temperature           double precision,
  top_p                 double precision,
  max_completion_tokens integer,
  max_prompt_tokens     integer,
  truncation_strategy   jsonb,
  response_format       jsonb,
  tool_choice           jsonb,
  parallel_tool_calls   boolean NOT NULL DEFAULT true,
  metadata              jsonb,
  required_action       jsonb,
  last_error            jsonb,
  started_at            timestamptz,
  expires_at            timestamptz,
  cancelled_at          timestamptz,
  failed_at             timestamptz,
  completed_at          timestamptz,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now()
);
-- One active run per thread (409 thread_locked).
CREATE UNIQUE INDEX runs_active_per_thread_idx ON runs (thread_id) WHERE status IN ('queued', 'in_progress', 'requires_action', 'cancelling');
CREATE INDEX runs_list_idx ON runs (thread_id, created_at, id);

-- Each model call and tool call of a run, with its usage; a run's usage is the sum of its steps'.
CREATE TABLE run_steps (
  id           text PRIMARY KEY CHECK (id LIKE 'step\_%'),
  run_id       text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step_index   integer NOT NULL,
  type         text NOT NULL CHECK (type IN ('message_creation', 'tool_calls')),
  status       text NOT NULL CHECK (status IN ('in_progress', 'completed', 'cancelled', 'failed', 'expired')),
  step_details jsonb NOT NULL,
  prompt_tokens     integer NOT NULL DEFAULT 0,
  completion_tokens integer NOT NULL DEFAULT 0,
  cost_micros  bigint NOT NULL DEFAULT 0,
  created_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  UNIQUE (run_id, step_index)
);

-- Down Migration
DROP TABLE run_steps;
DROP TABLE runs;
DROP TABLE thread_messages;
DROP TABLE threads;
DROP TABLE assistants;
