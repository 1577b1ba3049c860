-- Communities' provider keys (sealed), kept once removed as a row without
-- its key, so the scope's runs know it had one. Same columns as SQLite's
-- `scope_credentials`, so `hearth store copy-to-postgres` copies it.
CREATE TABLE scope_credentials (
    scope TEXT NOT NULL,
    provider TEXT NOT NULL,
    sealed BYTEA,
    set_at BIGINT NOT NULL,
    removed_at BIGINT,
    PRIMARY KEY (scope, provider)
);
