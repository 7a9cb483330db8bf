-- Retention: the collector deletes finished workflows oldest first by when they finished
-- (`updated_at` is the time of the last status change, which for a finished workflow is its
-- end). Only finished rows are in this index, so it costs nothing while a workflow runs.
CREATE INDEX workflows_finished ON workflows (updated_at, workflow_id)
    WHERE status IN ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED');
