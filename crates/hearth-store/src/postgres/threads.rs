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
impl ThreadStore for PostgresStore {
    async fn thread_history(&self, thread_key: &str, limit: u32) -> Result<Vec<Message>> {
        Err(StoreError::Corrupt(
            "thread_history is not yet on PostgreSQL".into(),
        ))
    }

    async fn thread_state(&self, thread_key: &str) -> Result<ThreadState> {
        Err(StoreError::Corrupt(
            "thread_state is not yet on PostgreSQL".into(),
        ))
    }

    async fn set_thread_model(&self, thread_key: &str, model: Option<&str>) -> Result<()> {
        Err(StoreError::Corrupt(
            "set_thread_model is not yet on PostgreSQL".into(),
        ))
    }

    async fn set_thread_thinking(&self, thread_key: &str, level: &str) -> Result<()> {
        Err(StoreError::Corrupt(
            "set_thread_thinking is not yet on PostgreSQL".into(),
        ))
    }

    async fn set_thread_incognito(&self, thread_key: &str, enabled: bool) -> Result<()> {
        Err(StoreError::Corrupt(
            "set_thread_incognito is not yet on PostgreSQL".into(),
        ))
    }

    async fn incognito_threads(&self) -> Result<Vec<String>> {
        Err(StoreError::Corrupt(
            "incognito_threads is not yet on PostgreSQL".into(),
        ))
    }

    async fn clear_thread_history(&self, thread_key: &str) -> Result<()> {
        Err(StoreError::Corrupt(
            "clear_thread_history is not yet on PostgreSQL".into(),
        ))
    }

    async fn new_session(
        &self,
        thread_key: &str,
        cancelled_run: Option<&str>,
        at: Timestamp,
    ) -> Result<NewSession> {
        Err(StoreError::Corrupt(
            "new_session is not yet on PostgreSQL".into(),
        ))
    }
}
