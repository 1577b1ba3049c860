-- The daily usage rollup in stripes (issue 19, throughput): every run's end
-- adds its model call to the row of (day, provider, model), and with one row
-- per key every end waited for the one before to commit (its row lock is
-- held through the commit's WAL flush), so ends committed one at a time and
-- could not share a flush. Measured at concurrency 64 on one replica: about
-- 3 of the pool's 8 connections waiting on that row (`Lock:transactionid`)
-- at any instant (BENCHMARKS.md, docs/scaling.md).
--
-- Each writer adds to the stripe of its own server process
-- (`pg_backend_pid() % 32`), so two ends collide only when their backends do;
-- one backend runs one transaction at a time. Readers already sum the rows
-- of a key (`GROUP BY`), so they see the same totals. Existing rows become
-- stripe 0, which is also what `hearth store copy-to-postgres` writes (SQLite
-- has one writer and no stripes).
ALTER TABLE usage_daily ADD COLUMN stripe SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily ADD PRIMARY KEY (day, provider, model, stripe);
