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
impl UsageStore for PostgresStore {
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>> {
        Err(StoreError::Corrupt("usage is not yet on PostgreSQL".into()))
    }

    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()> {
        Err(StoreError::Corrupt(
            "record_anonymous_usage is not yet on PostgreSQL".into(),
        ))
    }

    async fn calls_since(&self, since: Timestamp) -> Result<Vec<CallUsage>> {
        Err(StoreError::Corrupt(
            "calls_since is not yet on PostgreSQL".into(),
        ))
    }

    async fn record_model_call(&self, call: ModelCall) -> Result<()> {
        Err(StoreError::Corrupt(
            "record_model_call is not yet on PostgreSQL".into(),
        ))
    }
}
