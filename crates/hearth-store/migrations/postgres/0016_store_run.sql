-- Storing a run in one statement (issue 19, throughput). A message was
-- stored with four statements sent together: BEGIN, the thread's advisory
-- lock, the insert, COMMIT. PostgreSQL parsed, ran and answered each, and on
-- a CPU-bound server every statement of a run costs throughput
-- (docs/scaling.md, "What bounds throughput"). This function is the lock and
-- the insert in one call: `src/postgres/run_insert.rs` sends it as one
-- statement, in a transaction of its own (autocommit) or inside a caller's.
--
-- The lock. `pg_advisory_xact_lock(class, hashtext(thread))`, the class
-- "hear" (0x68656172 = 1751474546, `THREAD_LOCK_CLASS`), held to the end of
-- the transaction the call is part of: the inserts of one thread commit one
-- at a time, in the order of their `seq`.
--
-- The snapshot. The insert decides "claimed or queued" from what it sees of
-- the thread's unfinished runs, so it must see every run of the thread
-- committed before the lock was granted: otherwise two replicas storing a
-- message on an idle thread at the same instant both see it idle and both
-- store their run claimed. In PL/pgSQL, each statement of a VOLATILE
-- function takes a new snapshot under READ COMMITTED (hearth's isolation on
-- every connection), so the INSERT's snapshot is taken after the PERFORM
-- that waited for the lock returned; the one the calling SELECT took before
-- is not used by it. (A STABLE or IMMUTABLE function would reuse the
-- caller's snapshot: this one must stay VOLATILE.) The holder of the lock
-- before us released it only after its commit was visible, so we see its run.
--
-- The insert, as it was (one text for both paths): stored claimed (status,
-- lease, model, mode from the arguments) only when its thread has nothing
-- unfinished, since a replica that believes the thread idle may not know
-- that another replica runs an earlier message of it, and order comes first;
-- watched (its end notified, migration 0015) unless stored claimed, since a
-- queued run may be claimed by another replica than the one that stored it.
-- A run whose idempotency key is taken on its thread is not inserted and
-- nothing is returned (the caller reads the twin).
CREATE FUNCTION hearth_store_run(
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
) RETURNS SETOF runs LANGUAGE plpgsql VOLATILE AS $$
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
    RETURNING *;
END
$$;
