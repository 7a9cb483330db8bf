-- Queues as server resources: a name and the limits the dispatchers keep for it. Every limit is
-- optional (NULL: none). The queue "default" always exists.
CREATE TABLE queues (
    queue_name            TEXT PRIMARY KEY NOT NULL,
    worker_concurrency    BIGINT,
    global_concurrency    BIGINT,
    rate_limit            BIGINT,
    rate_period_ms        BIGINT,
    partition_concurrency BIGINT,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);
INSERT INTO queues (queue_name, created_at, updated_at) VALUES ('default', 0, 0);
