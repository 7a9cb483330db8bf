-- Workflow streams: values appended in order under a key, the last one possibly a close
-- marker. Each append is recorded as a step of the writing workflow in the same transaction.
CREATE TABLE streams (
    workflow_id TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    stream_key  TEXT NOT NULL,
    position    INTEGER NOT NULL,
    value       TEXT,
    closed      INTEGER NOT NULL DEFAULT 0,
    written_at  INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, stream_key, position)
);
