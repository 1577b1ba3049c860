//! App manifests and their guilds on PostgreSQL.

use hearth_core::Timestamp;
use tokio_postgres::Row;

use super::PostgresStore;
use super::rows::col;
use crate::apps::{AppEnablement, AppStore, AppVersionRecord, AppVersionStatus};
use crate::error::{Result, StoreError};

const VERSION_COLUMNS: &str = "app, version, manifest, status, public_dispatch_consent, \
     imported_at, imported_by, approved_at, approved_by";

fn version_row(row: &Row) -> Result<AppVersionRecord> {
    let status: String = col(row, 3)?;
    Ok(AppVersionRecord {
        app: col(row, 0)?,
        version: col(row, 1)?,
        manifest: col(row, 2)?,
        status: AppVersionStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("app version status {status:?}")))?,
        public_dispatch_consent: col(row, 4)?,
        imported_at: col(row, 5)?,
        imported_by: col(row, 6)?,
        approved_at: col(row, 7)?,
        approved_by: col(row, 8)?,
    })
}

#[async_trait::async_trait]
impl AppStore for PostgresStore {
    async fn import_app_version(
        &self,
        app: &str,
        version: &str,
        manifest: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<AppVersionRecord> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO app_versions (app, version, manifest, status, \
                 public_dispatch_consent, imported_at, imported_by) \
                 VALUES ($1, $2, $3, 'pending', FALSE, $4, $5) \
                 ON CONFLICT (app, version) DO NOTHING",
            )
            .await?;
        client
            .execute(&stmt, &[&app, &version, &manifest, &at, &by])
            .await?;
        drop(client);
        self.app_version(app, version)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("app version {app} {version} vanished")))
    }

    async fn approve_app_version(
        &self,
        app: &str,
        version: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<Option<AppVersionRecord>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "UPDATE app_versions SET status = 'approved', public_dispatch_consent = TRUE, \
                 approved_at = $3, approved_by = $4 \
                 WHERE app = $1 AND version = $2 AND status = 'pending'",
            )
            .await?;
        client.execute(&stmt, &[&app, &version, &at, &by]).await?;
        drop(client);
        self.app_version(app, version).await
    }

    async fn app_version(&self, app: &str, version: &str) -> Result<Option<AppVersionRecord>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&format!(
                "SELECT {VERSION_COLUMNS} FROM app_versions WHERE app = $1 AND version = $2"
            ))
            .await?;
        match client.query_opt(&stmt, &[&app, &version]).await? {
            Some(row) => Ok(Some(version_row(&row)?)),
            None => Ok(None),
        }
    }

    async fn list_app_versions(&self) -> Result<Vec<AppVersionRecord>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&format!(
                "SELECT {VERSION_COLUMNS} FROM app_versions \
                 ORDER BY app COLLATE \"C\", imported_at, version COLLATE \"C\""
            ))
            .await?;
        let rows = client.query(&stmt, &[]).await?;
        rows.iter().map(version_row).collect()
    }

    async fn enable_app(
        &self,
        guild_id: &str,
        app: &str,
        version: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO app_guilds (guild_id, app, version, enabled_at, enabled_by) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (guild_id, app) DO UPDATE SET \
                 version = excluded.version, enabled_at = excluded.enabled_at, \
                 enabled_by = excluded.enabled_by",
            )
            .await?;
        client
            .execute(&stmt, &[&guild_id, &app, &version, &at, &by])
            .await?;
        Ok(())
    }

    async fn disable_app(&self, guild_id: &str, app: &str) -> Result<bool> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("DELETE FROM app_guilds WHERE guild_id = $1 AND app = $2")
            .await?;
        Ok(client.execute(&stmt, &[&guild_id, &app]).await? == 1)
    }

    async fn list_app_enablements(&self, guild_id: Option<&str>) -> Result<Vec<AppEnablement>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT guild_id, app, version, enabled_at, enabled_by FROM app_guilds \
                 WHERE $1::TEXT IS NULL OR guild_id = $1 \
                 ORDER BY guild_id COLLATE \"C\", app COLLATE \"C\"",
            )
            .await?;
        let rows = client.query(&stmt, &[&guild_id]).await?;
        rows.iter()
            .map(|row| {
                Ok(AppEnablement {
                    guild_id: col(row, 0)?,
                    app: col(row, 1)?,
                    version: col(row, 2)?,
                    enabled_at: col(row, 3)?,
                    enabled_by: col(row, 4)?,
                })
            })
            .collect()
    }
}
