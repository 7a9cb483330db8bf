-- Namespaces. Each namespace but `default` keeps its data in a schema of its own (wm_<name>,
-- made and migrated when the namespace is created), so no query of one namespace can see
-- another's rows; `default` is the public schema, where everything written before namespaces
-- existed already is. This table, read only in the public schema, lists the namespaces.
CREATE TABLE namespaces (
    name       TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    created_at BIGINT NOT NULL
);
INSERT INTO namespaces (name, created_at)
VALUES ('default', (EXTRACT(EPOCH FROM now()) * 1000)::bigint);

-- The changes channel is per schema too, so one namespace's replicas never hear another's
-- changes: waymark_changes for the public schema, waymark_changes_<schema> for the others.
CREATE FUNCTION waymark_channel() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN current_schema() = 'public' THEN 'waymark_changes'
                ELSE 'waymark_changes_' || current_schema() END
$$;

-- As in 0015, announcing on this schema's channel.
CREATE OR REPLACE FUNCTION waymark_wake_awaiting() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woken bigint;
BEGIN
    EXECUTE format(
        'UPDATE workflows SET status = %L, wake_at = NULL, parked_on = NULL, updated_at = %L '
        'WHERE status = %L AND parked_on = %L',
        'ENQUEUED', NEW.updated_at, 'DELAYED', 'workflow' || chr(10) || NEW.workflow_id);
    GET DIAGNOSTICS woken = ROW_COUNT;
    IF woken > 0 THEN
        PERFORM pg_notify(waymark_channel(), '{"kind":"enqueued"}');
    END IF;
    RETURN NULL;
END;
$$;
