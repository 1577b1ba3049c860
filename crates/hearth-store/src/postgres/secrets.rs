//! Sealed secrets on PostgreSQL: ciphertext only, as BYTEA.

use hearth_core::Timestamp;

use super::PostgresStore;
use super::rows::col;
use crate::error::Result;
use crate::records::{ScopeCredentialInfo, SecretInfo, StoredScopeCredential};
use crate::secret_store::SecretStore;

#[async_trait::async_trait]
impl SecretStore for PostgresStore {
    async fn put_secret(&self, name: &str, sealed: Vec<u8>, at: Timestamp) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO secrets (name, sealed, created_at, updated_at) VALUES ($1, $2, $3, $3) \
                 ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, \
                 updated_at = excluded.updated_at",
            )
            .await?;
        client.execute(&stmt, &[&name, &sealed, &at]).await?;
        Ok(())
    }

    async fn get_secret(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT sealed FROM secrets WHERE name = $1")
            .await?;
        match client.query_opt(&stmt, &[&name]).await? {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn list_secrets(&self) -> Result<Vec<SecretInfo>> {
        let client = self.client().await?;
        // Byte order, as SQLite sorts, whatever the database's collation.
        let stmt = client
            .prepare_cached(
                "SELECT name, created_at, updated_at FROM secrets ORDER BY name COLLATE \"C\"",
            )
            .await?;
        let found = client.query(&stmt, &[]).await?;
        found
            .iter()
            .map(|row| {
                Ok(SecretInfo {
                    name: col(row, 0)?,
                    created_at: col(row, 1)?,
                    updated_at: col(row, 2)?,
                })
            })
            .collect()
    }

    async fn delete_secret(&self, name: &str) -> Result<bool> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("DELETE FROM secrets WHERE name = $1")
            .await?;
        Ok(client.execute(&stmt, &[&name]).await? == 1)
    }

    async fn put_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        sealed: Vec<u8>,
        at: Timestamp,
    ) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO scope_credentials (scope, provider, sealed, set_at, removed_at) \
                 VALUES ($1, $2, $3, $4, NULL) ON CONFLICT (scope, provider) DO UPDATE SET \
                 sealed = excluded.sealed, set_at = excluded.set_at, removed_at = NULL",
            )
            .await?;
        client
            .execute(&stmt, &[&scope, &provider, &sealed, &at])
            .await?;
        Ok(())
    }

    async fn remove_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        at: Timestamp,
    ) -> Result<bool> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "UPDATE scope_credentials SET sealed = NULL, removed_at = $3 \
                 WHERE scope = $1 AND provider = $2 AND sealed IS NOT NULL",
            )
            .await?;
        Ok(client.execute(&stmt, &[&scope, &provider, &at]).await? == 1)
    }

    async fn scope_credential(
        &self,
        scope: &str,
        provider: &str,
    ) -> Result<Option<StoredScopeCredential>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT sealed, set_at, removed_at FROM scope_credentials \
                 WHERE scope = $1 AND provider = $2",
            )
            .await?;
        match client.query_opt(&stmt, &[&scope, &provider]).await? {
            Some(row) => Ok(Some(StoredScopeCredential {
                sealed: col(&row, 0)?,
                set_at: col(&row, 1)?,
                removed_at: col(&row, 2)?,
            })),
            None => Ok(None),
        }
    }

    async fn list_scope_credentials(&self, scope: &str) -> Result<Vec<ScopeCredentialInfo>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT provider, set_at FROM scope_credentials \
                 WHERE scope = $1 AND sealed IS NOT NULL ORDER BY provider COLLATE \"C\"",
            )
            .await?;
        let found = client.query(&stmt, &[&scope]).await?;
        found
            .iter()
            .map(|row| {
                Ok(ScopeCredentialInfo {
                    provider: col(row, 0)?,
                    set_at: col(row, 1)?,
                })
            })
            .collect()
    }
}
