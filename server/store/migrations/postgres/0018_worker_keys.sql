-- The API key a worker stream authenticated with (NULL with authentication off). While a
-- stream's lease is live, its worker id is not given to a stream with another key, on any
-- replica.
ALTER TABLE worker_sessions ADD COLUMN key_id TEXT;
