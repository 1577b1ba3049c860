-- Storing a run says which is its thread's newest stored message (issue 19,
-- throughput: a thread that keeps talking).
--
-- A run stored claimed reads its thread's context as it starts. Each
-- replica holds the contexts of the threads it ran last, extended by the
-- messages its runs' ends wrote (`context_cache.rs`); when the newest row of
-- the thread is the newest row held, nothing was written since and the read
-- can be skipped. The insert already said whether the thread had any
-- message (migration 0018, which has why its snapshot, taken after the
-- thread's lock, sees every message written before the run and why nothing
-- else writes the thread's history until the run ends); it now says the id
-- of the newest row of the thread, a message or a summary (NULL: none).
-- Ids only grow and a thread's history is only ever deleted whole, so an
-- equal id means the same rows as held: one probe of `messages_thread`.
--
-- New functions, since the old ones' result types cannot change. The old
-- ones, which replicas of the previous version keep calling during a rolling
-- upgrade, become calls of the new ones, so the insert is written once.
-- Migration 0023's insert is kept unchanged.
CREATE FUNCTION hearth_store_run_seeing_newest(
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
) RETURNS TABLE (run runs, newest_message BIGINT) LANGUAGE plpgsql VOLATILE AS $$
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
    RETURNING runs, (SELECT max(messages.id) FROM messages
        WHERE messages.thread_key = p_thread_key);
END
$$;

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
) RETURNS TABLE (run runs, had_messages BOOLEAN) LANGUAGE sql VOLATILE AS $$
    SELECT stored.run, stored.newest_message IS NOT NULL
    FROM hearth_store_run_seeing_newest(p_run_id, p_thread_key, p_user_key, p_source,
        p_input, p_idempotency_key, p_status, p_created_at, p_scope, p_roles, p_lease_owner,
        p_lease_until, p_model, p_mode, p_parent_run_id, p_assumes_defaults) AS stored
$$;

-- Several runs in one statement, as `hearth_store_runs_assuming_defaults`
-- (0021; 0019 has why the locks are taken first and in that order).
CREATE FUNCTION hearth_store_runs_seeing_newest(
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
) RETURNS TABLE (i INTEGER, run runs, newest_message BIGINT) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    k INTEGER;
    lock_key INTEGER;
BEGIN
    FOR lock_key IN SELECT DISTINCT hashtext(t) FROM unnest(p_thread_key) AS t ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1751474546, lock_key);
    END LOOP;
    FOR k IN 1 .. coalesce(array_length(p_run_id, 1), 0) LOOP
        RETURN QUERY SELECT k, stored.run, stored.newest_message
            FROM hearth_store_run_seeing_newest(p_run_id[k], p_thread_key[k],
                p_user_key[k], p_source[k], p_input[k], p_idempotency_key[k], p_status[k],
                p_created_at[k], p_scope[k], p_roles[k], p_lease_owner[k], p_lease_until[k],
                p_model[k], p_mode[k], p_parent_run_id[k], p_assumes_defaults[k]) AS stored;
    END LOOP;
END
$$;
