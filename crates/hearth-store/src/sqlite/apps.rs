//! App manifests and their guilds on SQLite.

use hearth_core::Timestamp;
use rusqlite::params;

use super::SqliteStore;
use super::db::Db;
use super::rows::col;
use crate::apps::{AppEnablement, AppStore, AppVersionRecord, AppVersionStatus};
use crate::error::{Result, StoreError};

/// Imported manifest versions (pending, then approved with the approver's
/// consent), and the version each guild has enabled.
pub(crate) const MIGRATION_V23: &str = "
CREATE TABLE app_versions (
    app TEXT NOT NULL,
    version TEXT NOT NULL,
    manifest TEXT NOT NULL,
    status TEXT NOT NULL,
    public_dispatch_consent INTEGER NOT NULL DEFAULT 0,
    imported_at INTEGER NOT NULL,
    imported_by TEXT NOT NULL,
    approved_at INTEGER,
    approved_by TEXT,
    PRIMARY KEY (app, version)
);
CREATE TABLE app_guilds (
    guild_id TEXT NOT NULL,
    app TEXT NOT NULL,
    version TEXT NOT NULL,
    enabled_at INTEGER NOT NULL,
    enabled_by TEXT NOT NULL,
    PRIMARY KEY (guild_id, app)
);
";

macro_rules! version_columns {
    () => {
        "app, version, manifest, status, public_dispatch_consent, imported_at, imported_by, \
         approved_at, approved_by"
    };
}

fn version_row(row: &rusqlite::Row<'_>) -> Result<AppVersionRecord> {
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

fn app_version(db: &mut Db<'_>, app: &str, version: &str) -> Result<Option<AppVersionRecord>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        version_columns!(),
        " FROM app_versions WHERE app = ?1 AND version = ?2"
    ))?;
    let mut found = stmt.query(params![app, version])?;
    match found.next()? {
        Some(row) => Ok(Some(version_row(row)?)),
        None => Ok(None),
    }
}

fn import(
    db: &mut Db<'_>,
    app: &str,
    version: &str,
    manifest: &str,
    by: &str,
    at: Timestamp,
) -> Result<AppVersionRecord> {
    db.stmt(
        "INSERT INTO app_versions (app, version, manifest, status, public_dispatch_consent, \
         imported_at, imported_by) VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?5) \
         ON CONFLICT (app, version) DO NOTHING",
    )?
    .execute(params![app, version, manifest, at, by])?;
    app_version(db, app, version)?
        .ok_or_else(|| StoreError::Corrupt(format!("app version {app} {version} vanished")))
}

fn approve(
    db: &mut Db<'_>,
    app: &str,
    version: &str,
    by: &str,
    at: Timestamp,
) -> Result<Option<AppVersionRecord>> {
    db.stmt(
        "UPDATE app_versions SET status = 'approved', public_dispatch_consent = 1, \
         approved_at = ?3, approved_by = ?4 \
         WHERE app = ?1 AND version = ?2 AND status = 'pending'",
    )?
    .execute(params![app, version, at, by])?;
    app_version(db, app, version)
}

fn list_versions(db: &mut Db<'_>) -> Result<Vec<AppVersionRecord>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        version_columns!(),
        " FROM app_versions ORDER BY app, imported_at, version"
    ))?;
    let mut out = Vec::new();
    let mut found = stmt.query([])?;
    while let Some(row) = found.next()? {
        out.push(version_row(row)?);
    }
    Ok(out)
}

fn list_enablements(db: &mut Db<'_>, guild: Option<&str>) -> Result<Vec<AppEnablement>> {
    let stmt = db.stmt(
        "SELECT guild_id, app, version, enabled_at, enabled_by FROM app_guilds \
         WHERE ?1 IS NULL OR guild_id = ?1 ORDER BY guild_id, app",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![guild])?;
    while let Some(row) = found.next()? {
        out.push(AppEnablement {
            guild_id: col(row, 0)?,
            app: col(row, 1)?,
            version: col(row, 2)?,
            enabled_at: col(row, 3)?,
            enabled_by: col(row, 4)?,
        });
    }
    Ok(out)
}

#[async_trait::async_trait]
impl AppStore for SqliteStore {
    async fn import_app_version(
        &self,
        app: &str,
        version: &str,
        manifest: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<AppVersionRecord> {
        let (app, version, manifest, by) = (
            app.to_owned(),
            version.to_owned(),
            manifest.to_owned(),
            by.to_owned(),
        );
        self.write(move |db| import(db, &app, &version, &manifest, &by, at))
            .await
    }

    async fn approve_app_version(
        &self,
        app: &str,
        version: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<Option<AppVersionRecord>> {
        let (app, version, by) = (app.to_owned(), version.to_owned(), by.to_owned());
        self.write(move |db| approve(db, &app, &version, &by, at))
            .await
    }

    async fn app_version(&self, app: &str, version: &str) -> Result<Option<AppVersionRecord>> {
        let (app, version) = (app.to_owned(), version.to_owned());
        self.read(move |db| app_version(db, &app, &version)).await
    }

    async fn list_app_versions(&self) -> Result<Vec<AppVersionRecord>> {
        self.read(list_versions).await
    }

    async fn enable_app(
        &self,
        guild_id: &str,
        app: &str,
        version: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<()> {
        let (guild, app, version, by) = (
            guild_id.to_owned(),
            app.to_owned(),
            version.to_owned(),
            by.to_owned(),
        );
        self.write(move |db| {
            db.stmt(
                "INSERT INTO app_guilds (guild_id, app, version, enabled_at, enabled_by) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (guild_id, app) DO UPDATE SET \
                 version = excluded.version, enabled_at = excluded.enabled_at, \
                 enabled_by = excluded.enabled_by",
            )?
            .execute(params![guild, app, version, at, by])?;
            Ok(())
        })
        .await
    }

    async fn disable_app(&self, guild_id: &str, app: &str) -> Result<bool> {
        let (guild, app) = (guild_id.to_owned(), app.to_owned());
        self.write(move |db| {
            let n = db
                .stmt("DELETE FROM app_guilds WHERE guild_id = ?1 AND app = ?2")?
                .execute(params![guild, app])?;
            Ok(n == 1)
        })
        .await
    }

    async fn list_app_enablements(&self, guild_id: Option<&str>) -> Result<Vec<AppEnablement>> {
        let guild = guild_id.map(str::to_owned);
        self.read(move |db| list_enablements(db, guild.as_deref()))
            .await
    }
}
