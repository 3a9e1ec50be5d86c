-- Up Migration

-- A reindex rollback runs in the job's workflow: entries written after the swap are embedded back
-- into the prior space with the prior model, then the brain swaps back. While it runs the job is
-- rolling_back, and no other reindex may start.
ALTER TABLE brain_reindex_jobs DROP CONSTRAINT brain_reindex_jobs_status_check;
ALTER TABLE brain_reindex_jobs ADD CONSTRAINT brain_reindex_jobs_status_check
  CHECK (status IN ('pending', 'in_progress', 'completed', 'failed', 'rolling_back', 'rolled_back'));
-- The brain's write_seq at the swap: the rollback re-embeds only if writes landed after it.
ALTER TABLE brain_reindex_jobs ADD COLUMN completed_write_seq bigint;
-- Set once the prior space has been dropped at the end of the window.
ALTER TABLE brain_reindex_jobs ADD COLUMN prior_space_dropped_at timestamptz;
DROP INDEX brain_reindex_running_idx;
CREATE UNIQUE INDEX brain_reindex_running_idx ON brain_reindex_jobs (brain_id) WHERE status IN ('pending', 'in_progress', 'rolling_back');

-- Forget finds each entry's newest version (live or deleted) to erase the entry with its history.
CREATE INDEX brain_entries_entry_idx ON brain_entries (brain_id, entry_id, version_id);

-- Down Migration
DROP INDEX brain_entries_entry_idx;
DROP INDEX brain_reindex_running_idx;
CREATE UNIQUE INDEX brain_reindex_running_idx ON brain_reindex_jobs (brain_id) WHERE status IN ('pending', 'in_progress');
ALTER TABLE brain_reindex_jobs DROP COLUMN prior_space_dropped_at;
ALTER TABLE brain_reindex_jobs DROP COLUMN completed_write_seq;
ALTER TABLE brain_reindex_jobs DROP CONSTRAINT brain_reindex_jobs_status_check;
ALTER TABLE brain_reindex_jobs ADD CONSTRAINT brain_reindex_jobs_status_check
  CHECK (status IN ('pending', 'in_progress', 'completed', 'failed', 'rolled_back'));
