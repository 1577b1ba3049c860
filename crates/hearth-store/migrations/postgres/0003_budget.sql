-- Budget pools shared by replicas (issue 19). The agent works out each
-- pool's amounts; these tables only hold and count them.

-- One row per pool and subject (empty for a global pool): every reservation
-- and settlement locks it, so the check against the limit and the hold are
-- one step across replicas. It also remembers the threshold (80, 100)
-- announced last and in which window, so each is announced once cluster-wide.
CREATE TABLE budget_pools (
    pool TEXT NOT NULL,
    subject TEXT NOT NULL,
    announced_key BIGINT NOT NULL DEFAULT 0,
    announced SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (pool, subject)
);

-- Settled use: a fixed window's in one bucket at its start, a rolling
-- window's per minute.
CREATE TABLE budget_use (
    pool TEXT NOT NULL,
    subject TEXT NOT NULL,
    bucket BIGINT NOT NULL,
    used DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (pool, subject, bucket)
);
CREATE INDEX budget_use_bucket ON budget_use (bucket);

-- Estimates held by calls in flight; one reservation holds in each pool its
-- model draws from. A hold counts while its holder replica heartbeats.
CREATE TABLE budget_holds (
    id TEXT NOT NULL,
    pool TEXT NOT NULL,
    subject TEXT NOT NULL,
    amount DOUBLE PRECISION NOT NULL,
    holder TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (id, pool, subject)
);
CREATE INDEX budget_holds_pool ON budget_holds (pool, subject);
CREATE INDEX budget_holds_holder ON budget_holds (holder);
