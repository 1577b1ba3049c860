//! STUB (being ported from `sqlite/`): every method fails until its
//! PostgreSQL version is written. Replace this whole file.
#![allow(unused_imports, unused_variables)]

use hearth_core::{Message, Timestamp};

use super::PostgresStore;
use crate::channels::*;
use crate::confirmations::*;
use crate::error::{Result, StoreError};
use crate::grants::*;
use crate::history::*;
use crate::jobs::*;
use crate::memory::*;
use crate::records::*;
use crate::retention::*;
use crate::router::*;
use crate::runs::*;
use crate::secret_store::*;
use crate::threads::*;
use crate::tokens::*;
use crate::usage::*;

#[async_trait::async_trait]
impl MemoryStore for PostgresStore {
    async fn save_memory(&self, memory: NewMemory) -> crate::Result<SavedMemory> {
        Err(StoreError::Corrupt(
            "save_memory is not yet on PostgreSQL".into(),
        ))
    }

    async fn search_memories(
        &self,
        scope: &MemoryScope,
        query: &str,
        limit: u32,
    ) -> crate::Result<Vec<MemoryHit>> {
        Err(StoreError::Corrupt(
            "search_memories is not yet on PostgreSQL".into(),
        ))
    }

    async fn touch_memories(
        &self,
        user_key: &str,
        ids: &[i64],
        at: Timestamp,
    ) -> crate::Result<u64> {
        Err(StoreError::Corrupt(
            "touch_memories is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_memories(
        &self,
        scope: &MemoryScope,
        limit: u32,
    ) -> crate::Result<Vec<MemoryRecord>> {
        Err(StoreError::Corrupt(
            "list_memories is not yet on PostgreSQL".into(),
        ))
    }

    async fn forget_memory(&self, user_key: &str, id: i64) -> crate::Result<bool> {
        Err(StoreError::Corrupt(
            "forget_memory is not yet on PostgreSQL".into(),
        ))
    }

    async fn export_user_memories(&self, user_key: &str) -> crate::Result<Vec<MemoryRecord>> {
        Err(StoreError::Corrupt(
            "export_user_memories is not yet on PostgreSQL".into(),
        ))
    }

    async fn delete_user_memories(&self, user_key: &str, audit: AuditEvent) -> crate::Result<u64> {
        Err(StoreError::Corrupt(
            "delete_user_memories is not yet on PostgreSQL".into(),
        ))
    }

    async fn purge_memories(&self, unused_since: Timestamp) -> crate::Result<u64> {
        Err(StoreError::Corrupt(
            "purge_memories is not yet on PostgreSQL".into(),
        ))
    }

    async fn set_memory_embedding(
        &self,
        id: i64,
        model: &str,
        vector: &[f32],
    ) -> crate::Result<bool> {
        Err(StoreError::Corrupt(
            "set_memory_embedding is not yet on PostgreSQL".into(),
        ))
    }

    async fn memories_to_embed(&self, model: &str, limit: u32) -> crate::Result<Vec<MemoryRecord>> {
        Err(StoreError::Corrupt(
            "memories_to_embed is not yet on PostgreSQL".into(),
        ))
    }

    async fn memory_vectors(
        &self,
        scope: &MemoryScope,
        model: &str,
    ) -> crate::Result<Vec<MemoryVector>> {
        Err(StoreError::Corrupt(
            "memory_vectors is not yet on PostgreSQL".into(),
        ))
    }
}
