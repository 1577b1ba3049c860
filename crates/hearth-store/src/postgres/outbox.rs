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
impl OutboxStore for PostgresStore {
    async fn enqueue_outbox(&self, items: Vec<NewOutboxItem>, now: Timestamp) -> Result<Vec<i64>> {
        Err(StoreError::Corrupt(
            "enqueue_outbox is not yet on PostgreSQL".into(),
        ))
    }

    async fn due_outbox(
        &self,
        channel: &str,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<OutboxItem>> {
        Err(StoreError::Corrupt(
            "due_outbox is not yet on PostgreSQL".into(),
        ))
    }

    async fn next_outbox_due(&self, channel: &str, after: Timestamp) -> Result<Option<Timestamp>> {
        Err(StoreError::Corrupt(
            "next_outbox_due is not yet on PostgreSQL".into(),
        ))
    }

    async fn outbox_progress(&self, id: i64, progress: u32) -> Result<()> {
        Err(StoreError::Corrupt(
            "outbox_progress is not yet on PostgreSQL".into(),
        ))
    }

    async fn outbox_sent(&self, id: i64) -> Result<()> {
        Err(StoreError::Corrupt(
            "outbox_sent is not yet on PostgreSQL".into(),
        ))
    }

    async fn outbox_retry(&self, id: i64, next_attempt_at: Timestamp, error: &str) -> Result<()> {
        Err(StoreError::Corrupt(
            "outbox_retry is not yet on PostgreSQL".into(),
        ))
    }

    async fn outbox_failed(&self, id: i64, error: &str) -> Result<()> {
        Err(StoreError::Corrupt(
            "outbox_failed is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_outbox(
        &self,
        status: Option<OutboxStatus>,
        limit: u32,
    ) -> Result<Vec<OutboxItem>> {
        Err(StoreError::Corrupt(
            "list_outbox is not yet on PostgreSQL".into(),
        ))
    }

    async fn get_outbox(&self, id: i64) -> Result<Option<OutboxItem>> {
        Err(StoreError::Corrupt(
            "get_outbox is not yet on PostgreSQL".into(),
        ))
    }

    async fn retry_outbox(&self, id: i64, now: Timestamp) -> Result<bool> {
        Err(StoreError::Corrupt(
            "retry_outbox is not yet on PostgreSQL".into(),
        ))
    }

    async fn outbox_counts(&self) -> Result<Vec<(String, OutboxCounts)>> {
        Err(StoreError::Corrupt(
            "outbox_counts is not yet on PostgreSQL".into(),
        ))
    }

    async fn cursor(&self, channel: &str, name: &str) -> Result<Option<String>> {
        Err(StoreError::Corrupt(
            "cursor is not yet on PostgreSQL".into(),
        ))
    }

    async fn set_cursor(&self, channel: &str, name: &str, value: &str) -> Result<()> {
        Err(StoreError::Corrupt(
            "set_cursor is not yet on PostgreSQL".into(),
        ))
    }

    async fn first_sight(&self, channel: &str, event_id: &str, now: Timestamp) -> Result<bool> {
        Err(StoreError::Corrupt(
            "first_sight is not yet on PostgreSQL".into(),
        ))
    }

    async fn record_reply_message(&self, reply: ReplyMessage) -> Result<()> {
        Err(StoreError::Corrupt(
            "record_reply_message is not yet on PostgreSQL".into(),
        ))
    }

    async fn reply_message_run(
        &self,
        channel: &str,
        target: &str,
        message_id: &str,
    ) -> Result<Option<String>> {
        Err(StoreError::Corrupt(
            "reply_message_run is not yet on PostgreSQL".into(),
        ))
    }
}
