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
    /// The PostgreSQL URL is not one hearth can use (the URL itself is
    /// never part of the message: it may hold a password).
    #[error("the PostgreSQL URL in {var} is not usable: {reason}")]
    BadUrl {
        /// The environment variable that holds the URL.
        var: String,
        /// What is wrong with it.
        reason: String,
    },
    /// PostgreSQL could not be reached, or refused the connection.
    #[error(
        "cannot connect to PostgreSQL at {target}: {reason}; check that the server runs and the URL's user, password and database are right"
    )]
    Connect {
        /// `host:port/database`, never the password.
        target: String,
        /// Why.
        reason: String,
    },
    /// A PostgreSQL query failed.
    #[cfg(feature = "postgres")]
    #[error("database error: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// A PostgreSQL migration failed.
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL migration {version} failed: {source}")]
    PostgresMigration {
        /// The migration's version.
        version: u32,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
}

/// Result of store operations.
pub type Result<T> = std::result::Result<T, StoreError>;
