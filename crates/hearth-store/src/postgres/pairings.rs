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
impl AccessStore for PostgresStore {
    async fn request_pairing(
        &self,
        rec: PairingRecord,
        limits: PairingLimits,
        notice: String,
    ) -> Result<PairingOutcome> {
        Err(StoreError::Corrupt(
            "request_pairing is not yet on PostgreSQL".into(),
        ))
    }

    async fn pending_pairings(&self, now: Timestamp) -> Result<Vec<PairingRecord>> {
        Err(StoreError::Corrupt(
            "pending_pairings is not yet on PostgreSQL".into(),
        ))
    }

    async fn approve_pairing(
        &self,
        code: &str,
        now: Timestamp,
        notice: String,
    ) -> Result<Option<PairingRecord>> {
        Err(StoreError::Corrupt(
            "approve_pairing is not yet on PostgreSQL".into(),
        ))
    }

    async fn deny_pairing(&self, code: &str, now: Timestamp) -> Result<Option<PairingRecord>> {
        Err(StoreError::Corrupt(
            "deny_pairing is not yet on PostgreSQL".into(),
        ))
    }

    async fn allowed_users(&self, channel: &str) -> Result<Vec<AllowedUser>> {
        Err(StoreError::Corrupt(
            "allowed_users is not yet on PostgreSQL".into(),
        ))
    }

    async fn is_allowed(&self, channel: &str, user_key: &str) -> Result<bool> {
        Err(StoreError::Corrupt(
            "is_allowed is not yet on PostgreSQL".into(),
        ))
    }

    async fn remove_allowed(&self, channel: &str, user_key: &str) -> Result<bool> {
        Err(StoreError::Corrupt(
            "remove_allowed is not yet on PostgreSQL".into(),
        ))
    }
}
