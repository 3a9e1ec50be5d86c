-- Up Migration

-- Whether a compliance job's workflow was started (or found already started): a request commits
-- the job before it starts the workflow, so a Temporal away or an API process dying in between
-- leaves a job without one. The worker's sweep (startUnstartedComplianceJobs) starts the workflow
-- of each job not yet marked, once; a workflow that closed without completing its job is not
-- started again from there. Rows made before this column are unmarked, so the sweep looks at
-- each one not completed once and marks it.
ALTER TABLE hive.compliance_jobs ADD COLUMN workflow_started boolean NOT NULL DEFAULT false;
CREATE INDEX compliance_jobs_unstarted_idx ON hive.compliance_jobs (created_at) WHERE NOT workflow_started AND status <> 'completed';

UPDATE hive.schema_info SET version = '9', updated_at = now();

-- Down Migration
DROP INDEX hive.compliance_jobs_unstarted_idx;
ALTER TABLE hive.compliance_jobs DROP COLUMN workflow_started;
UPDATE hive.schema_info SET version = '8', updated_at = now();
