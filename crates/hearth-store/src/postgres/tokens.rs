//! API tokens on PostgreSQL, stored by the hash of their secret. The two
//! questions every request asks are answered from `access_cache` while this
//! replica hears every change to the tokens.

use hearth_core::{Timestamp, now_ms};

use super::PostgresStore;
use super::rows::{self, col, unsigned};
use crate::error::Result;
use crate::records::{NewToken, TokenHolder, TokenRecord, UiSession};
use crate::tokens::TokenStore;

#[async_trait::async_trait]
impl TokenStore for PostgresStore {
    async fn create_token(&self, token: NewToken) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO api_tokens (id, name, hash_hex, created_at, user_key) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .await?;
        client
            .execute(
                &stmt,
                &[
                    &token.id,
                    &token.name,
                    &token.hash_hex,
                    &token.created_at,
                    &token.user_key,
                ],
            )
            .await?;
        // Seen by this replica's next request, not only once told.
        self.inner.access.changed();
        Ok(())
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT id, name, created_at, revoked_at, user_key FROM api_tokens \
                 ORDER BY created_at DESC, seq DESC",
            )
            .await?;
        let found = client.query(&stmt, &[]).await?;
        found.iter().map(rows::token).collect()
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            )
            .await?;
        let revoked = client.execute(&stmt, &[&id, &now_ms()]).await? == 1;
        self.inner.access.changed();
        Ok(revoked)
    }

    async fn token_hash_valid(&self, hash_hex: &str) -> Result<bool> {
        // Every authenticated request asks: a cached statement, one round trip.
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE hash_hex = $1 \
                 AND revoked_at IS NULL)",
            )
            .await?;
        let row = client.query_one(&stmt, &[&hash_hex]).await?;
        col(&row, 0)
    }

    async fn token_name(&self, hash_hex: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT name FROM api_tokens WHERE hash_hex = $1 AND revoked_at IS NULL",
            )
            .await?;
        match client.query_opt(&stmt, &[&hash_hex]).await? {
            Some(row) => col(&row, 0),
            None => Ok(None),
        }
    }

    async fn token_holder(&self, hash_hex: &str) -> Result<Option<TokenHolder>> {
        // Every request with a token asks: held while changes are heard.
        let cache = &self.inner.access;
        if let Some(holder) = cache.holder(hash_hex) {
            return Ok(Some(holder));
        }
        let read_at = cache.read_at();
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT name, user_key FROM api_tokens WHERE hash_hex = $1 AND revoked_at IS NULL",
            )
            .await?;
        let Some(row) = client.query_opt(&stmt, &[&hash_hex]).await? else {
            return Ok(None);
        };
        let holder = TokenHolder {
            name: col(&row, 0)?,
            user_key: col(&row, 1)?,
        };
        cache.keep_holder(read_at, hash_hex, &holder);
        Ok(Some(holder))
    }

    async fn active_token_count(&self) -> Result<u64> {
        // Every request without a token asks (a loopback server without
        // tokens is open): held while changes are heard.
        let cache = &self.inner.access;
        if let Some(count) = cache.count() {
            return Ok(count);
        }
        let read_at = cache.read_at();
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL")
            .await?;
        let row = client.query_one(&stmt, &[]).await?;
        let count = unsigned(&row, 0)?;
        cache.keep_count(read_at, count);
        Ok(count)
    }

    async fn create_ui_session(&self, session: UiSession) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            "DELETE FROM ui_sessions WHERE expires_at <= $1",
            &[&session.created_at],
        )
        .await?;
        tx.execute(
            "INSERT INTO ui_sessions (id_hash, token_hash, csrf, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &session.id_hash,
                &session.token_hash,
                &session.csrf,
                &session.created_at,
                &session.expires_at,
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn ui_session(
        &self,
        id_hash: &str,
        now: Timestamp,
    ) -> Result<Option<(UiSession, TokenHolder)>> {
        // Every dashboard page asks: a cached statement, one round trip.
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT s.id_hash, s.token_hash, s.csrf, s.created_at, s.expires_at, t.name, \
                 t.user_key \
                 FROM ui_sessions s JOIN api_tokens t ON t.hash_hex = s.token_hash \
                 WHERE s.id_hash = $1 AND s.expires_at > $2 AND t.revoked_at IS NULL",
            )
            .await?;
        match client.query_opt(&stmt, &[&id_hash, &now]).await? {
            Some(row) => Ok(Some((
                UiSession {
                    id_hash: col(&row, 0)?,
                    token_hash: col(&row, 1)?,
                    csrf: col(&row, 2)?,
                    created_at: col(&row, 3)?,
                    expires_at: col(&row, 4)?,
                },
                TokenHolder {
                    name: col(&row, 5)?,
                    user_key: col(&row, 6)?,
                },
            ))),
            None => Ok(None),
        }
    }

    async fn end_ui_session(&self, id_hash: &str) -> Result<bool> {
        let client = self.client().await?;
        Ok(client
            .execute("DELETE FROM ui_sessions WHERE id_hash = $1", &[&id_hash])
            .await?
            == 1)
    }
}
