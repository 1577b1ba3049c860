//! The store's tests in one binary (one link instead of one per file): the
//! conformance suites on SQLite, and what is particular to SQLite. Each
//! module is a test file under `tests/suite/`.

// clippy's allow-unwrap-in-tests covers only `#[test]` bodies, not helpers.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

mod suite {
    mod access_cache;
    mod budget;
    mod claims;
    mod cluster;
    mod conformance;
    mod copy;
    mod end_batches;
    mod ended;
    mod family;
    mod memory;
    mod outbox_claims;
    mod permissions;
    mod round_trips;
    mod run_batches;
    mod secrets;
    mod settings_batches;
    mod sqlite;
    mod test_databases;
    mod throughput;
    mod wire;
}

use std::path::Path;

use hearth_store::{Durability, SqliteStore};

/// The store of a home in `dir`.
fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(&dir.join("hearth.db"), Durability::Normal).unwrap()
}

/// What undoes each migration a test of an older file must not find done
/// (what a later migration adds without `IF NOT EXISTS`), oldest first: one
/// list, so a new migration adds one line here instead of one in each test.
const UNDO: &[(u32, &str)] = &[
    (4, "DROP TABLE secrets;"),
    (5, "DROP TABLE grants; DROP TABLE audit;"),
    (8, "ALTER TABLE runs DROP COLUMN last_event_seq;"),
    (
        10,
        "DROP INDEX runs_scope_created; ALTER TABLE runs DROP COLUMN scope; \
         ALTER TABLE runs DROP COLUMN roles;",
    ),
    (
        11,
        "DROP INDEX messages_summaries; ALTER TABLE messages DROP COLUMN covers_to;",
    ),
    (16, "ALTER TABLE runs DROP COLUMN requested_model;"),
    (
        17,
        "ALTER TABLE memories DROP COLUMN embedding; \
         ALTER TABLE memories DROP COLUMN embedding_model;",
    ),
    (18, "DROP TABLE scope_credentials;"),
    (
        19,
        "ALTER TABLE threads DROP COLUMN mode; ALTER TABLE threads DROP COLUMN mode_expires_at; \
         ALTER TABLE runs DROP COLUMN mode;",
    ),
    (
        20,
        "DROP TABLE ui_sessions; ALTER TABLE api_tokens DROP COLUMN user_key;",
    ),
    (
        21,
        "DROP TRIGGER memory_vectors_delete; DROP TABLE memory_vectors;",
    ),
    (
        22,
        "DROP INDEX runs_parent; ALTER TABLE runs DROP COLUMN parent_run_id;",
    ),
    (23, "DROP TABLE app_versions; DROP TABLE app_guilds;"),
    (
        24,
        "DROP TRIGGER llm_calls_usage_daily; DROP TABLE usage_daily; \
         DROP TRIGGER messages_fts_insert; DROP TRIGGER messages_fts_delete; \
         DROP TRIGGER messages_fts_update; DROP TABLE messages_fts; \
         DROP INDEX runs_user_seq; DROP INDEX runs_thread_user;",
    ),
    (
        25,
        "DROP TRIGGER memory_vectors_count_insert; DROP TRIGGER memory_vectors_count_update; \
         DROP TRIGGER memory_vectors_count_delete; DROP TABLE memory_vector_versions;",
    ),
];

/// Rolls the database file at `path` back to schema `version`, as an older
/// hearth left it: every later migration undone, newest first.
fn roll_back(path: &Path, version: u32) {
    let conn = rusqlite::Connection::open(path).unwrap();
    for (_, sql) in UNDO.iter().rev().filter(|(v, _)| *v > version) {
        conn.execute_batch(sql).unwrap();
    }
    conn.pragma_update(None, "user_version", version).unwrap();
}
