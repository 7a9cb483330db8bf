-- Remote steps: a step a workflow calls by name, run by whichever worker registered that name.
-- One row per call, keyed by the caller's step position, so a replaying caller finds its call
-- again instead of making another. `attempt` counts dispatches and fences results: a result
-- for an attempt that timed out (and was dispatched again) is refused. The result itself is
-- recorded in `steps` at the caller's position, in the transaction that marks the row DONE.
CREATE TABLE step_tasks (
    workflow_id         TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    step_id             INTEGER NOT NULL,
    step_name           TEXT NOT NULL,
    input               TEXT NOT NULL,
    -- QUEUED (waiting for a worker, or for its retry time), RUNNING, DONE, CANCELLED.
    status              TEXT NOT NULL,
    attempt             INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL,
    initial_backoff_ms  INTEGER NOT NULL,
    backoff_coefficient REAL NOT NULL,
    max_backoff_ms      INTEGER NOT NULL,
    -- Start-to-close: how long one attempt may run.
    timeout_ms          INTEGER NOT NULL,
    available_at        INTEGER NOT NULL,
    worker_id           TEXT,
    session_id          TEXT,
    attempt_deadline_at INTEGER,
    last_failure        TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, step_id)
);
CREATE INDEX step_tasks_queued ON step_tasks (step_name, available_at) WHERE status = 'QUEUED';
CREATE INDEX step_tasks_running ON step_tasks (attempt_deadline_at) WHERE status = 'RUNNING';
