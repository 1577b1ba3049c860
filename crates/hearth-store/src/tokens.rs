//! API tokens, stored by the hash of their secret.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{NewToken, TokenHolder, TokenRecord, UiSession};

/// API tokens.
#[async_trait::async_trait]
pub trait TokenStore: Send + Sync + 'static {
    /// Stores a new API token by the SHA-256 hex of its secret.
    async fn create_token(&self, token: NewToken) -> Result<()>;

    /// All tokens, revoked ones included, newest first.
    async fn list_tokens(&self) -> Result<Vec<TokenRecord>>;

    /// Revokes a token by id. Returns false when no active token has that id.
    async fn revoke_token(&self, id: &str) -> Result<bool>;

    /// True when an unrevoked token has this hash.
    async fn token_hash_valid(&self, hash_hex: &str) -> Result<bool>;

    /// The name of the unrevoked token with this hash, if any (surfaces that
    /// act as the token's holder, such as `/mcp`, name their caller by it).
    async fn token_name(&self, hash_hex: &str) -> Result<Option<String>>;

    /// Who holds the unrevoked token with this hash, if any: its name and
    /// the user it acts as.
    async fn token_holder(&self, hash_hex: &str) -> Result<Option<TokenHolder>>;

    /// Number of unrevoked tokens.
    async fn active_token_count(&self) -> Result<u64>;

    /// Stores a dashboard session, and drops the sessions that ended
    /// before it was opened.
    async fn create_ui_session(&self, session: UiSession) -> Result<()>;

    /// The session whose id hashes to `id_hash`, with its token's holder,
    /// while it lasts (`expires_at` after `now`) and its token is unrevoked.
    async fn ui_session(
        &self,
        id_hash: &str,
        now: Timestamp,
    ) -> Result<Option<(UiSession, TokenHolder)>>;

    /// Ends a session; whether it existed.
    async fn end_ui_session(&self, id_hash: &str) -> Result<bool>;
}
