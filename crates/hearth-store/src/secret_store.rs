//! Sealed secrets at rest: the store keeps ciphertext only (see
//! [`crate::secrets`] for the sealing).

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{ScopeCredentialInfo, SecretInfo, StoredScopeCredential};

/// Sealed secrets by name.
#[async_trait::async_trait]
pub trait SecretStore: Send + Sync + 'static {
    /// Stores a sealed secret under `name`, replacing any value it had (its
    /// `created_at` is kept). `sealed` is ciphertext from `secrets::Sealer`;
    /// the store never sees plaintext.
    async fn put_secret(&self, name: &str, sealed: Vec<u8>, at: Timestamp) -> Result<()>;

    /// The sealed bytes of a secret, if stored.
    async fn get_secret(&self, name: &str) -> Result<Option<Vec<u8>>>;

    /// Every stored secret's name and dates (never values), by name.
    async fn list_secrets(&self) -> Result<Vec<SecretInfo>>;

    /// Deletes a secret. Returns false when none has that name.
    async fn delete_secret(&self, name: &str) -> Result<bool>;

    /// Stores a community's sealed key for `provider` in `scope` (a run
    /// scope such as `discord:guild:<id>`), replacing any it had, a removed
    /// one included.
    async fn put_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        sealed: Vec<u8>,
        at: Timestamp,
    ) -> Result<()>;

    /// Removes a community's key, remembering the scope had one (its runs
    /// then fail unless fallback is allowed). False when none is set.
    async fn remove_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        at: Timestamp,
    ) -> Result<bool>;

    /// A community's key for `provider` in `scope`: set, removed, or `None`
    /// when the scope never had one.
    async fn scope_credential(
        &self,
        scope: &str,
        provider: &str,
    ) -> Result<Option<StoredScopeCredential>>;

    /// The keys set in `scope` (removed ones left out), by provider.
    async fn list_scope_credentials(&self, scope: &str) -> Result<Vec<ScopeCredentialInfo>>;
}
