-- Other bots' app manifests: imported versions (pending, then approved with
-- the approver's consent) and the version each Discord guild has enabled.
-- Same columns as SQLite's, so `hearth store copy-to-postgres` copies them.
CREATE TABLE app_versions (
    app TEXT NOT NULL,
    version TEXT NOT NULL,
    manifest TEXT NOT NULL,
    status TEXT NOT NULL,
    public_dispatch_consent BOOLEAN NOT NULL DEFAULT FALSE,
    imported_at BIGINT NOT NULL,
    imported_by TEXT NOT NULL,
    approved_at BIGINT,
    approved_by TEXT,
    PRIMARY KEY (app, version)
);
CREATE TABLE app_guilds (
    guild_id TEXT NOT NULL,
    app TEXT NOT NULL,
    version TEXT NOT NULL,
    enabled_at BIGINT NOT NULL,
    enabled_by TEXT NOT NULL,
    PRIMARY KEY (guild_id, app)
);
