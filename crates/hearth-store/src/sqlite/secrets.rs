//! Sealed secrets on SQLite (ciphertext only).

use hearth_core::Timestamp;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::db::Db;
use super::rows::col;
use crate::error::Result;
use crate::records::{ScopeCredentialInfo, SecretInfo, StoredScopeCredential};
use crate::secret_store::SecretStore;

fn put_secret(db: &mut Db<'_>, name: &str, sealed: &[u8], at: Timestamp) -> Result<()> {
    db.stmt(
        "INSERT INTO secrets (name, sealed, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
         ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
    )?
    .execute(params![name, sealed, at])?;
    Ok(())
}

fn get_secret(db: &mut Db<'_>, name: &str) -> Result<Option<Vec<u8>>> {
    let sealed = db
        .stmt("SELECT sealed FROM secrets WHERE name = ?1")?
        .query_row(params![name], |row| row.get(0))
        .optional()?;
    Ok(sealed)
}

fn list_secrets(db: &mut Db<'_>) -> Result<Vec<SecretInfo>> {
    let stmt = db.stmt("SELECT name, created_at, updated_at FROM secrets ORDER BY name")?;
    let mut out = Vec::new();
    let mut found = stmt.query([])?;
    while let Some(row) = found.next()? {
        out.push(SecretInfo {
            name: col(row, 0)?,
            created_at: col(row, 1)?,
            updated_at: col(row, 2)?,
        });
    }
    Ok(out)
}

fn delete_secret(db: &mut Db<'_>, name: &str) -> Result<bool> {
    let changed = db
        .stmt("DELETE FROM secrets WHERE name = ?1")?
        .execute(params![name])?;
    Ok(changed == 1)
}

/// Communities' provider keys (sealed), kept once removed as a row without
/// its key, so the scope's runs know it had one.
pub(crate) const MIGRATION_V18: &str = "
CREATE TABLE scope_credentials (
    scope TEXT NOT NULL,
    provider TEXT NOT NULL,
    sealed BLOB,
    set_at INTEGER NOT NULL,
    removed_at INTEGER,
    PRIMARY KEY (scope, provider)
);
";

fn put_scope_credential(
    db: &mut Db<'_>,
    scope: &str,
    provider: &str,
    sealed: &[u8],
    at: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO scope_credentials (scope, provider, sealed, set_at, removed_at) \
         VALUES (?1, ?2, ?3, ?4, NULL) ON CONFLICT (scope, provider) DO UPDATE SET \
         sealed = excluded.sealed, set_at = excluded.set_at, removed_at = NULL",
    )?
    .execute(params![scope, provider, sealed, at])?;
    Ok(())
}

fn remove_scope_credential(
    db: &mut Db<'_>,
    scope: &str,
    provider: &str,
    at: Timestamp,
) -> Result<bool> {
    let changed = db
        .stmt(
            "UPDATE scope_credentials SET sealed = NULL, removed_at = ?3 \
             WHERE scope = ?1 AND provider = ?2 AND sealed IS NOT NULL",
        )?
        .execute(params![scope, provider, at])?;
    Ok(changed == 1)
}

fn scope_credential(
    db: &mut Db<'_>,
    scope: &str,
    provider: &str,
) -> Result<Option<StoredScopeCredential>> {
    let stmt = db.stmt(
        "SELECT sealed, set_at, removed_at FROM scope_credentials WHERE scope = ?1 AND provider = ?2",
    )?;
    let mut found = stmt.query(params![scope, provider])?;
    let Some(row) = found.next()? else {
        return Ok(None);
    };
    Ok(Some(StoredScopeCredential {
        sealed: col(row, 0)?,
        set_at: col(row, 1)?,
        removed_at: col(row, 2)?,
    }))
}

fn list_scope_credentials(db: &mut Db<'_>, scope: &str) -> Result<Vec<ScopeCredentialInfo>> {
    let stmt = db.stmt(
        "SELECT provider, set_at FROM scope_credentials \
         WHERE scope = ?1 AND sealed IS NOT NULL ORDER BY provider",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![scope])?;
    while let Some(row) = found.next()? {
        out.push(ScopeCredentialInfo {
            provider: col(row, 0)?,
            set_at: col(row, 1)?,
        });
    }
    Ok(out)
}

#[async_trait::async_trait]
impl SecretStore for SqliteStore {
    async fn put_secret(&self, name: &str, sealed: Vec<u8>, at: Timestamp) -> Result<()> {
        let name = name.to_owned();
        self.write(move |db| put_secret(db, &name, &sealed, at))
            .await
    }

    async fn get_secret(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let name = name.to_owned();
        self.read(move |db| get_secret(db, &name)).await
    }

    async fn list_secrets(&self) -> Result<Vec<SecretInfo>> {
        self.read(list_secrets).await
    }

    async fn delete_secret(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.write(move |db| delete_secret(db, &name)).await
    }

    async fn put_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        sealed: Vec<u8>,
        at: Timestamp,
    ) -> Result<()> {
        let (scope, provider) = (scope.to_owned(), provider.to_owned());
        self.write(move |db| put_scope_credential(db, &scope, &provider, &sealed, at))
            .await
    }

    async fn remove_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        at: Timestamp,
    ) -> Result<bool> {
        let (scope, provider) = (scope.to_owned(), provider.to_owned());
        self.write(move |db| remove_scope_credential(db, &scope, &provider, at))
            .await
    }

    async fn scope_credential(
        &self,
        scope: &str,
        provider: &str,
    ) -> Result<Option<StoredScopeCredential>> {
        let (scope, provider) = (scope.to_owned(), provider.to_owned());
        self.read(move |db| scope_credential(db, &scope, &provider))
            .await
    }

    async fn list_scope_credentials(&self, scope: &str) -> Result<Vec<ScopeCredentialInfo>> {
        let scope = scope.to_owned();
        self.read(move |db| list_scope_credentials(db, &scope))
            .await
    }
}
