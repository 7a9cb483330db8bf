-- What each worker stream declared when it connected (`info`) and its load at its last
-- heartbeat (`load`), both JSON the server writes and reads back for ListWorkers: any replica
-- can list the workers connected through all of them. Written with the lease, so listing costs
-- no write of its own.
ALTER TABLE worker_sessions ADD COLUMN info TEXT;
ALTER TABLE worker_sessions ADD COLUMN load TEXT;
