-- Priority within a queue: lower runs first, first-come first-served within a priority. The
-- dispatch index leads with it so a claim reads the queue's head in that order.
ALTER TABLE workflows ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
DROP INDEX workflows_enqueued;
CREATE INDEX workflows_enqueued ON workflows (queue_name, priority, created_at, workflow_id) WHERE status = 'ENQUEUED';
