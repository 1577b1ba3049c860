-- Sub-agents: the run whose `delegate` call started a run, indexed so a
-- parent finds its children with one probe. Children stored before it was
-- are found by their idempotency key, `delegate:<parent>:<call>`.
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
UPDATE runs SET parent_run_id = split_part(idempotency_key, ':', 2)
 WHERE source = 'delegate' AND idempotency_key LIKE 'delegate:%:%'
   AND split_part(idempotency_key, ':', 2) <> '';
CREATE INDEX runs_parent ON runs (parent_run_id, seq) WHERE parent_run_id IS NOT NULL;
