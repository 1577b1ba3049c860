-- Less work in every run's end (issue 19, throughput: PostgreSQL is
-- CPU-bound on a small machine, and a run's end is most of a run's work
-- there; docs/scaling.md, "What bounds throughput").
--
-- 1. An end written by the one-statement end (`src/postgres/finish.rs`)
-- sends its own notifications. The row trigger `runs_notify_update` ran a
-- PL/pgSQL function on every end: building the old and new rows of the
-- wide `runs` row, a query for the thread's next queued run, then
-- `hearth_ended` when the run was watched. That was about a fifth of the
-- end statement's time. The end statement already asks whether a later run
-- of the thread is queued (the replica then claims it at once), so it
-- sends `hearth_work` on that answer and `hearth_ended` when the run is
-- watched, in the same statement (delivered at its commit, as a trigger's
-- are), and marks the row `notified_by_end` so the trigger skips it.
-- Every other writer (the end of several statements, a cancel, a new
-- session, a lease given up, and a replica of the previous version during
-- a rolling upgrade) leaves the mark false and the trigger notifies for
-- it as before. A run's end is final, so the mark never hides a later
-- change of the row.
ALTER TABLE runs ADD COLUMN notified_by_end BOOLEAN NOT NULL DEFAULT FALSE;
DROP TRIGGER runs_notify_update ON runs;
CREATE TRIGGER runs_notify_update AFTER UPDATE OF status, lease_owner ON runs
    FOR EACH ROW
    WHEN ((OLD.status IS DISTINCT FROM NEW.status
           OR OLD.lease_owner IS DISTINCT FROM NEW.lease_owner)
          AND NOT NEW.notified_by_end)
    EXECUTE FUNCTION hearth_runs_notify();

-- 2. The words of a message for its full-text index, without a query per
-- message: the `text` of each part is picked by a JSON path instead of a
-- query over `jsonb_array_elements`, and `to_tsvector` of a JSON array
-- takes the words of its strings. Every run's end indexes two messages.
-- The words found are the same as before for any content (the path is
-- strict, so content that is not a JSON array fails over to its raw words
-- as it did); only their positions differ, by one between parts, which are
-- no longer joined into one string. So the index built with the function
-- before holds the same entries and needs no rebuild (a phrase match, which
-- depends on positions, is checked against this function). The test
-- `message_words_are_the_words_of_the_function_before` compares the two.
CREATE OR REPLACE FUNCTION hearth_message_words(content TEXT) RETURNS TSVECTOR
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN to_tsvector('simple',
        jsonb_path_query_array(content::jsonb, 'strict $[*] ? (exists (@.text)).text'));
EXCEPTION WHEN others THEN
    RETURN to_tsvector('simple', content);
END
$$;
