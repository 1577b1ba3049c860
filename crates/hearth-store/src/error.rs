//! Store errors.

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or created.
    #[error("cannot open database {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The database file could not be created.
    #[error(
        "cannot create database file {path}: {source}; check that its directory exists and is writable"
    )]
    Create {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A migration failed.
    #[error("database migration {version} failed: {source}")]
    Migration {
        /// The migration's version.
        version: u32,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The database has a schema version newer than this binary knows.
    #[error(
        "database schema version {found} is newer than this hearth supports ({supported}); upgrade hearth"
    )]
    TooNew {
        found: u32,
        /// Known.
        supported: u32,
    },
    /// A query failed.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored JSON value did not decode.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The write was rolled back with the rest of its batch: the shared
    /// transaction could not begin or commit, or another write in it aborted it.
    #[error("write rolled back: {0}")]
    RolledBack(String),
    /// A worker thread of the store could not be started.
    #[error("cannot start the store's worker thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// The store's worker thread is gone (the store was closed).
    #[error("the store is closed")]
    Closed,
}

/// Result of store operations.
pub type Result<T> = std::result::Result<T, StoreError>;
