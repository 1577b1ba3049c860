//! `MemoryStore` on SQLite (FTS5).

use super::SqliteStore;
use crate::memory::MemoryStore;

#[async_trait::async_trait]
impl MemoryStore for SqliteStore {}
