-- A workflow parked while it awaits another (a child) goes back to its queue when that one
-- reaches a terminal status, whichever path got it there (completion, cancel, deadline,
-- dead-lettering), in the same transaction.
CREATE FUNCTION waymark_wake_awaiting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE workflows SET status = 'ENQUEUED', wake_at = NULL, parked_on = NULL, updated_at = NEW.updated_at
    WHERE status = 'DELAYED' AND parked_on = 'workflow' || chr(10) || NEW.workflow_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER workflows_wake_awaiting AFTER UPDATE OF status ON workflows
FOR EACH ROW
WHEN (NEW.status IN ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')
      AND OLD.status NOT IN ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED'))
EXECUTE FUNCTION waymark_wake_awaiting();
