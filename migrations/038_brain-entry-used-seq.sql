-- Up Migration

-- The brain's usage_seq at which a version's use (use_count, last_used) last moved. A process that
-- keeps a brain's ranked versions as of usage_seq S catches up to a newer one by reading only the
-- versions whose use moved after S, instead of reading the brain whole again: under learning the
-- sequence moves several times a second. Rows used before this column existed keep 0, which no
-- process's kept stamp (read after the migration) is below.
ALTER TABLE brain_entries ADD COLUMN used_seq bigint NOT NULL DEFAULT 0;
CREATE INDEX brain_entries_used_idx ON brain_entries (brain_id, used_seq);

-- Down Migration
DROP INDEX brain_entries_used_idx;
ALTER TABLE brain_entries DROP COLUMN used_seq;
