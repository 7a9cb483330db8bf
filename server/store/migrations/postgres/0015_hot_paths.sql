-- 1. Waking a workflow parked on another one is announced by the wake itself. Replicas no
--    longer look for work after every finished workflow (most wake nothing); instead, when this
--    trigger does put an awaiting workflow back in its queue, it tells every replica's dispatcher
--    on the changes channel (payload: the `Enqueued` change). The NOTIFY is sent at commit, and
--    only by finishes that woke something.
--    Its UPDATE is planned for the finished workflow's own key each time, as a statement with
--    the key written in: planned once for any key (a parameter), the planner sizes it by the
--    commonest parked_on value — with many workflows parked on timers, all of them — and scans
--    every parked workflow for each finish (3 s per 200 completions with 100,000 sleepers
--    parked, against well under a millisecond with the key known).
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
        PERFORM pg_notify('waymark_changes', '{"kind":"enqueued"}');
    END IF;
    RETURN NULL;
END;
$$;

-- 2. A send that completes a receive waiting on the sending replica, in one round trip: the
--    latency between a send and the receive it ends is mostly round trips to the database.
--    Each statement here takes its own snapshot (READ COMMITTED, a VOLATILE function), so this
--    behaves like the same statements sent one by one in a transaction:
--      take the wait key's lock, as every send does, so a racing park waits and then finds the
--      step recorded;
--      if the receive still waits (its workflow PENDING at its epoch, its step unrecorded), it
--      gets the topic's oldest unconsumed message (SKIP LOCKED: concurrent receivers never take
--      the same one) or, as almost always, none being left, the new one, inserted already
--      consumed; its step records it, output {"message": <payload>}. Should the worker's own
--      receive have recorded the step meanwhile (its timeout), the message is given back;
--      otherwise the message is inserted for a later receive, and a receiver parked on the
--      topic goes back to its queue.
--    A duplicate idempotency key or message id inserts nothing: 'duplicate', and the caller takes
--    the ordinary path, which explains which. Returns ('delivered', payload), ('sent', NULL) or
--    ('duplicate', NULL). A receiver that does not exist fails the insert's foreign key
--    (SQLSTATE 23503).
--    Its statements are keyed lookups whose best plan never depends on the values, so they are
--    planned once per connection instead of for each of a connection's first calls.
CREATE FUNCTION waymark_send_delivering(
    p_message_id text, p_workflow_id text, p_topic text, p_payload text, p_idempotency_key text,
    p_now bigint, p_epoch bigint, p_step_id bigint, p_step_name text
) RETURNS TABLE (outcome text, delivered text) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_waiting boolean;
    v_seq bigint;
    v_older bigint;
    v_payload text;
    v_parked_on text := 'message' || chr(10) || p_topic;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_workflow_id || chr(10) || v_parked_on, 0));
    SELECT w.status = 'PENDING' AND w.epoch = p_epoch
           AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.workflow_id = w.workflow_id AND s.step_id = p_step_id)
      INTO v_waiting
      FROM workflows w WHERE w.workflow_id = p_workflow_id FOR SHARE OF w;
    v_waiting := coalesce(v_waiting, false);
    IF v_waiting THEN
        UPDATE messages SET consumed_at = p_now, consumed_by_step = p_step_id
         WHERE seq = (SELECT m.seq FROM messages m
                       WHERE m.workflow_id = p_workflow_id AND m.topic = p_topic AND m.consumed_at IS NULL
                       ORDER BY m.seq LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING seq, payload INTO v_older, v_payload;
    END IF;
    INSERT INTO messages (message_id, workflow_id, topic, payload, idempotency_key, sent_at,
                          consumed_at, consumed_by_step)
    SELECT p_message_id, p_workflow_id, p_topic, p_payload, p_idempotency_key, p_now, t.at, t.step
      FROM (SELECT CASE WHEN v_waiting AND v_older IS NULL THEN p_now END AS at,
                   CASE WHEN v_waiting AND v_older IS NULL THEN p_step_id END AS step) t
    ON CONFLICT DO NOTHING RETURNING seq INTO v_seq;
    IF v_seq IS NULL THEN
        -- Undoes the older message's consumption too: the caller starts over.
        RAISE EXCEPTION USING ERRCODE = 'WMDUP', MESSAGE = 'duplicate message';
    END IF;
    IF v_waiting THEN
        v_payload := coalesce(v_payload, p_payload);
        INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at)
        VALUES (p_workflow_id, p_step_id, p_step_name, '{"message":' || v_payload || '}', NULL, 1, p_epoch, p_now)
        ON CONFLICT (workflow_id, step_id) DO NOTHING;
        IF FOUND THEN
            RETURN QUERY SELECT 'delivered'::text, v_payload;
            RETURN;
        END IF;
        UPDATE messages SET consumed_at = NULL, consumed_by_step = NULL
         WHERE seq IN (v_seq, v_older) AND consumed_by_step = p_step_id;
    END IF;
    UPDATE workflows SET status = 'ENQUEUED', wake_at = NULL, parked_on = NULL, updated_at = p_now
     WHERE status = 'DELAYED' AND parked_on = v_parked_on AND workflow_id = p_workflow_id;
    RETURN QUERY SELECT 'sent'::text, NULL::text;
END;
$$;
