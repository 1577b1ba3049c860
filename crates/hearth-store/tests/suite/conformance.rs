//! Every conformance check on both SQLite configurations, each its own
//! test: a database file, and the in-memory database that incognito
//! threads use (`SqliteStore::open_in_memory`, as the runtime opens it).

/// A database file in its own temporary directory.
mod file {
    use hearth_store::{Durability, SqliteStore};

    /// A fresh store on a new file, and its directory (kept while the check
    /// runs: the journal files are created beside the database).
    async fn fresh() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("hearth.db"), Durability::Normal).unwrap();
        (store, dir)
    }

    hearth_store::store_conformance_tests!(fresh);
}

/// The in-memory database of incognito threads.
mod in_memory {
    use hearth_store::SqliteStore;

    /// A fresh in-memory store; nothing else to keep.
    async fn fresh() -> (SqliteStore, ()) {
        (SqliteStore::open_in_memory().unwrap(), ())
    }

    hearth_store::store_conformance_tests!(fresh);
}

/// PostgreSQL: a new database per check on the test server
/// (`HEARTH_TEST_POSTGRES_URL`; skipped without it, except under CI).
mod postgres {
    use hearth_store::PostgresStore;

    async fn fresh() -> Option<(PostgresStore, ())> {
        hearth_store::postgres::testing::fresh_store().await
    }

    hearth_store::store_conformance_tests!(fresh);
}
