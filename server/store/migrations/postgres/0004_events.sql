-- Workflow events: the current value of each key, and every value it was set to (by which
-- step). Both are written in the same transaction as the step that sets the event.
CREATE TABLE events (
    workflow_id TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    event_key   TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (workflow_id, event_key)
);

CREATE TABLE event_history (
    seq BIGSERIAL PRIMARY KEY,
    workflow_id TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    event_key   TEXT NOT NULL,
    value       TEXT NOT NULL,
    step_id     BIGINT NOT NULL,
    set_at      BIGINT NOT NULL
);

CREATE INDEX event_history_by_key ON event_history (workflow_id, event_key, seq);
