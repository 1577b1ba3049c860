-- Every change to who may do what (API tokens, grants) is told to the
-- replicas (issue 19, throughput: every request asked the database about
-- tokens and every run about its user's grants, most of a run's reads).
-- A replica holds the count of live tokens, the holders and the grants it
-- read while it listens, and drops them all on this notification
-- (`src/postgres/access_cache.rs`). Statement triggers, so a statement that
-- changes many rows notifies once; these change seldom, so the lock a
-- notifying commit takes is rarely contended.
CREATE FUNCTION hearth_access_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hearth_access', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_tokens_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION hearth_access_notify();

CREATE TRIGGER grants_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON grants
    FOR EACH STATEMENT EXECUTE FUNCTION hearth_access_notify();
