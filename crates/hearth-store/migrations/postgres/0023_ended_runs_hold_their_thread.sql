-- A run ended by a replica that is not executing it holds its thread until
-- the replica executing it stopped it (issue 19: one run at a time per
-- thread across replicas).
--
-- A cancel answered by another replica (`POST /v1/runs/{id}/cancel`, a new
-- session) ends the run in the store at once, and the replica executing it
-- stops it when it hears of the end: milliseconds later, or longer if that
-- replica is busy or stalled. The thread's next run was claimable as soon
-- as the end committed, so it could start beside the one still running.
-- Such an end now keeps the executing replica's lease on the ended run (an
-- unexpired one: a dead replica's lapsed lease holds nothing), and that
-- replica gives it up when its run stopped (`ClusterStore::let_go`). Until
-- then a message to the thread is stored queued and no claim takes the
-- thread's next run; a replica that dies before letting go holds the
-- thread until its lease lapses, as it holds a run it was executing.
--
-- Ends written by the replica executing the run clear the lease as before,
-- so this index holds almost nothing: the ended runs whose lease is kept.
CREATE INDEX runs_held_ended ON runs (thread_key)
    WHERE lease_owner IS NOT NULL AND status IN ('succeeded', 'failed', 'cancelled');

-- Storing a message: its thread is busy also while an ended run of it is
-- held (above), so the run is stored queued. The rest is migration 0021's
-- function unchanged; the functions of older replicas call this one.
CREATE OR REPLACE FUNCTION hearth_store_run_assuming_defaults(
    p_run_id TEXT,
    p_thread_key TEXT,
    p_user_key TEXT,
    p_source TEXT,
    p_input TEXT,
    p_idempotency_key TEXT,
    p_status TEXT,
    p_created_at BIGINT,
    p_scope TEXT,
    p_roles TEXT,
    p_lease_owner TEXT,
    p_lease_until BIGINT,
    p_model TEXT,
    p_mode TEXT,
    p_parent_run_id TEXT,
    p_assumes_defaults BOOLEAN
) RETURNS TABLE (run runs, had_messages BOOLEAN) LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1751474546, hashtext(p_thread_key));
    RETURN QUERY
    INSERT INTO runs (run_id, thread_key, user_key, source, input, idempotency_key,
        status, created_at, updated_at, scope, roles, lease_owner, lease_until, model, mode,
        parent_run_id, watched)
    SELECT p_run_id, p_thread_key, p_user_key, p_source, p_input, p_idempotency_key,
        CASE WHEN busy THEN 'queued' ELSE p_status END, p_created_at, p_created_at,
        p_scope, p_roles,
        CASE WHEN busy THEN NULL ELSE p_lease_owner END,
        CASE WHEN busy THEN NULL ELSE p_lease_until END,
        CASE WHEN busy OR configured THEN NULL ELSE NULLIF(p_model, '') END,
        CASE WHEN busy OR configured THEN NULL ELSE p_mode END,
        p_parent_run_id,
        busy OR p_status = 'queued'
    FROM (SELECT EXISTS (SELECT 1 FROM runs WHERE runs.thread_key = p_thread_key
              AND runs.status IN ('queued', 'running', 'awaiting_confirmation'))
          OR EXISTS (SELECT 1 FROM runs WHERE runs.thread_key = p_thread_key
              AND runs.lease_owner IS NOT NULL AND runs.lease_until >= p_created_at
              AND runs.status IN ('succeeded', 'failed', 'cancelled')) AS busy,
          coalesce(p_assumes_defaults, FALSE) AND EXISTS (SELECT 1 FROM threads
              WHERE threads.thread_key = p_thread_key AND (threads.model IS NOT NULL
                  OR threads.mode IS NOT NULL OR threads.thinking <> 'off')) AS configured)
        AS thread
    ON CONFLICT (thread_key, idempotency_key) WHERE idempotency_key IS NOT NULL
    DO NOTHING
    RETURNING runs, EXISTS (SELECT 1 FROM messages WHERE messages.thread_key = p_thread_key);
END
$$;

-- The row trigger's function (migration 0015), also waking the replicas
-- when an ended run's lease is given up and its thread has a queued run:
-- that run may start now.
CREATE OR REPLACE FUNCTION hearth_runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Inserted queued (not claimed by its own replica).
        PERFORM pg_notify('hearth_work', '');
        RETURN NULL;
    END IF;
    IF NEW.status IN ('succeeded', 'failed', 'cancelled')
       AND OLD.status IN ('queued', 'running', 'awaiting_confirmation') THEN
        IF NEW.watched THEN
            PERFORM pg_notify('hearth_ended', NEW.run_id);
        END IF;
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
    ELSIF NEW.lease_owner IS NULL AND OLD.lease_owner IS NOT NULL
          AND EXISTS (SELECT 1 FROM runs WHERE thread_key = NEW.thread_key
                      AND seq > NEW.seq AND status = 'queued') THEN
        -- An ended run let go: its thread's next message may start now.
        PERFORM pg_notify('hearth_work', '');
    END IF;
    RETURN NULL;
END
$$;
