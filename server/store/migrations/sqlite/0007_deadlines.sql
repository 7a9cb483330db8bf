-- Workflow deadlines: past it, a workflow that has not finished is cancelled. Every replica
-- checks with one indexed query; no per-workflow timer lives in memory.
ALTER TABLE workflows ADD COLUMN deadline_at INTEGER;
CREATE INDEX workflows_deadline ON workflows (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('ENQUEUED', 'DELAYED', 'PENDING');
