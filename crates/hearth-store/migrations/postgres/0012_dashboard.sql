-- The dashboard on a big home, in one migration: the daily usage rollup,
-- thread search, and the indexes of the runs filter by user and of a
-- member's thread ownership.
--
-- The daily usage rollup: one row per UTC day (the call time truncated to
-- whole seconds, then floored to days, as SQLite counts it), provider and
-- model, with the sums of its calls, so the usage pages read a few rows per
-- day instead of every call. The statement that inserts an `llm_calls` row
-- adds it here (a data-modifying WITH, so a duplicate ignored on conflict
-- adds nothing); `llm_calls` rows are never updated or deleted. Existing
-- calls are summed in. Same columns as SQLite's `usage_daily`, so `hearth
-- store copy-to-postgres` copies it.
CREATE TABLE usage_daily (
    day BIGINT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    calls BIGINT NOT NULL,
    untracked_calls BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cached_tokens BIGINT NOT NULL,
    reasoning_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    PRIMARY KEY (day, provider, model)
);

INSERT INTO usage_daily (day, provider, model, calls, untracked_calls, input_tokens,
    output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens)
SELECT (at / 1000) / 86400 - ((at / 1000) % 86400 < 0)::INT, provider, model, count(*),
    count(*) FILTER (WHERE input_tokens IS NULL AND output_tokens IS NULL),
    coalesce(sum(input_tokens), 0)::BIGINT, coalesce(sum(output_tokens), 0)::BIGINT,
    coalesce(sum(cached_tokens), 0)::BIGINT, coalesce(sum(reasoning_tokens), 0)::BIGINT,
    coalesce(sum(cache_write_tokens), 0)::BIGINT
FROM llm_calls GROUP BY 1, 2, 3;

-- Thread search on the dashboard: thread keys by prefix in byte order (the
-- `C` collation, as SQLite compares them), and messages by the words people
-- and the model wrote: the text parts of each message's content (its JSON's
-- `text` fields; a content that is not a JSON array as it is), not the JSON
-- around them, as SQLite's `messages_fts` indexes them.
CREATE INDEX runs_thread_key_c ON runs (thread_key COLLATE "C");

CREATE FUNCTION hearth_message_words(content TEXT) RETURNS TSVECTOR
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN to_tsvector('simple', coalesce(
        (SELECT string_agg(part->>'text', ' ') FROM jsonb_array_elements(content::jsonb) AS part),
        ''));
EXCEPTION WHEN others THEN
    RETURN to_tsvector('simple', content);
END
$$;

CREATE INDEX messages_words ON messages USING GIN (hearth_message_words(content));

-- One user's runs newest first (the runs filter by user), and the users of
-- a thread (whether a thread is a member's own: two index seeks).
CREATE INDEX runs_user_seq ON runs (user_key, seq);
CREATE INDEX runs_thread_user ON runs (thread_key, user_key);
