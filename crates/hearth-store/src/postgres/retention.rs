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
impl RetentionStore for PostgresStore {
    async fn purge_expired(&self, cutoffs: RetentionCutoffs) -> crate::Result<PurgeReport> {
        Err(StoreError::Corrupt(
            "purge_expired is not yet on PostgreSQL".into(),
        ))
    }
}
