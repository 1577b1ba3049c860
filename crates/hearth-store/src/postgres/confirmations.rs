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
impl ConfirmationStore for PostgresStore {
    async fn request_confirmation(
        &self,
        rec: ConfirmationRecord,
        outbox: Vec<crate::channels::NewOutboxItem>,
    ) -> Result<ConfirmationRecord> {
        Err(StoreError::Corrupt(
            "request_confirmation is not yet on PostgreSQL".into(),
        ))
    }

    async fn confirmation_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<ConfirmationRecord>> {
        Err(StoreError::Corrupt(
            "confirmation_for_call is not yet on PostgreSQL".into(),
        ))
    }

    async fn confirmation_by_hash(&self, token_hash: &str) -> Result<Option<ConfirmationRecord>> {
        Err(StoreError::Corrupt(
            "confirmation_by_hash is not yet on PostgreSQL".into(),
        ))
    }

    async fn pending_confirmations(
        &self,
        run_id: Option<&str>,
        thread_key: Option<&str>,
    ) -> Result<Vec<ConfirmationRecord>> {
        Err(StoreError::Corrupt(
            "pending_confirmations is not yet on PostgreSQL".into(),
        ))
    }

    async fn resolve_confirmation(
        &self,
        token_hash: &str,
        state: ConfirmationState,
        by: &str,
        at: Timestamp,
        audit: Option<AuditEvent>,
    ) -> Result<Option<ConfirmationRecord>> {
        Err(StoreError::Corrupt(
            "resolve_confirmation is not yet on PostgreSQL".into(),
        ))
    }
}
