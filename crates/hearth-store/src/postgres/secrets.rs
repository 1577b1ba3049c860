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
impl SecretStore for PostgresStore {
    async fn put_secret(&self, name: &str, sealed: Vec<u8>, at: Timestamp) -> Result<()> {
        Err(StoreError::Corrupt(
            "put_secret is not yet on PostgreSQL".into(),
        ))
    }

    async fn get_secret(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Err(StoreError::Corrupt(
            "get_secret is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_secrets(&self) -> Result<Vec<SecretInfo>> {
        Err(StoreError::Corrupt(
            "list_secrets is not yet on PostgreSQL".into(),
        ))
    }

    async fn delete_secret(&self, name: &str) -> Result<bool> {
        Err(StoreError::Corrupt(
            "delete_secret is not yet on PostgreSQL".into(),
        ))
    }
}
