-- Up Migration

-- Uploaded and generated files (spec 1, POST /v1/files). The bytes live behind the storage
-- interface (shared/files/storage.ts) under `storage_key`; this row is the metadata. A delete
-- removes the bytes and marks the row, so a batch that named the file keeps its reference.
CREATE TABLE files (
  id           text PRIMARY KEY CHECK (id LIKE 'file\_%'),
  developer_id uuid NOT NULL REFERENCES accounts (id),
  purpose      text NOT NULL,
  filename     text NOT NULL,
  bytes        bigint NOT NULL CHECK (bytes >= 0),
  sha256       text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  storage_key  text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  deleted_at   timestamptz
);
CREATE INDEX files_list_idx ON files (developer_id, created_at, id) WHERE deleted_at IS NULL;

-- A batch (spec 1, POST /v1/batches): the row callers poll, driven by the Temporal workflow whose
-- id is the batch id. Counts are kept by the activities in the same statement that records results.
CREATE TABLE batches (
  id                text PRIMARY KEY CHECK (id LIKE 'batch\_%'),
  developer_id      uuid NOT NULL REFERENCES accounts (id),
  payer_account_id  uuid NOT NULL REFERENCES accounts (id),
  endpoint          text NOT NULL CHECK (endpoint IN ('/v1/chat/completions', '/v1/embeddings', '/v1/moderations')),
  input_file_id     text NOT NULL REFERENCES files (id),
  completion_window text NOT NULL DEFAULT '24h',
  status            text NOT NULL DEFAULT 'validating'
                    CHECK (status IN ('validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled')),
  metadata          jsonb,
  errors            jsonb,
  output_file_id    text REFERENCES files (id),
  error_file_id     text REFERENCES files (id),
  total_count       integer NOT NULL DEFAULT 0,
  completed_count   integer NOT NULL DEFAULT 0,
  failed_count      integer NOT NULL DEFAULT 0,
  -- Valid lines the run phase executes (total minus the lines refused by validation).
  runnable_count    integer NOT NULL DEFAULT 0,
  workflow_started  boolean NOT NULL DEFAULT false,
  created_at        timestamptz NOT NULL DEFAULT now(),
  expires_at        timestamptz NOT NULL,
  in_progress_at    timestamptz,
  finalizing_at     timestamptz,
  completed_at      timestamptz,
  failed_at         timestamptz,
  expired_at        timestamptz,
  cancelling_at     timestamptz,
  cancelled_at      timestamptz
);
CREATE INDEX batches_list_idx ON batches (developer_id, created_at, id);
CREATE INDEX batches_unstarted_idx ON batches (created_at) WHERE NOT workflow_started;

-- One row per valid input line, keyed (batch, custom_id): the unit of exactly-once. A row moves
-- from pending to succeeded or failed once (every write is guarded by status = 'pending'), and
-- the output and error files are read from here, so each custom_id lands in exactly one file.
CREATE TABLE batch_requests (
  batch_id    text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  custom_id   text NOT NULL,
  position    integer NOT NULL,
  line_number integer NOT NULL,
  body        jsonb NOT NULL,
  status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  result_id   text,
  status_code integer,
  request_id  text,
  response    jsonb,
  error       jsonb,
  finished_at timestamptz,
  PRIMARY KEY (batch_id, custom_id)
);
CREATE UNIQUE INDEX batch_requests_position_key ON batch_requests (batch_id, position);

-- Lines refused by validation (malformed JSON, missing fields, duplicate custom_id, wrong url):
-- they go to the error file and are never run.
CREATE TABLE batch_invalid_lines (
  batch_id    text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  line_number integer NOT NULL,
  custom_id   text,
  code        text NOT NULL,
  message     text NOT NULL,
  PRIMARY KEY (batch_id, line_number)
);

-- Down Migration
DROP TABLE batch_invalid_lines;
DROP TABLE batch_requests;
DROP TABLE batches;
DROP TABLE files;
