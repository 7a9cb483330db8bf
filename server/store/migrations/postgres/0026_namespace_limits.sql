-- Limits of a namespace an admin of every namespace sets (`waymark namespace update`), beside
-- the server-wide caps every namespace shares: starts a second (per replica), worker streams
-- and waits open at once. NULL: no limit of its own.
ALTER TABLE namespaces ADD COLUMN start_rate BIGINT;
ALTER TABLE namespaces ADD COLUMN max_worker_streams BIGINT;
ALTER TABLE namespaces ADD COLUMN max_waits BIGINT;
