-- Messages that arrive together are stored by one statement (issue 19,
-- throughput). Each message was its own statement and its own commit, the
-- second forced commit of every run beside its end's; a replica now sends
-- the messages that came in while one such statement was in flight
-- together, as it does their runs' ends (`postgres/run_queue.rs`).
--
-- The function takes every thread's lock first, in the order of the locks'
-- keys, then stores each run in the order given, by the very function that
-- stores one (migration 0018, which has the why of the lock and of the
-- insert): its lock is then taken again by the transaction that holds it,
-- which grants it at once. The order matters: two statements each holding
-- one thread's lock and waiting for the other's would deadlock, and
-- PostgreSQL would only see it after `deadlock_timeout` (1 s). Taken in one
-- order, the second waits for the first's commit. Every other taker of a
-- thread's lock holds one and no other lock a batch waits for, so no cycle
-- can form with them either.
--
-- Two messages of one thread in one batch are stored in their order: the
-- second sees the first unfinished and is stored queued, as it would be
-- stored alone after it. Two with one idempotency key: the second yields
-- to the first (no row for it), as it would alone.
--
-- Returns, for each run given (`i`, from 1), the stored run and whether its
-- thread had a message, or no row when its idempotency key was taken.
CREATE FUNCTION hearth_store_runs(
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
    p_parent_run_id TEXT[]
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
            FROM hearth_store_run_seeing_history(p_run_id[k], p_thread_key[k], p_user_key[k],
                p_source[k], p_input[k], p_idempotency_key[k], p_status[k], p_created_at[k],
                p_scope[k], p_roles[k], p_lease_owner[k], p_lease_until[k], p_model[k],
                p_mode[k], p_parent_run_id[k]) AS stored;
    END LOOP;
END
$$;
