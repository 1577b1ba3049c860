//! Thread history and settings on PostgreSQL.
//!
//! Settings are one row per thread, written by upserts (atomic on their own
//! under concurrent replicas); a thread nobody configured has no row and
//! reads as the defaults.

use hearth_core::{Message, Timestamp, now_ms};

use super::rows::{self, col, unsigned};
use super::{PostgresStore, shared, wide};
use crate::error::{Result, StoreError};
use crate::records::{NewSession, ThreadState};
use crate::threads::ThreadStore;

/// A thread's settings and message count, in one statement so that both come
/// from one snapshot. The `VALUES` row makes an unknown thread one row of
/// NULL settings (the defaults).
const STATE_COUNTED: &str = "SELECT t.model, t.thinking, t.incognito, \
     (SELECT count(*) FROM messages WHERE thread_key = $1), t.mode, t.mode_expires_at \
     FROM (VALUES (1)) AS one (x) LEFT JOIN threads t ON t.thread_key = $1";

/// The same without the count: counting walks every message of the thread,
/// and a run reads its settings before each start.
const STATE_UNCOUNTED: &str = "SELECT t.model, t.thinking, t.incognito, 0::BIGINT, \
     t.mode, t.mode_expires_at \
     FROM (VALUES (1)) AS one (x) LEFT JOIN threads t ON t.thread_key = $1";

/// [`STATE_UNCOUNTED`] of several threads: one row per key given, in its
/// order (a key given twice has two).
const STATES_UNCOUNTED: &str = "SELECT t.model, t.thinking, t.incognito, 0::BIGINT, \
     t.mode, t.mode_expires_at \
     FROM unnest($1::TEXT[]) WITH ORDINALITY AS k (thread_key, i) \
     LEFT JOIN threads t ON t.thread_key = k.thread_key ORDER BY k.i";

/// The state of `thread_key` in a row of [`STATE_COUNTED`]'s columns.
fn state_of(row: &tokio_postgres::Row, thread_key: &str) -> Result<ThreadState> {
    let thinking: Option<String> = col(row, 1)?;
    let incognito: Option<bool> = col(row, 2)?;
    Ok(ThreadState {
        thread_key: thread_key.to_owned(),
        model: col(row, 0)?,
        thinking: thinking.unwrap_or_else(|| "off".to_owned()),
        incognito: incognito.unwrap_or(false),
        message_count: unsigned(row, 3)?,
        mode: col(row, 4)?,
        mode_expires_at: col(row, 5)?,
    })
}

/// The settings of `thread_keys`, in their order, by one statement (the
/// settings reads that arrive together, `batch_queue::Settings`).
pub(super) async fn settings_together(
    pool: &deadpool_postgres::Pool,
    target: &str,
    thread_keys: &[String],
) -> Result<Vec<ThreadState>> {
    let client = super::pooled(pool, target).await?;
    if let [thread_key] = thread_keys {
        // Alone, the statement of one key: planned once for good, where
        // the array's form is planned for each call.
        return Ok(vec![
            read_state(&client, thread_key, STATE_UNCOUNTED).await?,
        ]);
    }
    let stmt = client.prepare_cached(STATES_UNCOUNTED).await?;
    let found = client.query(&stmt, &[&thread_keys]).await?;
    if found.len() != thread_keys.len() {
        return Err(StoreError::Corrupt(format!(
            "the settings of {} threads came back as {} rows",
            thread_keys.len(),
            found.len()
        )));
    }
    found
        .iter()
        .zip(thread_keys)
        .map(|(row, thread_key)| state_of(row, thread_key))
        .collect()
}

/// Reads a thread's state with [`STATE_COUNTED`] or [`STATE_UNCOUNTED`].
async fn read_state(
    client: &deadpool_postgres::Object,
    thread_key: &str,
    sql: &str,
) -> Result<ThreadState> {
    let stmt = client.prepare_cached(sql).await?;
    let row = client
        .query_opt(&stmt, &[&thread_key])
        .await?
        .ok_or_else(|| StoreError::Corrupt("thread state query returned no row".into()))?;
    state_of(&row, thread_key)
}

impl PostgresStore {
    /// Runs one settings upsert `sql` with `$1` the thread, `$2` the value and
    /// `$3` the time.
    async fn upsert_thread(
        &self,
        sql: &str,
        thread_key: &str,
        value: &(dyn tokio_postgres::types::ToSql + Sync),
    ) -> Result<()> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await?;
        client
            .execute(&stmt, &[&thread_key, value, &now_ms()])
            .await?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl ThreadStore for PostgresStore {
    async fn thread_history(&self, thread_key: &str, limit: u32) -> Result<Vec<Message>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT role, content FROM (SELECT id, role, content FROM messages \
                 WHERE thread_key = $1 AND covers_to IS NULL ORDER BY id DESC LIMIT $2) AS recent \
                 ORDER BY id",
            )
            .await?;
        let found = client.query(&stmt, &[&thread_key, &wide(limit)]).await?;
        found.iter().map(rows::message).collect()
    }

    async fn thread_state(&self, thread_key: &str) -> Result<ThreadState> {
        read_state(&self.client().await?, thread_key, STATE_COUNTED).await
    }

    async fn thread_keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>> {
        self.find_thread_keys(prefix, after, limit).await
    }

    async fn search_messages(
        &self,
        text: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<crate::records::MessageHit>> {
        self.find_messages(text, before, limit).await
    }

    async fn thread_settings(&self, thread_key: &str) -> Result<ThreadState> {
        // Every run reads them before it starts: read with the others that
        // arrive meanwhile, in one statement.
        self.settings().write(thread_key.to_owned()).await
    }

    async fn set_thread_model(&self, thread_key: &str, model: Option<&str>) -> Result<()> {
        self.upsert_thread(
            "INSERT INTO threads (thread_key, model, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (thread_key) DO UPDATE SET model = excluded.model, \
             updated_at = excluded.updated_at",
            thread_key,
            &model,
        )
        .await
    }

    async fn set_thread_thinking(&self, thread_key: &str, level: &str) -> Result<()> {
        self.upsert_thread(
            "INSERT INTO threads (thread_key, thinking, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (thread_key) DO UPDATE SET thinking = excluded.thinking, \
             updated_at = excluded.updated_at",
            thread_key,
            &level,
        )
        .await
    }

    async fn set_thread_mode(
        &self,
        thread_key: &str,
        mode: Option<&str>,
        expires_at: Option<Timestamp>,
    ) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO threads (thread_key, mode, mode_expires_at, updated_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (thread_key) DO UPDATE SET \
                 mode = excluded.mode, mode_expires_at = excluded.mode_expires_at, \
                 updated_at = excluded.updated_at",
            )
            .await?;
        client
            .execute(&stmt, &[&thread_key, &mode, &expires_at, &now_ms()])
            .await?;
        Ok(())
    }

    async fn set_thread_incognito(&self, thread_key: &str, enabled: bool) -> Result<()> {
        self.upsert_thread(
            "INSERT INTO threads (thread_key, incognito, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (thread_key) DO UPDATE SET incognito = excluded.incognito, \
             updated_at = excluded.updated_at",
            thread_key,
            &enabled,
        )
        .await
    }

    async fn incognito_threads(&self) -> Result<Vec<String>> {
        let client = self.client().await?;
        // Byte order, as SQLite sorts, whatever the database's collation.
        let stmt = client
            .prepare_cached(
                "SELECT thread_key FROM threads WHERE incognito ORDER BY thread_key COLLATE \"C\"",
            )
            .await?;
        let found = client.query(&stmt, &[]).await?;
        found.iter().map(|row| col(row, 0)).collect()
    }

    async fn clear_thread_history(&self, thread_key: &str) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("DELETE FROM messages WHERE thread_key = $1")
            .await?;
        client.execute(&stmt, &[&thread_key]).await?;
        Ok(())
    }

    async fn new_session(
        &self,
        thread_key: &str,
        cancelled_run: Option<&str>,
        at: Timestamp,
    ) -> Result<NewSession> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // The conditional update takes the run's row lock: a finish of the
        // same run waits for this transaction, then finds it cancelled and
        // appends nothing to the new session. Watched: the replica executing
        // it may be another, and learns the end from its notification. An
        // unexpired lease stays until the replica executing the run stopped
        // it and lets go (migration 0023), so the thread's next run waits.
        let cancelled = match cancelled_run {
            Some(run_id) => {
                let stmt = tx
                    .prepare_cached(
                        "UPDATE runs SET status = 'cancelled', updated_at = $3, \
                         lease_owner = CASE WHEN lease_until >= $3 THEN lease_owner END, \
                         lease_until = CASE WHEN lease_until >= $3 THEN lease_until END, \
                         watched = TRUE \
                         WHERE run_id = $1 AND thread_key = $2 \
                         AND status NOT IN ('succeeded', 'failed', 'cancelled')",
                    )
                    .await?;
                let cancelled = tx.execute(&stmt, &[&run_id, &thread_key, &at]).await? == 1;
                if cancelled {
                    shared::end_of_run(&tx, run_id, at).await?;
                }
                cancelled
            }
            None => false,
        };
        let stmt = tx
            .prepare_cached("DELETE FROM messages WHERE thread_key = $1")
            .await?;
        let cleared = tx.execute(&stmt, &[&thread_key]).await?;
        tx.commit().await?;
        Ok(NewSession {
            cancelled,
            cleared_messages: cleared,
        })
    }
}
