-- Wake-ups between replicas (issue 19): triggers NOTIFY when a run becomes
-- claimable, when a run ends, and when a confirmation is answered, so an idle
-- replica waits on LISTEN instead of polling.
--
-- Triggers rather than NOTIFY in the store's statements: every path that
-- queues, releases or ends a run (ingest, follow-ups in a finish, a cancel,
-- a new session, leases released at shutdown, anything added later) notifies
-- without having to remember to, and NOTIFY inside the writing transaction
-- is delivered only when (and if) it commits. PostgreSQL folds identical
-- notifications of one transaction into one.

-- `hearth_work` (no payload): a run may be claimable now.
-- `hearth_ended` (the run id): a run ended; followers and the replica
-- executing it (a cancel from another replica) learn it at once.
-- `hearth_asks` (the run id): a run began waiting for a confirmation
-- (followers' `?wait=` returns then).
CREATE FUNCTION hearth_runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Inserted queued (not claimed by its own replica).
        PERFORM pg_notify('hearth_work', '');
        RETURN NULL;
    END IF;
    IF NEW.status IN ('succeeded', 'failed', 'cancelled')
       AND OLD.status IN ('queued', 'running', 'awaiting_confirmation') THEN
        PERFORM pg_notify('hearth_ended', NEW.run_id);
        -- Its thread's next message may start now.
        IF EXISTS (SELECT 1 FROM runs WHERE thread_key = NEW.thread_key
                   AND seq > NEW.seq AND status = 'queued') THEN
            PERFORM pg_notify('hearth_work', '');
        END IF;
    ELSIF NEW.status = 'awaiting_confirmation' AND OLD.status <> 'awaiting_confirmation' THEN
        PERFORM pg_notify('hearth_asks', NEW.run_id);
    ELSIF NEW.lease_owner IS NULL AND OLD.lease_owner IS NOT NULL
          AND NEW.status IN ('queued', 'running', 'awaiting_confirmation') THEN
        -- A lease given up (a replica stopping cleanly).
        PERFORM pg_notify('hearth_work', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_notify_insert AFTER INSERT ON runs
    FOR EACH ROW WHEN (NEW.status = 'queued') EXECUTE FUNCTION hearth_runs_notify();
CREATE TRIGGER runs_notify_update AFTER UPDATE OF status, lease_owner ON runs
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.lease_owner IS DISTINCT FROM NEW.lease_owner)
    EXECUTE FUNCTION hearth_runs_notify();

-- `hearth_confirmation` (the run id): a confirmation left `pending`; the
-- replica whose run waits on it wakes the run.
CREATE FUNCTION hearth_confirmations_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hearth_confirmation', NEW.run_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER confirmations_notify AFTER UPDATE OF state ON confirmations
    FOR EACH ROW WHEN (OLD.state = 'pending' AND NEW.state IS DISTINCT FROM 'pending')
    EXECUTE FUNCTION hearth_confirmations_notify();

-- `hearth_incognito` ('1:' or '0:' then the thread key): a thread's
-- incognito mode changed; every replica keeps the flags of all threads, so
-- none stores a message of an incognito thread on disk.
CREATE FUNCTION hearth_threads_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hearth_incognito',
        CASE WHEN NEW.incognito THEN '1:' ELSE '0:' END || NEW.thread_key);
    RETURN NULL;
END
$$;

CREATE TRIGGER threads_notify_insert AFTER INSERT ON threads
    FOR EACH ROW WHEN (NEW.incognito) EXECUTE FUNCTION hearth_threads_notify();
CREATE TRIGGER threads_notify_update AFTER UPDATE OF incognito ON threads
    FOR EACH ROW WHEN (OLD.incognito IS DISTINCT FROM NEW.incognito)
    EXECUTE FUNCTION hearth_threads_notify();
