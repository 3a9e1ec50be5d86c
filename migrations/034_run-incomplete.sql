-- Up Migration

-- A run that spends its max_prompt_tokens or max_completion_tokens before it answers ends
-- incomplete, as OpenAI's runs do, with incomplete_details naming which budget ran out.
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
  CHECK (status IN ('queued', 'in_progress', 'requires_action', 'cancelling', 'cancelled', 'completed', 'failed', 'expired', 'incomplete'));
ALTER TABLE runs ADD COLUMN incomplete_details jsonb;

-- Down Migration
ALTER TABLE runs DROP COLUMN incomplete_details;
UPDATE runs SET status = 'failed' WHERE status = 'incomplete';
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
  CHECK (status IN ('queued', 'in_progress', 'requires_action', 'cancelling', 'cancelled', 'completed', 'failed', 'expired'));
