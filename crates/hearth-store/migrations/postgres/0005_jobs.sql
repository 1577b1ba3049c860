-- Jobs fire on one replica at a time (the holder of the `jobs` lease); a job
-- added, changed or removed on another replica wakes the holder at once
-- (`hearth_jobs`, no payload), so a job due soon is not late by a round.
CREATE FUNCTION hearth_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hearth_jobs', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify AFTER INSERT OR UPDATE OR DELETE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION hearth_jobs_notify();
