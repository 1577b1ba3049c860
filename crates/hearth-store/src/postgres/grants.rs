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
impl GrantStore for PostgresStore {
    async fn add_grant(&self, grant: Grant) -> Result<bool> {
        Err(StoreError::Corrupt(
            "add_grant is not yet on PostgreSQL".into(),
        ))
    }

    async fn add_grant_audited(&self, grant: Grant, event: AuditEvent) -> Result<bool> {
        Err(StoreError::Corrupt(
            "add_grant_audited is not yet on PostgreSQL".into(),
        ))
    }

    async fn remove_grant(&self, subject: &str, capability: &str, scope: &str) -> Result<bool> {
        Err(StoreError::Corrupt(
            "remove_grant is not yet on PostgreSQL".into(),
        ))
    }

    async fn remove_grant_audited(
        &self,
        subject: &str,
        capability: &str,
        scope: &str,
        event: AuditEvent,
    ) -> Result<bool> {
        Err(StoreError::Corrupt(
            "remove_grant_audited is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_grants(&self, scope: Option<&str>) -> Result<Vec<Grant>> {
        Err(StoreError::Corrupt(
            "list_grants is not yet on PostgreSQL".into(),
        ))
    }

    async fn grants_for(&self, subjects: &[String], scopes: &[String]) -> Result<Vec<Grant>> {
        Err(StoreError::Corrupt(
            "grants_for is not yet on PostgreSQL".into(),
        ))
    }

    async fn append_audit(&self, event: AuditEvent) -> Result<()> {
        Err(StoreError::Corrupt(
            "append_audit is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_audit(&self, limit: u32) -> Result<Vec<AuditEvent>> {
        Err(StoreError::Corrupt(
            "list_audit is not yet on PostgreSQL".into(),
        ))
    }
}
