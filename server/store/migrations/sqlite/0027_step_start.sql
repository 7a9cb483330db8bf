-- When a step began (milliseconds since the epoch), for the console's timeline: a worker's
-- step is its checkpoint's time less the duration the worker reported; a remote step, its
-- first attempt's dispatch. NULL when not known (steps the server records itself, workers
-- that do not say, and everything recorded before this column).
ALTER TABLE steps ADD COLUMN started_at INTEGER;
