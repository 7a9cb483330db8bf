-- Parked workflows: released from worker memory while they wait (status DELAYED). What they
-- wait for is kept here, so the write that resolves the wait (a message on the topic, the event
-- being set) or the timer puts the workflow back in its queue.
ALTER TABLE workflows ADD COLUMN wake_at INTEGER;
ALTER TABLE workflows ADD COLUMN parked_on TEXT;
CREATE INDEX workflows_parked ON workflows (parked_on) WHERE status = 'DELAYED' AND parked_on IS NOT NULL;
CREATE INDEX workflows_wake_at ON workflows (wake_at) WHERE status = 'DELAYED';
