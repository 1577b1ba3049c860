//! Sealed secrets on PostgreSQL: ciphertext only, as BYTEA.

use hearth_core::Timestamp;

use super::PostgresStore;
use super::rows::col;
use crate::error::Result;
use crate::records::SecretInfo;
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
}
