-- A version for each block of compact vectors, new on every rewrite, so a
-- replica that keeps a user's blocks in memory (`[memory] vector_cache_mb`)
-- can tell, from a list of ids and versions, which blocks it holds are
-- still current and fetch only the others. Versions come from one
-- sequence, so no two states of any block share one, even across a block
-- deleted and an id used again.
CREATE SEQUENCE memory_block_versions;
ALTER TABLE memory_blocks
    ADD COLUMN version BIGINT NOT NULL DEFAULT nextval('memory_block_versions');

-- As in migration 13, and every rewrite takes a new version. Every writer
-- of `entries` goes through this function (a save that packs the tail, a
-- vector embedded again, the delete trigger, the fill), so none can change
-- a block and leave its version.
CREATE OR REPLACE FUNCTION hearth_rebuild_memory_blocks(blocks BIGINT[]) RETURNS void
LANGUAGE sql VOLATILE AS $$
    UPDATE memory_blocks b
    SET count = v.n, entries = v.entries, version = nextval('memory_block_versions')
    FROM (
        SELECT block_id, count(*)::int AS n,
               string_agg(int8send(memory_id) || int4send(length(compact)) || compact,
                          ''::bytea ORDER BY memory_id) AS entries
        FROM memory_vectors WHERE block_id = ANY(blocks) GROUP BY block_id
    ) v
    WHERE b.id = v.block_id;
    DELETE FROM memory_blocks b
    WHERE b.id = ANY(blocks)
      AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.block_id = b.id);
$$;
