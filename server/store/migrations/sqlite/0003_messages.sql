-- Messages sent to workflows. A message is consumed once, by the recv that records it as a
-- step, and kept afterwards for audit. `seq` orders delivery (oldest first).
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id       TEXT NOT NULL UNIQUE,
    workflow_id      TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    topic            TEXT NOT NULL,
    payload          TEXT NOT NULL,
    idempotency_key  TEXT,
    sent_at          INTEGER NOT NULL,
    consumed_at      INTEGER,
    consumed_by_step INTEGER
);

-- recv takes the oldest unconsumed message of a (workflow, topic).
CREATE INDEX messages_unconsumed ON messages (workflow_id, topic, seq) WHERE consumed_at IS NULL;
-- A retried send with the same key is not delivered twice.
CREATE UNIQUE INDEX messages_idempotency ON messages (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
