-- Concurrent runs that commit together (issue 19, throughput). At
-- concurrency 64 on one replica, run ends committed one at a time: first
-- behind one row of the usage rollup, then behind NOTIFY. Both held a lock
-- through the commit's WAL flush, so no two ends could share a flush
-- (BENCHMARKS.md and docs/scaling.md have the measurements).
--
-- 1. The daily usage rollup in stripes. Every run's end adds its model call
-- to the row of (day, provider, model), and waited for the end before it to
-- commit (its row lock is held to the commit): about 3 of the pool's 8
-- connections waited so (`Lock:transactionid`) at any instant. Each writer
-- now adds to the stripe of its own server process (`pg_backend_pid() %
-- 32`), so two ends collide only when their backends do (one backend runs
-- one transaction at a time). Readers already sum the rows of a key (`GROUP
-- BY`). Existing rows become stripe 0, which is also what `hearth store
-- copy-to-postgres` writes (SQLite has one writer and no stripes).
ALTER TABLE usage_daily ADD COLUMN stripe SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily ADD PRIMARY KEY (day, provider, model, stripe);

-- 2. `hearth_ended` only for a run another replica may hold a log of. A
-- transaction that notifies takes one lock of the whole cluster at its
-- commit and keeps it through the WAL flush (so that notifications arrive
-- in commit order); with the usage rows striped, about 4 of 8 connections
-- waited for it (`Lock:object`). Most runs are stored claimed by the replica
-- that took their message, run there and end there: nobody else has a log
-- to end. `runs.watched` says somebody may: the run was stored queued (any
-- replica may claim it, the one that stored it has a log), it was claimed
-- by a replica other than the one holding it before, another replica
-- follows it (`?wait=`, its events) or cancels it. Those write `watched`
-- before they read the run or end it; the end's update waits for (and then
-- sees) a `watched` committed on the row before it, and a follower that
-- marks the row after the end committed reads the run ended. Unfinished
-- runs stored before this migration are watched, as every run was.
ALTER TABLE runs ADD COLUMN watched BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE runs ALTER COLUMN watched SET DEFAULT FALSE;

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
    END IF;
    RETURN NULL;
END
$$;
