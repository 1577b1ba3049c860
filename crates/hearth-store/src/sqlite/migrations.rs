//! Versioned schema migrations, tracked with `PRAGMA user_version`.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Result, StoreError};

/// Every migration, in order: `(version, SQL)`. Versions start at 1 and grow by
/// one; a released migration is never edited, only followed by a new one.
pub(crate) const MIGRATIONS: &[(u32, &str)] = &[
    (1, V1),
    (2, V2),
    (3, V3),
    (4, V4),
    (5, V5),
    (6, V6),
    (7, super::memory::MIGRATION_V7),
    (8, V8),
    (9, super::outbox::MIGRATION_V9),
    (10, V10),
    (11, super::history::MIGRATION_V11),
    (12, super::jobs::MIGRATION_V12),
    (13, super::router::MIGRATION_V13),
    (14, super::reply_messages::MIGRATION_V14),
    (15, V15),
    (16, V16),
    (17, super::memory::MIGRATION_V17),
    (18, super::secrets::MIGRATION_V18),
    (19, V19),
    (20, super::tokens::MIGRATION_V20),
    (21, super::memory::MIGRATION_V21),
    (22, V22),
    (23, super::apps::MIGRATION_V23),
    (24, V24),
    (25, super::memory::MIGRATION_V25),
];

/// The schema version this build writes.
pub(crate) const LATEST: u32 = 25;

/// Work a migration's SQL cannot do, run after it in its transaction.
type Backfill = fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>;

/// The migrations followed by a [`Backfill`].
const BACKFILLS: &[(u32, Backfill)] = &[(21, super::memory::backfill_compact_vectors)];

/// Sub-agents: the run whose `delegate` call started a run, indexed so a
/// parent finds its children with one probe. Children stored before it was
/// are found by their idempotency key, `delegate:<parent>:<call>`.
const V22: &str = "ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
UPDATE runs SET parent_run_id = substr(idempotency_key, 10, instr(substr(idempotency_key, 10), ':') - 1)
 WHERE source = 'delegate' AND idempotency_key LIKE 'delegate:%:%'
   AND instr(substr(idempotency_key, 10), ':') > 1;
CREATE INDEX runs_parent ON runs (parent_run_id, seq) WHERE parent_run_id IS NOT NULL;";

/// The dashboard on a big home: the daily usage rollup
/// (`usage_daily!` in `usage.rs`), the full-text index of messages for
/// thread search (`messages_fts!` in `search.rs`), one user's runs newest
/// first (the runs filter by user), and the users of a thread (whether a
/// thread is a member's own: `thread_has_other_users`).
const V24: &str = concat!(
    super::usage::usage_daily!(),
    super::search::messages_fts!(),
    "
CREATE INDEX runs_user_seq ON runs (user_key, seq);
CREATE INDEX runs_thread_user ON runs (thread_key, user_key);
"
);

/// Permission modes: a thread's mode and when it lapses (`NULL`: the
/// configured default, never), and the mode a run started with, which a
/// claim after a restart keeps.
const V19: &str = "ALTER TABLE threads ADD COLUMN mode TEXT;
ALTER TABLE threads ADD COLUMN mode_expires_at INTEGER;
ALTER TABLE runs ADD COLUMN mode TEXT;";

/// The model a run was asked to use, kept when failover or the router made
/// another one answer (the run's `model` then names the one that answered).
/// Runs stored before keep `NULL`: their `model` is the one they started with.
const V16: &str = "ALTER TABLE runs ADD COLUMN requested_model TEXT;";

/// Alert webhooks once stored their whole URL, credentials included, as the
/// outbox target (shown by `GET /v1/outbox`), and a failed attempt's error
/// could carry it too. Targets are now `scheme://host#<reference>`, resolved
/// against the configured rules at send time: rows written before keep only
/// their scheme and host (no user, password, path or query) and a reference no
/// rule has, so one still pending fails with a clear error instead of going
/// out; an error that quotes a URL is dropped.
const V15: &str = "
UPDATE outbox SET target = (
    WITH p(scheme, rest) AS (
        SELECT substr(target, 1, instr(target, '://') + 2), substr(target, instr(target, '://') + 3)
    ),
    a(auth) AS (
        SELECT CASE WHEN instr(rest, '/') > 0 THEN substr(rest, 1, instr(rest, '/') - 1) ELSE rest END FROM p
    ),
    b(auth) AS (
        SELECT CASE WHEN instr(auth, '?') > 0 THEN substr(auth, 1, instr(auth, '?') - 1) ELSE auth END FROM a
    ),
    c(host) AS (
        SELECT CASE WHEN instr(auth, '@') > 0 THEN substr(auth, instr(auth, '@') + 1) ELSE auth END FROM b
    )
    SELECT scheme || host || '#stored-before-references' FROM p, c
)
WHERE channel = 'webhook' AND instr(target, '#') = 0 AND instr(target, '://') > 0;
UPDATE outbox SET last_error = 'an error from before webhook addresses were withheld'
WHERE channel = 'webhook' AND instr(last_error, '://') > 0;
";

/// The permission context of a run (the space it was asked in and the
/// sender's role ids, a JSON array), so a run recovered after a restart is
/// checked where it was asked; runs stored before keep `NULL` and `[]`. The
/// index serves a space's run statistics.
const V10: &str = "
ALTER TABLE runs ADD COLUMN scope TEXT;
ALTER TABLE runs ADD COLUMN roles TEXT NOT NULL DEFAULT '[]';
CREATE INDEX IF NOT EXISTS runs_scope_created ON runs (scope, created_at)
    WHERE scope IS NOT NULL;
";

/// The id of a finished run's terminal event, so a replay from the store
/// numbers it as the live stream did (SSE `Last-Event-ID` resumes across
/// the eviction of the live log).
const V8: &str = "ALTER TABLE runs ADD COLUMN last_event_seq INTEGER;";

/// Confirmations of write-class tool calls. The token is kept only as its
/// SHA-256; a call has at most one confirmation, so a resumed run finds the
/// one it asked for instead of asking again.
const V6: &str = "
CREATE TABLE IF NOT EXISTS confirmations (
    token_hash TEXT PRIMARY KEY NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    call_id TEXT NOT NULL,
    thread_key TEXT NOT NULL,
    user_key TEXT NOT NULL,
    tool TEXT NOT NULL,
    summary TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    resolved_by TEXT,
    resolved_at INTEGER,
    UNIQUE (run_id, call_id)
);
CREATE INDEX IF NOT EXISTS confirmations_thread ON confirmations (thread_key, state);
";

/// Permission grants and the audit log (ids only, never message text).
/// `IF NOT EXISTS` so a file rolled back to an older version number with its
/// tables kept (as tests and manual downgrades do) still migrates.
const V5: &str = "
CREATE TABLE IF NOT EXISTS grants (
    subject TEXT NOT NULL,
    capability TEXT NOT NULL,
    scope TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    granted_by TEXT NOT NULL,
    PRIMARY KEY (subject, capability, scope)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS grants_scope ON grants (scope);

CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    outcome TEXT NOT NULL,
    capability TEXT,
    scope TEXT
);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
";

/// Sealed secrets (see `crate::secrets`): only ciphertext is stored; the
/// master key that opens it never touches the database.
const V4: &str = "
CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    sealed BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
";

/// One row per model call, for usage and cost: ids, counts and timings only,
/// never prompt or output text. Written with the call's journal step.
const V3: &str = "
CREATE TABLE llm_calls (
    run_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    at INTEGER NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cached_tokens INTEGER,
    reasoning_tokens INTEGER,
    cache_write_tokens INTEGER,
    latency_ms INTEGER NOT NULL,
    status TEXT NOT NULL,
    error_kind TEXT,
    thread_key TEXT,
    user_key TEXT,
    PRIMARY KEY (run_id, idx)
);
CREATE INDEX llm_calls_at ON llm_calls (at);
";

/// Messages steered into a running run, stored before they are acknowledged.
const V2: &str = "
CREATE TABLE run_steers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    text TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX run_steers_run ON run_steers (run_id, id);
";

const V1: &str = "
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
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
    lease_until INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX runs_thread_idempotency ON runs (thread_key, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_thread_seq ON runs (thread_key, seq);
-- Finished runs drop their lease, so this stays as small as the live set and
-- keeps the lease heartbeat from scanning the whole history.
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE run_steps (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    tokens TEXT,
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;

CREATE TABLE threads (
    thread_key TEXT PRIMARY KEY NOT NULL,
    model TEXT,
    thinking TEXT NOT NULL DEFAULT 'off',
    incognito INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_key TEXT NOT NULL,
    run_id TEXT,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX messages_thread ON messages (thread_key, id);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    hash_hex TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
";

/// Brings the database up to [`LATEST`], one transaction per migration, and
/// refuses a database written by a newer hearth.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    check_not_too_new(
        user_version(conn).map_err(|source| StoreError::Migration { version: 0, source })?,
    )?;
    for &(version, sql) in MIGRATIONS {
        // IMMEDIATE takes the write lock before re-reading the version, so two
        // processes opening the same fresh file cannot both apply a migration.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| StoreError::Migration { version, source })?;
        let current =
            user_version(&tx).map_err(|source| StoreError::Migration { version, source })?;
        check_not_too_new(current)?;
        if current >= version {
            continue;
        }
        let backfill = BACKFILLS.iter().find(|(v, _)| *v == version);
        tx.execute_batch(sql)
            .and_then(|()| backfill.map_or(Ok(()), |(_, fill)| fill(&tx)))
            .and_then(|()| tx.pragma_update(None, "user_version", version))
            .and_then(|()| tx.commit())
            .map_err(|source| StoreError::Migration { version, source })?;
        tracing::debug!(version, "applied database migration");
    }
    Ok(())
}

/// The schema version stored in the database header.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

fn check_not_too_new(found: u32) -> Result<()> {
    if found > LATEST {
        return Err(StoreError::TooNew {
            found,
            supported: LATEST,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database as a hearth of schema `version` left it (its SQL only,
    /// as the migrations of that time wrote it).
    fn at_version(version: u32) -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        let tx = conn.transaction().unwrap();
        for &(v, sql) in MIGRATIONS.iter().filter(|(v, _)| *v <= version) {
            tx.execute_batch(sql).unwrap();
            tx.pragma_update(None, "user_version", v).unwrap();
        }
        tx.commit().unwrap();
        conn
    }

    #[test]
    fn webhook_targets_stored_whole_keep_only_scheme_and_host() {
        let mut conn = at_version(14);
        let rows = [
            (
                "webhook",
                "https://user:hunter2@hooks.example:8443/a/b?token=SECRET",
                Some(
                    "error sending request for url (https://user:hunter2@hooks.example:8443/a/b?token=SECRET)",
                ),
            ),
            ("webhook", "http://127.0.0.1:9/hook", None),
            ("webhook", "https://hooks.example#0123456789abcdef", None),
            ("telegram", "12345", Some("HTTP 502")),
        ];
        for (channel, target, error) in rows {
            conn.execute(
                "INSERT INTO outbox (channel, target, kind, payload, last_error, created_at) VALUES (?1, ?2, 'message', '{}', ?3, 0)",
                rusqlite::params![channel, target, error],
            )
            .unwrap();
        }
        migrate(&mut conn).unwrap();
        let mut stmt = conn
            .prepare("SELECT target, last_error FROM outbox ORDER BY id")
            .unwrap();
        let got: Vec<(String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            got,
            vec![
                (
                    "https://hooks.example:8443#stored-before-references".to_owned(),
                    Some("an error from before webhook addresses were withheld".to_owned())
                ),
                (
                    "http://127.0.0.1:9#stored-before-references".to_owned(),
                    None
                ),
                ("https://hooks.example#0123456789abcdef".to_owned(), None),
                ("12345".to_owned(), Some("HTTP 502".to_owned())),
            ]
        );
    }

    /// Calls stored before the rollup are summed into it by the migration,
    /// and later ones are added as they are inserted.
    #[test]
    fn the_usage_rollup_is_backfilled_then_kept() {
        let mut conn = at_version(20);
        let insert = "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, \
             input_tokens, output_tokens, latency_ms, status) \
             VALUES (?1, 0, ?2, 'p', ?3, 'answer', ?4, ?5, 1, 'ok') ON CONFLICT DO NOTHING";
        let day = 86_400_000_i64;
        for (id, at, model, i, o) in [
            ("r1", day + 1, "m", Some(10), Some(1)),
            ("r2", day + 2, "m", None, None),
            ("r3", 2 * day, "n", Some(5), Some(5)),
        ] {
            conn.execute(insert, rusqlite::params![id, at, model, i, o])
                .unwrap();
        }
        migrate(&mut conn).unwrap();
        for (id, at, model, i, o) in [
            ("r4", day + 3, "m", Some(1), Some(1)),
            ("r4", day + 3, "m", Some(1), Some(1)),
        ] {
            conn.execute(insert, rusqlite::params![id, at, model, i, o])
                .unwrap();
        }
        let mut stmt = conn
            .prepare(
                "SELECT day, model, calls, untracked_calls, input_tokens, output_tokens \
                 FROM usage_daily ORDER BY day, model",
            )
            .unwrap();
        let got: Vec<(i64, String, i64, i64, i64, i64)> = stmt
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            got,
            vec![
                (1, "m".to_owned(), 3, 1, 11, 2),
                (2, "n".to_owned(), 1, 0, 5, 5)
            ]
        );
    }

    /// Messages stored before the search index are indexed by the
    /// migration (their text parts; a content that is not JSON whole), and
    /// later ones as they are written or deleted.
    #[test]
    fn messages_are_indexed_for_search_by_the_migration_then_kept() {
        let mut conn = at_version(20);
        let insert = "INSERT INTO messages (thread_key, role, content, created_at) \
                      VALUES (?1, 'user', ?2, 1)";
        conn.execute(insert, ["t1", r#"[{"type":"text","text":"old heron"}]"#])
            .unwrap();
        conn.execute(insert, ["t2", "not json heron"]).unwrap();
        migrate(&mut conn).unwrap();
        conn.execute(insert, ["t3", r#"[{"type":"text","text":"new heron"}]"#])
            .unwrap();
        conn.execute("DELETE FROM messages WHERE thread_key = 't2'", [])
            .unwrap();
        let found = |word: &str| -> Vec<i64> {
            let mut stmt = conn
                .prepare(
                    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?1 ORDER BY rowid",
                )
                .unwrap();
            stmt.query_map([word], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        assert_eq!(found("heron"), [1, 3]);
        assert_eq!(found("old"), [1]);
        assert!(
            found("type").is_empty(),
            "the JSON around the text is not indexed"
        );
    }

    #[test]
    fn embeddings_stored_before_get_their_compact_copy() {
        let mut conn = at_version(20);
        let v = [0.5_f32, -1.0, 0.25];
        for (user, thread, embedding) in [
            ("u", None, Some(crate::memory::vector_to_bytes(&v))),
            ("w", Some("t"), Some(crate::memory::vector_to_bytes(&v))),
            ("x", None, None),
        ] {
            conn.execute(
                "INSERT INTO memories (user_key, thread_key, text, created_at, last_used_at, \
                 embedding, embedding_model) VALUES (?1, ?2, ?1 || ifnull(?2, ''), 0, 0, ?3, 'm')",
                rusqlite::params![user, thread, embedding],
            )
            .unwrap();
        }
        migrate(&mut conn).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT user_key, memory_id, thread_key, model, compact FROM memory_vectors \
                 ORDER BY memory_id",
            )
            .unwrap();
        type Row = (String, i64, Option<String>, String, Vec<u8>);
        let got: Vec<Row> = stmt
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let compact = crate::nearest::compact_vector(&v);
        assert_eq!(
            got,
            vec![
                ("u".into(), 1, None, "m".into(), compact.clone()),
                ("w".into(), 2, Some("t".into()), "m".into(), compact),
            ]
        );
    }

    #[test]
    fn children_stored_before_the_column_get_their_parent_from_their_key() {
        let mut conn = at_version(21);
        let runs = [
            ("run_p", "t:1", "api", None),
            (
                "run_c",
                "t:1/sub/1.1",
                "delegate",
                Some("delegate:run_p:call_7"),
            ),
            // Not a sub-agent: a key of the same shape from another source.
            ("run_x", "t:2", "api", Some("delegate:run_p:call_8")),
            ("run_y", "t:3/sub/1.1", "delegate", Some("delegate:")),
        ];
        for (id, thread, source, key) in runs {
            conn.execute(
                "INSERT INTO runs (run_id, thread_key, user_key, source, input, idempotency_key, status, created_at, updated_at) VALUES (?1, ?2, 'u', ?3, 'x', ?4, 'succeeded', 0, 0)",
                rusqlite::params![id, thread, source, key],
            )
            .unwrap();
        }
        migrate(&mut conn).unwrap();
        let mut stmt = conn
            .prepare("SELECT run_id, parent_run_id FROM runs ORDER BY seq")
            .unwrap();
        let got: Vec<(String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let parent = |id: &str| got.iter().find(|(r, _)| r == id).unwrap().1.clone();
        assert_eq!(parent("run_c").as_deref(), Some("run_p"));
        assert_eq!(parent("run_p"), None);
        assert_eq!(parent("run_x"), None);
        assert_eq!(parent("run_y"), None);
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT run_id FROM runs WHERE parent_run_id = 'run_p' ORDER BY seq",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("runs_parent"), "{plan}");
    }

    #[test]
    fn versions_are_consecutive_and_end_at_latest() {
        for (i, (version, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version as usize, i + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.0), Some(LATEST));
    }
}
