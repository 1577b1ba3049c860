//! A connection with its own prepared-statement cache.
//!
//! rusqlite's `prepare_cached` sits behind its `cache` feature, which the
//! workspace does not enable; since every connection here lives on one thread
//! for its whole life, a map of statements borrowed from it does the same job.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use rusqlite::{Connection, Statement};

/// A connection plus the statements already prepared on it, keyed by their
/// (static, so bounded) SQL text.
pub(crate) struct Db<'c> {
    conn: &'c Connection,
    cache: HashMap<&'static str, Statement<'c>>,
}

impl<'c> Db<'c> {
    /// Wraps a connection owned by the calling thread.
    pub(crate) fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            cache: HashMap::new(),
        }
    }

    /// The raw connection, for what the cache does not cover.
    pub(crate) fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// The prepared statement for `sql`, prepared on first use.
    pub(crate) fn stmt(&mut self, sql: &'static str) -> rusqlite::Result<&mut Statement<'c>> {
        let conn = self.conn;
        match self.cache.entry(sql) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(v) => Ok(v.insert(conn.prepare(sql)?)),
        }
    }

    /// Executes a parameterless statement such as `SAVEPOINT` or `COMMIT`.
    pub(crate) fn exec(&mut self, sql: &'static str) -> rusqlite::Result<()> {
        self.stmt(sql)?.execute([])?;
        Ok(())
    }
}
