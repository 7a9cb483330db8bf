-- Tags: key/value labels a workflow is given at its start (or inherits from its parent). The
-- row keeps them as one JSON object (`tags`, NULL for none) to hand back; `workflow_tags` holds
-- one row per tag, "key=value", so a listing filtered by tags reads an index instead of every
-- row's JSON. Tags never change after the insert, so the trigger on insert keeps the two in step
-- for every kind of start (client, child, schedule, fork), and a deleted workflow's tags go with
-- it.
ALTER TABLE workflows ADD COLUMN tags TEXT;
CREATE TABLE workflow_tags (
    tag         TEXT NOT NULL,
    workflow_id TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    PRIMARY KEY (tag, workflow_id)
);
CREATE INDEX workflow_tags_workflow ON workflow_tags (workflow_id);
CREATE FUNCTION waymark_workflow_tagged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workflow_tags (tag, workflow_id)
        SELECT key || '=' || value, NEW.workflow_id FROM json_each_text(NEW.tags::json);
    RETURN NULL;
END;
$$;
CREATE TRIGGER workflows_tagged AFTER INSERT ON workflows FOR EACH ROW WHEN (NEW.tags IS NOT NULL)
    EXECUTE FUNCTION waymark_workflow_tagged();
