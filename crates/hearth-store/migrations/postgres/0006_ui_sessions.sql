-- Dashboard sessions: a login's session id (its SHA-256; the id itself is
-- only in the browser's cookie) bound to the API token it was opened with
-- (its hash), so every replica knows a login and a revoked token ends it.
CREATE TABLE ui_sessions (
    id_hash TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);

-- Tokens bound to a user act as that user (NULL: an operator token).
ALTER TABLE api_tokens ADD COLUMN user_key TEXT;
