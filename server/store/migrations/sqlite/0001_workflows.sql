-- Workflows, their step checkpoints, and worker leases. Times are milliseconds since the Unix
-- epoch; values (inputs, outputs) are JSON text, kept byte for byte so a re-recorded step can be
-- compared with the original.
CREATE TABLE workflows (
    workflow_id       TEXT PRIMARY KEY NOT NULL,
    workflow_name     TEXT NOT NULL,
    status            TEXT NOT NULL,
    queue_name        TEXT NOT NULL,
    app_version       TEXT,
    input             TEXT NOT NULL,
    output            TEXT,
    failure           TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    recovery_attempts INTEGER NOT NULL DEFAULT 0,
    epoch             INTEGER NOT NULL DEFAULT 0,
    worker_id         TEXT,
    session_id        TEXT
);

-- Dispatch takes the oldest ENQUEUED workflows of a queue.
CREATE INDEX workflows_enqueued ON workflows (queue_name, created_at, workflow_id) WHERE status = 'ENQUEUED';
-- Recovery finds the workflows a worker owns.
CREATE INDEX workflows_running ON workflows (worker_id) WHERE status = 'PENDING';
CREATE INDEX workflows_running_session ON workflows (session_id) WHERE status = 'PENDING';
-- Listing is newest first.
CREATE INDEX workflows_created ON workflows (created_at, workflow_id);

CREATE TABLE steps (
    workflow_id TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    step_id     INTEGER NOT NULL,
    name        TEXT NOT NULL,
    output      TEXT,
    failure     TEXT,
    attempts    INTEGER NOT NULL,
    epoch       INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, step_id)
);

-- A worker stream's lease: while it lasts, the workflows dispatched on that stream are not
-- recovered. Leases belong to streams (sessions), not to worker ids, so a worker that reconnects
-- elsewhere does not keep a half-open old stream's workflows alive.
CREATE TABLE worker_sessions (
    session_id       TEXT PRIMARY KEY NOT NULL,
    worker_id        TEXT NOT NULL,
    lease_expires_at INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
