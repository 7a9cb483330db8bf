-- Workflow names some worker has registered. Starting a workflow whose name no worker ever
-- registered is refused (most often a typo), instead of leaving it ENQUEUED forever.
CREATE TABLE workflow_names (
    workflow_name TEXT PRIMARY KEY NOT NULL,
    first_seen_at BIGINT NOT NULL,
    last_seen_at  BIGINT NOT NULL
);
