//! Sealed secrets on SQLite (ciphertext only).

use hearth_core::Timestamp;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::db::Db;
use super::rows::col;
use crate::error::Result;
use crate::records::SecretInfo;
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
}
