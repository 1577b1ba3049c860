-- Several replicas deliver one outbox: a conversation's head item is claimed
-- by the replica sending it (until its claim lapses), so each reply is sent
-- once and a conversation's replies keep their order whichever replica
-- sends them.
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until BIGINT;
