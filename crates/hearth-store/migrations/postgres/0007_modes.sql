-- Permission modes: a thread's mode and when it lapses (NULL: the configured
-- default, never), and the mode a run started with, which a claim after a
-- restart keeps.
ALTER TABLE threads ADD COLUMN mode TEXT;
ALTER TABLE threads ADD COLUMN mode_expires_at BIGINT;
ALTER TABLE runs ADD COLUMN mode TEXT;
