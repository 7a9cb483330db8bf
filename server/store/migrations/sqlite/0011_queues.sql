-- Queues as server resources: a name and the limits the dispatchers keep for it. Every limit is
-- optional (NULL: none). The queue "default" always exists.
CREATE TABLE queues (
    queue_name            TEXT PRIMARY KEY NOT NULL,
    worker_concurrency    INTEGER,
    global_concurrency    INTEGER,
    rate_limit            INTEGER,
    rate_period_ms        INTEGER,
    partition_concurrency INTEGER,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
INSERT INTO queues (queue_name, created_at, updated_at) VALUES ('default', 0, 0);
