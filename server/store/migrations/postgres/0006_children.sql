-- Child workflows: the workflow that started one, for cascading cancels and for listing.
ALTER TABLE workflows ADD COLUMN parent_workflow_id TEXT;
CREATE INDEX workflows_children ON workflows (parent_workflow_id) WHERE parent_workflow_id IS NOT NULL;
