-- Up Migration

-- Vector stores (spec 1, "Vector store"; OpenAI's /v1/vector_stores). A store owns files that are
-- ingested into chunks; search reads the chunks of its active embedding space.
CREATE TABLE vector_stores (
  id               text PRIMARY KEY CHECK (id ~ '^vs_[0-9A-Za-z]{24}$'),
  developer_id     uuid NOT NULL REFERENCES accounts (id),
  name             text,
  description      text,
  embedding_model  text NOT NULL,
  dimensions       integer NOT NULL CHECK (dimensions > 0),
  encryption       text NOT NULL CHECK (encryption IN ('none', 'managed', 'byok')),
  vector_sealing   text NOT NULL CHECK (vector_sealing IN ('none', 'source', 'full')),
  vector_index     text NOT NULL CHECK (vector_index IN ('auto', 'flat', 'ivf')),
  graphrag_enabled boolean NOT NULL DEFAULT false,
  metadata         jsonb,
  -- The store's data key (AES-256), wrapped: by the master key (managed) or by a key derived from
  -- the caller's passphrase (byok, with kdf_salt). Never stored unwrapped.
  wrapped_data_key bytea,
  kdf_salt         bytea,
  CHECK ((encryption = 'none') = (wrapped_data_key IS NULL)),
  CHECK ((encryption = 'byok') = (kdf_salt IS NOT NULL)),
  state            text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'deleting', 'deleted')),
  -- Set when the developer's wallet could not pay for the store's embeddings; cleared once it can.
  suspended_at     timestamptz,
  -- Blue-green embedding spaces: searches read active_space; a migration builds the next one beside it.
  active_space     integer NOT NULL DEFAULT 1,
  expires_after_days integer CHECK (expires_after_days BETWEEN 1 AND 365),
  last_active_at   timestamptz NOT NULL DEFAULT now(),
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vector_stores_list_idx ON vector_stores (developer_id, created_at, id) WHERE state = 'active';

-- A file attached to a store, and its ingest: pending -> in_progress -> completed | failed | cancelled.
-- `attempt` grows on every retry; a pipeline stage acts only for the attempt it was queued for.
CREATE TABLE vector_store_files (
  vector_store_id    text NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
  file_id            text NOT NULL REFERENCES files (id),
  developer_id       uuid NOT NULL REFERENCES accounts (id),
  -- Who pays for the embedding calls: the payer's wallet (the developer, or a linked account's
  -- parent), or this customer's prepaid wallet when the attach named one (Svc-Customer).
  payer_account_id   uuid NOT NULL REFERENCES accounts (id),
  customer_id        text,
  batch_id           text,
  status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'in_progress', 'completed', 'failed', 'cancelled')),
  attempt            integer NOT NULL DEFAULT 1,
  attributes         jsonb,
  chunking           jsonb NOT NULL,
  chunk_count        integer NOT NULL DEFAULT 0,
  usage_bytes        bigint NOT NULL DEFAULT 0,
  last_error_code    text,
  last_error_message text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (vector_store_id, file_id)
);
CREATE INDEX vector_store_files_list_idx ON vector_store_files (vector_store_id, created_at, file_id);
CREATE INDEX vector_store_files_batch_idx ON vector_store_files (batch_id) WHERE batch_id IS NOT NULL;

CREATE TABLE vector_store_file_batches (
  id              text PRIMARY KEY CHECK (id LIKE 'vsfb\_%'),
  vector_store_id text NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
  developer_id    uuid NOT NULL REFERENCES accounts (id),
  cancelled_at    timestamptz,
  -- Set once, when its last file finished (vector_store.file_batch.completed fires then).
  finished_at     timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- Chunks, partitioned by store: each store gets its own partition when it is created, so its
-- indexes (an HNSW index per embedding space, built for that store's dimensions) cover its rows
-- alone, and removing a store's content is dropping one table. A chunk's text is plaintext in
-- `text` (with a full-text vector) or sealed in `text_sealed` (with blind-indexed `terms`); its
-- vector is plaintext in `embedding` or sealed in `embedding_sealed`.
CREATE TABLE vector_store_chunks (
  vector_store_id  text NOT NULL,
  space            integer NOT NULL,
  file_id          text NOT NULL,
  chunk_index      integer NOT NULL,
  tokens           integer NOT NULL,
  text             text,
  text_sealed      bytea,
  tsv              tsvector GENERATED ALWAYS AS (to_tsvector('english', coalesce(text, ''))) STORED,
  terms            text[],
  embedding        vector,
  embedding_sealed bytea,
  -- The IVF list of a sealed vector (vector_index ivf); null until the store's lists are next built.
  ivf_list         integer,
  CHECK ((text IS NULL) <> (text_sealed IS NULL)),
  PRIMARY KEY (vector_store_id, space, file_id, chunk_index)
) PARTITION BY LIST (vector_store_id);

-- The IVF lists of a sealed store's space: k-means centroids (sealed like its vectors), built in
-- the CPU pool at ingest and built again as the store grows.
CREATE TABLE vector_store_ivf (
  vector_store_id  text NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
  space            integer NOT NULL,
  lists            integer NOT NULL,
  dimensions       integer NOT NULL,
  centroids_sealed bytea NOT NULL,
  chunks           integer NOT NULL,
  built_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (vector_store_id, space)
);

-- Subject-predicate-object facts extracted from chunks of graphrag stores.
CREATE TABLE vector_store_facts (
  vector_store_id text NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
  file_id         text NOT NULL,
  chunk_index     integer NOT NULL,
  subject         text NOT NULL,
  predicate       text NOT NULL,
  object          text NOT NULL
);
CREATE INDEX vector_store_facts_chunk_idx ON vector_store_facts (vector_store_id, file_id, chunk_index);

-- Blue-green re-embedding of a store (POST /v1/vector_stores/{id}/migrate), run by the Temporal
-- workflow whose id is the migration id.
CREATE TABLE vector_store_migrations (
  id                   text PRIMARY KEY CHECK (id LIKE 'vsmig\_%'),
  vector_store_id      text NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
  developer_id         uuid NOT NULL REFERENCES accounts (id),
  payer_account_id     uuid NOT NULL REFERENCES accounts (id),
  customer_id          text,
  from_model           text NOT NULL,
  from_dimensions      integer NOT NULL,
  to_model             text NOT NULL,
  to_dimensions        integer NOT NULL,
  from_space           integer NOT NULL,
  to_space             integer NOT NULL,
  status               text NOT NULL DEFAULT 'in_progress' CHECK (status IN ('in_progress', 'completed', 'failed')),
  chunks_total         integer NOT NULL DEFAULT 0,
  chunks_done          integer NOT NULL DEFAULT 0,
  last_error           text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  completed_at         timestamptz
);
-- At most one migration of a store runs at a time.
CREATE UNIQUE INDEX vector_store_migrations_running_idx ON vector_store_migrations (vector_store_id) WHERE status = 'in_progress';

-- Down Migration
DROP TABLE vector_store_migrations;
DROP TABLE vector_store_facts;
DROP TABLE vector_store_ivf;
DROP TABLE vector_store_chunks;
DROP TABLE vector_store_file_batches;
DROP TABLE vector_store_files;
DROP TABLE vector_stores;
