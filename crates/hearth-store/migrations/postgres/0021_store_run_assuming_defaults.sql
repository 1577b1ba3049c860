-- A message stored without its thread's settings read first (issue 19,
-- throughput). Every message read its thread's settings (model, thinking,
-- permission mode) before it was stored, to store its run claimed with the
-- model and mode they choose: a statement before the insert, for settings
-- most threads never have. A replica now prepares such a message from the
-- defaults, without the read, and the insert checks the assumption: the run
-- is stored claimed with the caller's model and mode only when its thread
-- has no settings of its own that would change them (no threads row, or one
-- whose model and mode are unset and whose thinking is `off`). Otherwise it
-- is stored held: claimed by the caller, but without a model or mode, and
-- the caller's worker prepares it from the thread's settings and claims it
-- again, recording them (as a direct call or a routed run is stored). The
-- caller tells the two apart by the returned run's model.
--
-- The check is made in the insert's snapshot, taken after the thread's lock
-- was granted (migration 0016 has why), so it sees every setting committed
-- before: a model set on another replica before the message was sent is
-- seen, as the read before the insert saw it.
--
-- The insert is written once: `hearth_store_run_seeing_history` (0018),
-- which replicas of the previous version call during a rolling upgrade (and
-- `hearth_store_run`, 0016, and `hearth_store_runs`, 0019, through it),
-- becomes a call of the new function that assumes nothing.
CREATE FUNCTION hearth_store_run_assuming_defaults(
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
              AND runs.status IN ('queued', 'running', 'awaiting_confirmation')) AS busy,
          coalesce(p_assumes_defaults, FALSE) AND EXISTS (SELECT 1 FROM threads
              WHERE threads.thread_key = p_thread_key AND (threads.model IS NOT NULL
                  OR threads.mode IS NOT NULL OR threads.thinking <> 'off')) AS configured)
        AS thread
    ON CONFLICT (thread_key, idempotency_key) WHERE idempotency_key IS NOT NULL
    DO NOTHING
    RETURNING runs, EXISTS (SELECT 1 FROM messages WHERE messages.thread_key = p_thread_key);
END
$$;

CREATE OR REPLACE FUNCTION hearth_store_run_seeing_history(
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
    p_parent_run_id TEXT
) RETURNS TABLE (run runs, had_messages BOOLEAN) LANGUAGE sql VOLATILE AS $$
    SELECT stored.run, stored.had_messages FROM hearth_store_run_assuming_defaults(p_run_id,
        p_thread_key, p_user_key, p_source, p_input, p_idempotency_key, p_status,
        p_created_at, p_scope, p_roles, p_lease_owner, p_lease_until, p_model, p_mode,
        p_parent_run_id, FALSE) AS stored
$$;

-- Several runs in one statement, as `hearth_store_runs` (0019, which has why
-- the locks are taken first and in that order), each with its assumption.
CREATE FUNCTION hearth_store_runs_assuming_defaults(
    p_run_id TEXT[],
    p_thread_key TEXT[],
    p_user_key TEXT[],
    p_source TEXT[],
    p_input TEXT[],
    p_idempotency_key TEXT[],
    p_status TEXT[],
    p_created_at BIGINT[],
    p_scope TEXT[],
    p_roles TEXT[],
    p_lease_owner TEXT[],
    p_lease_until BIGINT[],
    p_model TEXT[],
    p_mode TEXT[],
    p_parent_run_id TEXT[],
    p_assumes_defaults BOOLEAN[]
) RETURNS TABLE (i INTEGER, run runs, had_messages BOOLEAN) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    k INTEGER;
    lock_key INTEGER;
BEGIN
    FOR lock_key IN SELECT DISTINCT hashtext(t) FROM unnest(p_thread_key) AS t ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1751474546, lock_key);
    END LOOP;
    FOR k IN 1 .. coalesce(array_length(p_run_id, 1), 0) LOOP
        RETURN QUERY SELECT k, stored.run, stored.had_messages
            FROM hearth_store_run_assuming_defaults(p_run_id[k], p_thread_key[k],
                p_user_key[k], p_source[k], p_input[k], p_idempotency_key[k], p_status[k],
                p_created_at[k], p_scope[k], p_roles[k], p_lease_owner[k], p_lease_until[k],
                p_model[k], p_mode[k], p_parent_run_id[k], p_assumes_defaults[k]) AS stored;
    END LOOP;
END
$$;
