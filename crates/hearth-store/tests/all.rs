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
    mod budget;
    mod claims;
    mod cluster;
    mod conformance;
    mod copy;
    mod family;
    mod memory;
    mod outbox_claims;
    mod permissions;
    mod secrets;
    mod sqlite;
}

use std::path::Path;

use hearth_store::{Durability, SqliteStore};

/// The store of a home in `dir`.
fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(&dir.join("hearth.db"), Durability::Normal).unwrap()
}
