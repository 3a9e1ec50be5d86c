-- Up Migration

-- Brains (spec 2): a developer's long-term memory store with a fixed embedding model and a
-- memory_policy. Entries are versioned bi-temporally so recall can answer as of any instant.
CREATE TABLE brains (
  id               text PRIMARY KEY CHECK (id ~ '^brn_[0-9A-Za-z]{24}$'),
  developer_id     uuid NOT NULL REFERENCES accounts (id),
  name             text NOT NULL,
  -- Canonical provider/model id (openai/text-embedding-3-small) and its dimensions.
  embedding_model  text NOT NULL,
  embedding_dims   integer NOT NULL CHECK (embedding_dims > 0),
  encryption       text NOT NULL CHECK (encryption IN ('none', 'standard', 'strict')),
  -- The brain's data key (AES-256) wrapped by the master key; standard and strict brains only.
  wrapped_data_key bytea,
  CHECK ((encryption = 'none') = (wrapped_data_key IS NULL)),
  tuning           text NOT NULL DEFAULT 'auto' CHECK (tuning IN ('auto', 'manual')),
  autotune_frozen  boolean NOT NULL DEFAULT false,
  memory_policy    jsonb NOT NULL,
  -- Blue-green embedding spaces: recall reads active_space; a reindex builds the next one beside it.
  active_space     integer NOT NULL DEFAULT 1,
  -- Grows with every entry write; a reindex swap refuses when it moved during the job.
  write_seq        bigint NOT NULL DEFAULT 0,
  state            text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'deleting')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX brains_list_idx ON brains (developer_id, created_at DESC, id) WHERE state = 'active';

-- Entry versions. An entry (entry_id) is the row whose valid_to is null; an update closes that row
-- (valid_to = now) and writes the next version, a delete only closes it. Recall as_of T reads the
-- versions with valid_from <= T < valid_to.
CREATE TABLE brain_entries (
  version_id       bigserial PRIMARY KEY,
  brain_id         text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  entry_id         text NOT NULL CHECK (entry_id ~ '^[A-Za-z0-9_.:-]{1,128}$'),
  scope            text NOT NULL,
  class            text NOT NULL CHECK (class IN ('reference', 'memory', 'policy')),
  type             text,
  -- Plaintext in title/body, or sealed (standard, strict) in title_sealed/body_sealed.
  title            text,
  body             text,
  title_sealed     bytea,
  body_sealed      bytea,
  CHECK ((body IS NULL) <> (body_sealed IS NULL)),
  body_bytes       bigint NOT NULL,
  trust            text NOT NULL DEFAULT 'high' CHECK (trust IN ('high', 'low')),
  origin           text NOT NULL DEFAULT 'native' CHECK (origin IN ('native', 'reference')),
  source_mount_id  text,
  -- Provenance: where a learned entry came from (forget by source).
  source           text,
  use_count        integer NOT NULL DEFAULT 0,
  last_used        timestamptz,
  -- When the entry was first written; kept across versions.
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  valid_from       timestamptz NOT NULL,
  valid_to         timestamptz,
  chunks           integer NOT NULL
);
CREATE UNIQUE INDEX brain_entries_current_idx ON brain_entries (brain_id, entry_id) WHERE valid_to IS NULL;
CREATE INDEX brain_entries_newest_idx ON brain_entries (brain_id, updated_at DESC, version_id DESC) WHERE valid_to IS NULL;
CREATE INDEX brain_entries_scope_idx ON brain_entries (brain_id, scope text_pattern_ops) WHERE valid_to IS NULL;
CREATE INDEX brain_entries_history_idx ON brain_entries (brain_id, valid_from);

-- Chunks of entry versions, partitioned by brain (each brain gets its partition at create, with an
-- HNSW index over the current chunks of its active space). A chunk carries its version's scope and
-- validity so recall filters without a join; its vector is sealed in strict brains.
CREATE TABLE brain_chunks (
  brain_id         text NOT NULL,
  space            integer NOT NULL,
  version_id       bigint NOT NULL,
  chunk_index      integer NOT NULL,
  entry_id         text NOT NULL,
  scope            text NOT NULL,
  content          text,
  content_sealed   bytea,
  CHECK ((content IS NULL) <> (content_sealed IS NULL)),
  embedding        vector,
  embedding_sealed bytea,
  CHECK ((embedding IS NULL) <> (embedding_sealed IS NULL)),
  valid_from       timestamptz NOT NULL,
  valid_to         timestamptz,
  PRIMARY KEY (brain_id, space, version_id, chunk_index)
) PARTITION BY LIST (brain_id);

-- Idempotent entry writes live in Redis (24 h, as every Idempotency-Key of the gateway).

-- Reindex jobs (POST /v1/brains/{id}/reindex with confirm), run by the Temporal workflow whose id
-- is the job id: the next space is embedded beside the active one, then swapped in.
CREATE TABLE brain_reindex_jobs (
  id                  text PRIMARY KEY CHECK (id ~ '^brj_[0-9A-Za-z]{24}$'),
  brain_id            text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  developer_id        uuid NOT NULL REFERENCES accounts (id),
  payer_account_id    uuid NOT NULL REFERENCES accounts (id),
  customer_id         text,
  from_model          text NOT NULL,
  from_dims           integer NOT NULL,
  from_space          integer NOT NULL,
  to_model            text NOT NULL,
  to_dims             integer NOT NULL,
  to_space            integer NOT NULL,
  -- The brain's write_seq when the job began: a different one at the swap means a write landed.
  started_write_seq   bigint NOT NULL,
  status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'in_progress', 'completed', 'failed', 'rolled_back')),
  chunks_total        integer NOT NULL DEFAULT 0,
  chunks_done         integer NOT NULL DEFAULT 0,
  failure_reason      text,
  completed_at        timestamptz,
  rollback_expires_at timestamptz,
  rolled_back_at      timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX brain_reindex_running_idx ON brain_reindex_jobs (brain_id) WHERE status IN ('pending', 'in_progress');

-- Down Migration
DROP TABLE brain_reindex_jobs;
DROP TABLE brain_chunks;
DROP TABLE brain_entries;
DROP TABLE brains;
