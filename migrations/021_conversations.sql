-- Up Migration

-- Conversations of a customer (spec 1, /v1/customers/{id}/conversations): a history of turns,
-- each a chat call through the gateway over the conversation so far. A turn holds a lock (Redis,
-- with a time to live and a fencing token); the row mirrors it so lists can filter on locked.
CREATE TABLE conversations (
  id            text PRIMARY KEY CHECK (id LIKE 'conv\_%'),
  developer_id  uuid NOT NULL REFERENCES accounts (id),
  customer_id   text NOT NULL REFERENCES customers (id),
  status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
  metadata      jsonb,
  message_count integer NOT NULL DEFAULT 0 CHECK (message_count BETWEEN 0 AND 5000),
  -- The fencing token of the latest turn to take the lock: a turn whose lock expired and was taken over cannot write its reply.
  last_fence    bigint NOT NULL DEFAULT 0,
  locked_until  timestamptz,
  deleted_at    timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_list_idx ON conversations (customer_id, created_at, id) WHERE deleted_at IS NULL;

CREATE TABLE conversation_messages (
  id              text PRIMARY KEY CHECK (id LIKE 'msg\_%'),
  conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  seq             integer NOT NULL,
  role            text NOT NULL CHECK (role IN ('user', 'assistant')),
  content         text NOT NULL,
  model           text,
  usage           jsonb,
  created_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (conversation_id, seq)
);

-- Down Migration
DROP TABLE conversation_messages;
DROP TABLE conversations;
