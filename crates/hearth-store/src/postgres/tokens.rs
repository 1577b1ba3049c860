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
impl TokenStore for PostgresStore {
    async fn create_token(&self, token: NewToken) -> Result<()> {
        Err(StoreError::Corrupt(
            "create_token is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        Err(StoreError::Corrupt(
            "list_tokens is not yet on PostgreSQL".into(),
        ))
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        Err(StoreError::Corrupt(
            "revoke_token is not yet on PostgreSQL".into(),
        ))
    }

    async fn token_hash_valid(&self, hash_hex: &str) -> Result<bool> {
        Err(StoreError::Corrupt(
            "token_hash_valid is not yet on PostgreSQL".into(),
        ))
    }

    async fn token_name(&self, hash_hex: &str) -> Result<Option<String>> {
        Err(StoreError::Corrupt(
            "token_name is not yet on PostgreSQL".into(),
        ))
    }

    async fn active_token_count(&self) -> Result<u64> {
        Err(StoreError::Corrupt(
            "active_token_count is not yet on PostgreSQL".into(),
        ))
    }
}
