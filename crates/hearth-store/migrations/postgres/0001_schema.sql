-- hearth on PostgreSQL: the schema SQLite reached at its version 17, written
-- once for PostgreSQL, plus what several replicas share (replicas, leases).
-- Applied by src/postgres/migrations.rs under an advisory lock; a released
-- migration is never edited, only followed by a new file.
--
-- Boundary types as on SQLite: ids are TEXT, times BIGINT unix-ms, JSON TEXT,
-- sealed secrets and embeddings BYTEA; counters and ids BIGINT.

CREATE TABLE runs (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    thread_key TEXT NOT NULL,
    user_key TEXT NOT NULL,
    source TEXT NOT NULL,
    input TEXT NOT NULL,
    idempotency_key TEXT,
    status TEXT NOT NULL,
    output TEXT,
    error_code TEXT,
    error_message TEXT,
    model TEXT,
    lease_owner TEXT,
    lease_until BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    last_event_seq BIGINT,
    scope TEXT,
    roles TEXT NOT NULL DEFAULT '[]',
    requested_model TEXT
);
CREATE UNIQUE INDEX runs_thread_idempotency ON runs (thread_key, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_thread_seq ON runs (thread_key, seq);
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX runs_scope_created ON runs (scope, created_at) WHERE scope IS NOT NULL;
-- What a free replica looks for: the unfinished runs, oldest first.
CREATE INDEX runs_unfinished ON runs (seq)
    WHERE status IN ('queued', 'running', 'awaiting_confirmation');

CREATE TABLE run_steps (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    idx BIGINT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    tokens TEXT,
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE run_steers (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    text TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX run_steers_run ON run_steers (run_id, id);

CREATE TABLE threads (
    thread_key TEXT PRIMARY KEY,
    model TEXT,
    thinking TEXT NOT NULL DEFAULT 'off',
    incognito BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at BIGINT NOT NULL
);

CREATE TABLE messages (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_key TEXT NOT NULL,
    run_id TEXT,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    covers_to BIGINT
);
CREATE INDEX messages_thread ON messages (thread_key, id);
CREATE INDEX messages_summaries ON messages (thread_key, id) WHERE covers_to IS NOT NULL;

-- `seq` orders tokens created in the same millisecond as SQLite's rowid does.
CREATE TABLE api_tokens (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    hash_hex TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);

CREATE TABLE llm_calls (
    run_id TEXT NOT NULL,
    idx BIGINT NOT NULL,
    at BIGINT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    input_tokens BIGINT,
    output_tokens BIGINT,
    cached_tokens BIGINT,
    reasoning_tokens BIGINT,
    cache_write_tokens BIGINT,
    latency_ms BIGINT NOT NULL,
    status TEXT NOT NULL,
    error_kind TEXT,
    thread_key TEXT,
    user_key TEXT,
    PRIMARY KEY (run_id, idx)
);
CREATE INDEX llm_calls_at ON llm_calls (at);

CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    sealed BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE grants (
    subject TEXT NOT NULL,
    capability TEXT NOT NULL,
    scope TEXT NOT NULL,
    granted_at BIGINT NOT NULL,
    granted_by TEXT NOT NULL,
    PRIMARY KEY (subject, capability, scope)
);
CREATE INDEX grants_scope ON grants (scope);

CREATE TABLE audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    outcome TEXT NOT NULL,
    capability TEXT,
    scope TEXT
);
CREATE INDEX audit_at ON audit (at);

CREATE TABLE confirmations (
    token_hash TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    call_id TEXT NOT NULL,
    thread_key TEXT NOT NULL,
    user_key TEXT NOT NULL,
    tool TEXT NOT NULL,
    summary TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    state TEXT NOT NULL,
    resolved_by TEXT,
    resolved_at BIGINT,
    UNIQUE (run_id, call_id)
);
CREATE INDEX confirmations_thread ON confirmations (thread_key, state);

-- Full text through a generated tsvector (the 'english' configuration stems
-- as SQLite's porter tokenizer does). The uniqueness of a fact is on a hash of
-- its text: a B-tree entry cannot hold a long text.
CREATE TABLE memories (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_key TEXT NOT NULL,
    thread_key TEXT,
    text TEXT NOT NULL,
    run_id TEXT,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL,
    embedding BYTEA,
    embedding_model TEXT,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE UNIQUE INDEX memories_unique
    ON memories (user_key, (coalesce(thread_key, '')), (md5(text)));
CREATE INDEX memories_user_created ON memories (user_key, created_at);
CREATE INDEX memories_last_used ON memories (last_used_at);
CREATE INDEX memories_tsv ON memories USING GIN (tsv);

CREATE TABLE outbox (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel TEXT NOT NULL,
    target TEXT NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT,
    payload TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    progress BIGINT NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    next_attempt_at BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX outbox_queue ON outbox (channel, target, id) WHERE status = 'pending';
CREATE INDEX outbox_status ON outbox (status, id);

CREATE TABLE pairings (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    user_key TEXT NOT NULL,
    display_name TEXT NOT NULL,
    target TEXT NOT NULL,
    requested_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    decided_at BIGINT
);
CREATE INDEX pairings_pending ON pairings (channel, user_key) WHERE state = 'pending';

CREATE TABLE channel_allowed (
    channel TEXT NOT NULL,
    user_key TEXT NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (channel, user_key)
);

CREATE TABLE channel_cursors (
    channel TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (channel, name)
);

CREATE TABLE channel_events (
    channel TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seen_at BIGINT NOT NULL,
    PRIMARY KEY (channel, event_id)
);

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    schedule TEXT NOT NULL,
    timezone TEXT NOT NULL,
    thread_key TEXT NOT NULL,
    user_key TEXT NOT NULL,
    text TEXT NOT NULL,
    catch_up TEXT NOT NULL,
    next_run_at BIGINT,
    last_run_at BIGINT,
    last_run_id TEXT,
    enabled BOOLEAN NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE router_arms (
    model TEXT NOT NULL,
    task TEXT NOT NULL,
    successes BIGINT NOT NULL DEFAULT 0,
    failures BIGINT NOT NULL DEFAULT 0,
    runs BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (model, task)
);

CREATE TABLE router_feedback (
    run_id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    task TEXT NOT NULL,
    rating TEXT NOT NULL,
    at BIGINT NOT NULL
);

CREATE TABLE reply_messages (
    channel TEXT NOT NULL,
    target TEXT NOT NULL,
    message_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    sent_at BIGINT NOT NULL,
    PRIMARY KEY (channel, target, message_id)
);
CREATE INDEX reply_messages_sent_at ON reply_messages (sent_at);

-- Several replicas on one database: who is alive, and who holds what.
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    addr TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    runs_executing BIGINT NOT NULL DEFAULT 0
);

-- A named duty one replica at a time performs (a channel's connection, the
-- sweep, retention, jobs), held until `until` unless renewed.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until BIGINT NOT NULL
);
