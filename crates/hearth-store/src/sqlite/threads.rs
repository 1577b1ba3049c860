//! Thread history and settings on SQLite.

use hearth_core::{Message, Timestamp, now_ms};
use rusqlite::params;

use std::sync::Arc;

use super::SqliteStore;
use super::db::Db;
use super::rows::{self, col, count, to_json};
use crate::context_cache::InvalidateOnDrop;
use crate::error::{Result, StoreError};
use crate::records::{NewSession, ThreadState};
use crate::threads::ThreadStore;

pub(super) fn append_message(
    db: &mut Db<'_>,
    thread_key: &str,
    run_id: &str,
    message: &Message,
    at: Timestamp,
) -> Result<()> {
    let content = to_json(&message.content, "message content")?;
    db.stmt(
        "INSERT INTO messages (thread_key, run_id, role, content, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        thread_key,
        run_id,
        rows::role_str(message.role),
        content,
        at
    ])?;
    Ok(())
}

fn set_thread_model(
    db: &mut Db<'_>,
    thread_key: &str,
    model: Option<&str>,
    now: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO threads (thread_key, model, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (thread_key) DO UPDATE SET model = excluded.model, updated_at = excluded.updated_at",
    )?
    .execute(params![thread_key, model, now])?;
    Ok(())
}

fn set_thread_thinking(
    db: &mut Db<'_>,
    thread_key: &str,
    level: &str,
    now: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO threads (thread_key, thinking, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (thread_key) DO UPDATE SET thinking = excluded.thinking, \
         updated_at = excluded.updated_at",
    )?
    .execute(params![thread_key, level, now])?;
    Ok(())
}

fn set_thread_incognito(
    db: &mut Db<'_>,
    thread_key: &str,
    enabled: bool,
    now: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO threads (thread_key, incognito, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (thread_key) DO UPDATE SET incognito = excluded.incognito, \
         updated_at = excluded.updated_at",
    )?
    .execute(params![thread_key, i64::from(enabled), now])?;
    Ok(())
}

fn set_thread_mode(
    db: &mut Db<'_>,
    thread_key: &str,
    mode: Option<&str>,
    expires_at: Option<Timestamp>,
    now: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO threads (thread_key, mode, mode_expires_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (thread_key) DO UPDATE SET \
         mode = excluded.mode, mode_expires_at = excluded.mode_expires_at, \
         updated_at = excluded.updated_at",
    )?
    .execute(params![thread_key, mode, expires_at, now])?;
    Ok(())
}

fn incognito_threads(db: &mut Db<'_>) -> Result<Vec<String>> {
    let keys = db
        .stmt("SELECT thread_key FROM threads WHERE incognito != 0 ORDER BY thread_key")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(keys)
}

fn clear_thread_history(db: &mut Db<'_>, thread_key: &str) -> Result<()> {
    db.stmt("DELETE FROM messages WHERE thread_key = ?1")?
        .execute(params![thread_key])?;
    Ok(())
}

fn new_session(
    db: &mut Db<'_>,
    thread_key: &str,
    cancelled_run: Option<&str>,
    at: Timestamp,
) -> Result<NewSession> {
    let cancelled = match cancelled_run {
        Some(run_id) => {
            let cancelled = db
                .stmt(
                    "UPDATE runs SET status = 'cancelled', updated_at = ?3, lease_owner = NULL, \
                 lease_until = NULL WHERE run_id = ?1 AND thread_key = ?2 \
                 AND status NOT IN ('succeeded', 'failed', 'cancelled')",
                )?
                .execute(params![run_id, thread_key, at])?
                == 1;
            if cancelled {
                super::confirmations::end_of_run(db, run_id, at)?;
            }
            cancelled
        }
        None => false,
    };
    let cleared = db
        .stmt("DELETE FROM messages WHERE thread_key = ?1")?
        .execute(params![thread_key])?;
    Ok(NewSession {
        cancelled,
        cleared_messages: cleared as u64,
    })
}

fn thread_history(db: &mut Db<'_>, thread_key: &str, limit: u32) -> Result<Vec<Message>> {
    let stmt = db.stmt(
        "SELECT role, content FROM (SELECT id, role, content FROM messages WHERE thread_key = ?1 \
         AND covers_to IS NULL ORDER BY id DESC LIMIT ?2) ORDER BY id",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![thread_key, limit])?;
    while let Some(row) = found.next()? {
        out.push(rows::message(row)?);
    }
    Ok(out)
}

fn thread_state(db: &mut Db<'_>, thread_key: &str, counted: bool) -> Result<ThreadState> {
    // One statement, so the settings and the count come from one snapshot.
    // Counting walks every message of the thread: a run does without it.
    let stmt = db.stmt(if counted {
        "SELECT t.model, t.thinking, t.incognito, \
         (SELECT count(*) FROM messages WHERE thread_key = ?1), t.mode, t.mode_expires_at \
         FROM (SELECT 1) LEFT JOIN threads t ON t.thread_key = ?1"
    } else {
        "SELECT t.model, t.thinking, t.incognito, 0, t.mode, t.mode_expires_at \
         FROM (SELECT 1) LEFT JOIN threads t ON t.thread_key = ?1"
    })?;
    let mut found = stmt.query(params![thread_key])?;
    let Some(row) = found.next()? else {
        return Err(StoreError::Corrupt(
            "thread state query returned no row".into(),
        ));
    };
    let thinking: Option<String> = col(row, 1)?;
    let incognito: Option<i64> = col(row, 2)?;
    Ok(ThreadState {
        thread_key: thread_key.to_owned(),
        model: col(row, 0)?,
        thinking: thinking.unwrap_or_else(|| "off".to_owned()),
        incognito: incognito.unwrap_or(0) != 0,
        message_count: count(row, 3)?,
        mode: col(row, 4)?,
        mode_expires_at: col(row, 5)?,
    })
}

#[async_trait::async_trait]
impl ThreadStore for SqliteStore {
    async fn thread_history(&self, thread_key: &str, limit: u32) -> Result<Vec<Message>> {
        let thread_key = thread_key.to_owned();
        self.read(move |db| thread_history(db, &thread_key, limit))
            .await
    }

    async fn thread_keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>> {
        let (prefix, after) = (prefix.to_owned(), after.map(str::to_owned));
        self.read(move |db| super::search::thread_keys(db, &prefix, after.as_deref(), limit))
            .await
    }

    async fn search_messages(
        &self,
        text: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<crate::records::MessageHit>> {
        let text = text.to_owned();
        self.read(move |db| super::search::search_messages(db, &text, before, limit))
            .await
    }

    async fn thread_state(&self, thread_key: &str) -> Result<ThreadState> {
        let thread_key = thread_key.to_owned();
        self.read(move |db| thread_state(db, &thread_key, true))
            .await
    }

    async fn thread_settings(&self, thread_key: &str) -> Result<ThreadState> {
        let thread_key = thread_key.to_owned();
        self.read(move |db| thread_state(db, &thread_key, false))
            .await
    }

    async fn set_thread_model(&self, thread_key: &str, model: Option<&str>) -> Result<()> {
        let (thread_key, model) = (thread_key.to_owned(), model.map(str::to_owned));
        let now = now_ms();
        self.write(move |db| set_thread_model(db, &thread_key, model.as_deref(), now))
            .await
    }

    async fn set_thread_thinking(&self, thread_key: &str, level: &str) -> Result<()> {
        let (thread_key, level) = (thread_key.to_owned(), level.to_owned());
        let now = now_ms();
        self.write(move |db| set_thread_thinking(db, &thread_key, &level, now))
            .await
    }

    async fn set_thread_incognito(&self, thread_key: &str, enabled: bool) -> Result<()> {
        let thread_key = thread_key.to_owned();
        let now = now_ms();
        self.write(move |db| set_thread_incognito(db, &thread_key, enabled, now))
            .await
    }

    async fn set_thread_mode(
        &self,
        thread_key: &str,
        mode: Option<&str>,
        expires_at: Option<Timestamp>,
    ) -> Result<()> {
        let (thread_key, mode) = (thread_key.to_owned(), mode.map(str::to_owned));
        let now = now_ms();
        self.write(move |db| set_thread_mode(db, &thread_key, mode.as_deref(), expires_at, now))
            .await
    }

    async fn incognito_threads(&self) -> Result<Vec<String>> {
        self.read(incognito_threads).await
    }

    async fn clear_thread_history(&self, thread_key: &str) -> Result<()> {
        let thread_key = thread_key.to_owned();
        let cache = InvalidateOnDrop(Arc::clone(&self.inner.contexts));
        self.write(move |db| {
            clear_thread_history(db, &thread_key)?;
            Ok(cache)
        })
        .await
        .map(drop)
    }

    async fn new_session(
        &self,
        thread_key: &str,
        cancelled_run: Option<&str>,
        at: Timestamp,
    ) -> Result<NewSession> {
        let (thread_key, run) = (thread_key.to_owned(), cancelled_run.map(str::to_owned));
        let cache = InvalidateOnDrop(Arc::clone(&self.inner.contexts));
        self.write(move |db| Ok((new_session(db, &thread_key, run.as_deref(), at)?, cache)))
            .await
            .map(|(session, _)| session)
    }
}
