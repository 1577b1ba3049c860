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
impl HistoryStore for PostgresStore {
    async fn thread_context(&self, thread_key: &str) -> Result<ThreadContext> {
        Err(StoreError::Corrupt(
            "thread_context is not yet on PostgreSQL".into(),
        ))
    }

    async fn append_summary(
        &self,
        thread_key: &str,
        run_id: &str,
        text: &str,
        covers_to: i64,
        at: Timestamp,
    ) -> Result<i64> {
        Err(StoreError::Corrupt(
            "append_summary is not yet on PostgreSQL".into(),
        ))
    }

    async fn history_page(
        &self,
        thread_key: &str,
        limit: u32,
        before: Option<i64>,
    ) -> Result<HistoryPage> {
        Err(StoreError::Corrupt(
            "history_page is not yet on PostgreSQL".into(),
        ))
    }
}
