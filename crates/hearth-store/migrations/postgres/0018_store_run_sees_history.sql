-- Storing a run says whether its thread has any stored message (issue 19,
-- throughput). A run stored claimed on a thread with no message at all (the
-- first message of a thread) starts from an empty history, and without this
-- it read that empty history in a statement of its own: one of a run's six.
--
-- The same lock and insert as `hearth_store_run` (migration 0016, which has
-- the why of both), with one more column: whether a message of the thread
-- exists. It is asked in the insert's RETURNING, so in the insert's
-- snapshot, taken after the thread's lock was granted. Every run of the
-- thread that ended before that snapshot wrote its messages in its end's
-- one transaction, so they are seen; and when the run is stored claimed, no
-- run of the thread is unfinished in that snapshot, so until this run ends
-- nothing else writes the thread's history (only a thread's runs do: their
-- ends, their compaction summaries). `false` then means the history the run
-- would read at its start is empty. A run stored queued may be preceded by
-- another, so the column says nothing about its start; the caller uses it
-- only for a run stored claimed.
--
-- A new function, since the old one's result type cannot change; the old
-- `hearth_store_run`, which replicas of the previous version keep calling
-- during a rolling upgrade (and this version for a run stored queued),
-- becomes a call of the new one (the end of this file), so the insert is
-- written once.
CREATE FUNCTION hearth_store_run_seeing_history(
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
        CASE WHEN busy THEN NULL ELSE NULLIF(p_model, '') END,
        CASE WHEN busy THEN NULL ELSE p_mode END,
        p_parent_run_id,
        busy OR p_status = 'queued'
    FROM (SELECT EXISTS (SELECT 1 FROM runs WHERE runs.thread_key = p_thread_key
          AND runs.status IN ('queued', 'running', 'awaiting_confirmation')) AS busy) AS thread
    ON CONFLICT (thread_key, idempotency_key) WHERE idempotency_key IS NOT NULL
    DO NOTHING
    RETURNING runs, EXISTS (SELECT 1 FROM messages WHERE messages.thread_key = p_thread_key);
END
$$;

-- The run alone, as before: the lock and the insert are the new function's
-- (each of its statements takes its own snapshot; this one only reads the
-- row it returns).
CREATE OR REPLACE FUNCTION hearth_store_run(
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
) RETURNS SETOF runs LANGUAGE sql VOLATILE AS $$
    SELECT (stored.run).* FROM hearth_store_run_seeing_history(p_run_id, p_thread_key,
        p_user_key, p_source, p_input, p_idempotency_key, p_status, p_created_at, p_scope,
        p_roles, p_lease_owner, p_lease_until, p_model, p_mode, p_parent_run_id) AS stored
$$;
