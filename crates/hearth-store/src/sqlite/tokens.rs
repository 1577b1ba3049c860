//! API tokens on SQLite.

use hearth_core::{Timestamp, now_ms};
use rusqlite::params;

use super::SqliteStore;
use super::db::Db;
use super::rows::{self, count};
use crate::error::Result;
use crate::records::{NewToken, TokenHolder, TokenRecord, UiSession};
use crate::tokens::TokenStore;

fn create_token(db: &mut Db<'_>, token: &NewToken) -> Result<()> {
    db.stmt(
        "INSERT INTO api_tokens (id, name, hash_hex, created_at, user_key) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        token.id,
        token.name,
        token.hash_hex,
        token.created_at,
        token.user_key
    ])?;
    Ok(())
}

fn revoke_token(db: &mut Db<'_>, id: &str, now: Timestamp) -> Result<bool> {
    let changed = db
        .stmt("UPDATE api_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL")?
        .execute(params![id, now])?;
    Ok(changed == 1)
}

fn list_tokens(db: &mut Db<'_>) -> Result<Vec<TokenRecord>> {
    let stmt = db.stmt(
        "SELECT id, name, created_at, revoked_at, user_key FROM api_tokens ORDER BY created_at DESC, rowid DESC",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query([])?;
    while let Some(row) = found.next()? {
        out.push(rows::token(row)?);
    }
    Ok(out)
}

fn token_hash_valid(db: &mut Db<'_>, hash_hex: &str) -> Result<bool> {
    let valid = db
        .stmt(
            "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE hash_hex = ?1 AND revoked_at IS NULL)",
        )?
        .query_row(params![hash_hex], |row| row.get(0))?;
    Ok(valid)
}

fn token_name(db: &mut Db<'_>, hash_hex: &str) -> Result<Option<String>> {
    let stmt = db.stmt("SELECT name FROM api_tokens WHERE hash_hex = ?1 AND revoked_at IS NULL")?;
    let mut found = stmt.query(params![hash_hex])?;
    match found.next()? {
        Some(row) => Ok(Some(row.get(0)?)),
        None => Ok(None),
    }
}

fn token_holder(db: &mut Db<'_>, hash_hex: &str) -> Result<Option<TokenHolder>> {
    let stmt = db
        .stmt("SELECT name, user_key FROM api_tokens WHERE hash_hex = ?1 AND revoked_at IS NULL")?;
    let mut found = stmt.query(params![hash_hex])?;
    match found.next()? {
        Some(row) => Ok(Some(TokenHolder {
            name: row.get(0)?,
            user_key: row.get(1)?,
        })),
        None => Ok(None),
    }
}

fn active_token_count(db: &mut Db<'_>) -> Result<u64> {
    let stmt = db.stmt("SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL")?;
    let mut found = stmt.query([])?;
    match found.next()? {
        Some(row) => count(row, 0),
        None => Ok(0),
    }
}

/// Dashboard sessions (`ui_sessions`), and tokens bound to a user
/// (`api_tokens.user_key`; `NULL`: an operator token).
pub(crate) const MIGRATION_V20: &str = "
ALTER TABLE api_tokens ADD COLUMN user_key TEXT;
CREATE TABLE ui_sessions (
    id_hash TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);
";

fn create_ui_session(db: &mut Db<'_>, s: &UiSession) -> Result<()> {
    db.stmt("DELETE FROM ui_sessions WHERE expires_at <= ?1")?
        .execute(params![s.created_at])?;
    db.stmt(
        "INSERT INTO ui_sessions (id_hash, token_hash, csrf, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        s.id_hash,
        s.token_hash,
        s.csrf,
        s.created_at,
        s.expires_at
    ])?;
    Ok(())
}

fn ui_session(
    db: &mut Db<'_>,
    id_hash: &str,
    now: Timestamp,
) -> Result<Option<(UiSession, TokenHolder)>> {
    let stmt = db.stmt(
        "SELECT s.id_hash, s.token_hash, s.csrf, s.created_at, s.expires_at, t.name, t.user_key \
         FROM ui_sessions s JOIN api_tokens t ON t.hash_hex = s.token_hash \
         WHERE s.id_hash = ?1 AND s.expires_at > ?2 AND t.revoked_at IS NULL",
    )?;
    let mut found = stmt.query(params![id_hash, now])?;
    match found.next()? {
        Some(row) => Ok(Some((
            UiSession {
                id_hash: row.get(0)?,
                token_hash: row.get(1)?,
                csrf: row.get(2)?,
                created_at: row.get(3)?,
                expires_at: row.get(4)?,
            },
            TokenHolder {
                name: row.get(5)?,
                user_key: row.get(6)?,
            },
        ))),
        None => Ok(None),
    }
}

fn end_ui_session(db: &mut Db<'_>, id_hash: &str) -> Result<bool> {
    Ok(db
        .stmt("DELETE FROM ui_sessions WHERE id_hash = ?1")?
        .execute(params![id_hash])?
        == 1)
}

#[async_trait::async_trait]
impl TokenStore for SqliteStore {
    async fn create_token(&self, token: NewToken) -> Result<()> {
        self.write(move |db| create_token(db, &token)).await
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        self.read(list_tokens).await
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        let now = now_ms();
        self.write(move |db| revoke_token(db, &id, now)).await
    }

    async fn token_hash_valid(&self, hash_hex: &str) -> Result<bool> {
        let hash_hex = hash_hex.to_owned();
        self.read(move |db| token_hash_valid(db, &hash_hex)).await
    }

    async fn token_name(&self, hash_hex: &str) -> Result<Option<String>> {
        let hash_hex = hash_hex.to_owned();
        self.read(move |db| token_name(db, &hash_hex)).await
    }

    async fn token_holder(&self, hash_hex: &str) -> Result<Option<TokenHolder>> {
        let hash_hex = hash_hex.to_owned();
        self.read(move |db| token_holder(db, &hash_hex)).await
    }

    async fn active_token_count(&self) -> Result<u64> {
        self.read(active_token_count).await
    }

    async fn create_ui_session(&self, session: UiSession) -> Result<()> {
        self.write(move |db| create_ui_session(db, &session)).await
    }

    async fn ui_session(
        &self,
        id_hash: &str,
        now: Timestamp,
    ) -> Result<Option<(UiSession, TokenHolder)>> {
        let id_hash = id_hash.to_owned();
        self.read(move |db| ui_session(db, &id_hash, now)).await
    }

    async fn end_ui_session(&self, id_hash: &str) -> Result<bool> {
        let id_hash = id_hash.to_owned();
        self.write(move |db| end_ui_session(db, &id_hash)).await
    }
}
