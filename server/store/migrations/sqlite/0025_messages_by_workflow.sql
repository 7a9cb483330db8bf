-- Deleting a workflow (DeleteWorkflow, the retention collector) deletes its messages through
-- the ON DELETE CASCADE of messages.workflow_id. Both indexes on that column were partial (unread
-- messages; keyed sends), which the cascade's lookup cannot use, so every deleted workflow read
-- the whole messages table. This one serves the cascade and any lookup of a workflow's messages.
CREATE INDEX messages_by_workflow ON messages (workflow_id);
