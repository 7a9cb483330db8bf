-- Flow control. What a start may ask for (a partition of its queue, a dedup id, a debounce key
-- with the latest time it may be put off to) and when a workflow was first dispatched, which
-- the rate limit counts. A start with a delay waits as DELAYED with wake_at set, like a parked
-- workflow, and is put in its queue by the same wake pass.
ALTER TABLE workflows ADD COLUMN partition_key TEXT NOT NULL DEFAULT '';
ALTER TABLE workflows ADD COLUMN dedup_id TEXT;
ALTER TABLE workflows ADD COLUMN started_at BIGINT;
ALTER TABLE workflows ADD COLUMN debounce_key TEXT;
ALTER TABLE workflows ADD COLUMN debounce_until BIGINT;
-- A dedup id is held by at most one live workflow of a queue.
CREATE UNIQUE INDEX workflows_dedup ON workflows (queue_name, dedup_id)
    WHERE dedup_id IS NOT NULL AND status IN ('ENQUEUED', 'PENDING', 'DELAYED');
-- At most one not-yet-started debounced workflow per (workflow name, key).
CREATE UNIQUE INDEX workflows_debounce ON workflows (workflow_name, debounce_key)
    WHERE debounce_key IS NOT NULL AND status = 'DELAYED' AND epoch = 0;
-- What a limited claim counts: running workflows per queue (and worker), recent starts.
CREATE INDEX workflows_running_by_queue ON workflows (queue_name, worker_id) WHERE status = 'PENDING';
CREATE INDEX workflows_started ON workflows (queue_name, started_at) WHERE started_at IS NOT NULL;
-- The head of each partition of a queue, and the partitions themselves (skip scan).
CREATE INDEX workflows_partitions ON workflows (queue_name, partition_key, priority, created_at, workflow_id)
    WHERE status = 'ENQUEUED';
