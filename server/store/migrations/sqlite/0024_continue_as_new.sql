-- Continue-as-new: a workflow that loops forever ends each run with a fresh history under the
-- same id. The run that ended is kept as a finished row of its own, `<id>/run-<n>`, with status
-- CONTINUED_AS_NEW, the history it recorded moved to it, and `continued_as` naming the workflow
-- that went on; `run` counts the runs before the current one.
ALTER TABLE workflows ADD COLUMN run BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN continued_as TEXT;
-- Ended runs are finished workflows for the retention collector too.
DROP INDEX workflows_finished;
CREATE INDEX workflows_finished ON workflows (updated_at, workflow_id)
    WHERE status IN ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', 'CONTINUED_AS_NEW');
