-- Up Migration

-- The memory hive's compliance (spec 3, issue 30): each node's settings record, legal holds,
-- compliance jobs (retention sweeps, erasures, embedding sweeps: each a Temporal workflow whose id
-- is the job id) with the items they plan and settle page by page, and the audit log.

-- A node's settings record, replaced whole. A node without one takes its nearest ancestor's; the
-- organisation's root without one has the defaults (keep everything, internal, 365 days).
-- `retention` is a list of rules {kind?, scope?, max_age_days}: a memory matching a rule (its kind,
-- its scope or one below) older than the rule's age since it was last written goes; when several
-- match, the shortest age wins.
CREATE TABLE hive.node_settings (
  node_id        text PRIMARY KEY REFERENCES hive.nodes (id) ON DELETE CASCADE,
  org_id         text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  retention      jsonb NOT NULL CHECK (jsonb_typeof(retention) = 'array'),
  sensitivity    text NOT NULL CHECK (sensitivity IN ('public', 'internal', 'confidential', 'restricted')),
  audit_row_days integer NOT NULL CHECK (audit_row_days BETWEEN 1 AND 36500),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  updated_by     text,
  updated_token  text
);

-- A legal hold on a node covers it and every node below it until lifted: nothing there is deleted
-- by retention or erasure meanwhile (an erasure waits, queued, for the last hold to lift).
CREATE TABLE hive.legal_holds (
  id           text PRIMARY KEY CHECK (id ~ '^hld_[0-9A-Za-z]{24}$'),
  org_id       text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  node_id      text NOT NULL REFERENCES hive.nodes (id) ON DELETE CASCADE,
  reason       text NOT NULL,
  placed_at    timestamptz NOT NULL DEFAULT now(),
  placed_by    text,
  placed_token text,
  lifted_at    timestamptz,
  lifted_by    text,
  lifted_token text
);
CREATE INDEX legal_holds_active_idx ON hive.legal_holds (org_id) WHERE lifted_at IS NULL;

-- A compliance job: the row a caller polls (POST /v1/admin/job) while its workflow runs. `org_id`
-- null is a scheduled sweep of every organisation. `as_of` is the instant ages are measured at,
-- fixed when the job is made, so a plan recomputed after a crash is the same plan.
CREATE TABLE hive.compliance_jobs (
  id                text PRIMARY KEY,
  org_id            text REFERENCES hive.organisations (id) ON DELETE CASCADE,
  kind              text NOT NULL CHECK (kind IN ('retention', 'erasure', 'embed')),
  apply             boolean NOT NULL,
  status            text NOT NULL CHECK (status IN ('running', 'queued', 'completed')),
  subject_person_id text,
  requested_by      text,
  requested_token   text,
  planned           boolean NOT NULL DEFAULT false,
  pages             integer NOT NULL DEFAULT 0,
  result            jsonb,
  as_of             timestamptz NOT NULL DEFAULT now(),
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  finished_at       timestamptz
);
CREATE INDEX compliance_jobs_queued_idx ON hive.compliance_jobs (org_id) WHERE status = 'queued';

-- What a retention or erasure job planned, one memory a row, in pages: `action` is what the plan
-- does to it, `outcome` what a page did (null until then). A page settles its rows in the same
-- transaction as the deletions and the audit rows, so a page run twice finds nothing left to do.
-- No foreign key to the memory: the memory goes, the row says it went (ids only, never content).
CREATE TABLE hive.compliance_items (
  job_id        text NOT NULL REFERENCES hive.compliance_jobs (id) ON DELETE CASCADE,
  memory_id     text NOT NULL,
  page          integer NOT NULL,
  org_id        text NOT NULL,
  node_id       text NOT NULL,
  node_path     text NOT NULL,
  scope         text NOT NULL,
  kind          text NOT NULL,
  written_at    timestamptz NOT NULL,
  max_age_days  integer,
  action        text NOT NULL CHECK (action IN ('delete', 'anonymise', 'keep')),
  reason        text,
  outcome       text CHECK (outcome IN ('deleted', 'anonymised', 'kept', 'gone')),
  PRIMARY KEY (job_id, memory_id)
);
CREATE INDEX compliance_items_page_idx ON hive.compliance_items (job_id, page);

-- The audit log: one row per compliance action, written in the transaction of what it records.
-- A row expires `audit_row_days` (of its node's settings) after it was written; the applied
-- retention sweep removes expired rows, except under a legal hold.
CREATE TABLE hive.audit_log (
  id         text PRIMARY KEY CHECK (id ~ '^aud_[0-9A-Za-z]{24}$'),
  org_id     text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  node_id    text NOT NULL REFERENCES hive.nodes (id) ON DELETE CASCADE,
  action     text NOT NULL,
  job_id     text,
  person_id  text,
  token_id   text,
  detail     jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_org_idx ON hive.audit_log (org_id, created_at);
CREATE INDEX audit_log_job_idx ON hive.audit_log (job_id) WHERE job_id IS NOT NULL;

-- What the sweeps read: memories by author (erasure) and those awaiting a vector (embedding sweep).
CREATE INDEX memories_created_by_idx ON hive.memories (created_by) WHERE created_by IS NOT NULL;
CREATE INDEX memories_unembedded_idx ON hive.memories (org_id, id) WHERE forgotten_at IS NULL AND embedded_version IS DISTINCT FROM version;

UPDATE hive.schema_info SET version = '5', updated_at = now();

-- Down Migration
DROP INDEX hive.memories_unembedded_idx;
DROP INDEX hive.memories_created_by_idx;
DROP TABLE hive.audit_log;
DROP TABLE hive.compliance_items;
DROP TABLE hive.compliance_jobs;
DROP TABLE hive.legal_holds;
DROP TABLE hive.node_settings;
UPDATE hive.schema_info SET version = '4', updated_at = now();
