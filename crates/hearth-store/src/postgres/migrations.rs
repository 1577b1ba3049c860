//! Versioned schema migrations for PostgreSQL, one file per version in
//! `migrations/postgres`, recorded in `hearth_schema_migrations`.
//!
//! Replicas that start together all call [`migrate`]; a session advisory
//! lock lets one of them apply what is missing while the others wait, then
//! find nothing left to do.

use deadpool_postgres::Object;

use crate::error::{Result, StoreError};

/// Every migration, in order: `(version, SQL)`. A released migration is never
/// edited, only followed by a new one.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../migrations/postgres/0001_schema.sql")),
    (
        2,
        include_str!("../../migrations/postgres/0002_wakeups.sql"),
    ),
];

/// The schema version this build writes.
pub(crate) const LATEST: u32 = 2;

/// The advisory lock key of migrations ("hearth-m" in ASCII).
const MIGRATION_LOCK: i64 = 0x6865_6172_7468_2d6d;

/// Applies every migration the database lacks, each in its own transaction.
pub(crate) async fn migrate(client: &mut Object) -> Result<()> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let applied = apply_missing(client).await;
    // Released also when applying failed; a lost connection releases it too.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    applied?;
    unlocked?;
    Ok(())
}

async fn apply_missing(client: &mut Object) -> Result<()> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS hearth_schema_migrations (
                 version INTEGER PRIMARY KEY,
                 applied_at BIGINT NOT NULL
             )",
        )
        .await?;
    let current = current_version(client).await?;
    if current > LATEST {
        return Err(StoreError::TooNew {
            found: current,
            supported: LATEST,
        });
    }
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let failed = |source| StoreError::PostgresMigration { version, source };
        let tx = client.transaction().await?;
        tx.batch_execute(sql).await.map_err(failed)?;
        tx.execute(
            "INSERT INTO hearth_schema_migrations (version, applied_at) VALUES ($1, $2)",
            &[
                &i32::try_from(version).unwrap_or(i32::MAX),
                &hearth_core::now_ms(),
            ],
        )
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        tracing::info!(version, "applied PostgreSQL migration");
    }
    Ok(())
}

async fn current_version(client: &Object) -> Result<u32> {
    let row = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM hearth_schema_migrations",
            &[],
        )
        .await?;
    let version: i32 = row.get(0);
    Ok(u32::try_from(version).unwrap_or(0))
}

/// The schema must be the one this build writes (for `/readyz`).
pub(crate) async fn check_current(client: &Object) -> Result<()> {
    let found = current_version(client).await?;
    if found == LATEST {
        return Ok(());
    }
    if found > LATEST {
        return Err(StoreError::TooNew {
            found,
            supported: LATEST,
        });
    }
    Err(StoreError::Corrupt(format!(
        "PostgreSQL schema version {found}, expected {LATEST}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_start_at_one_and_grow_by_one() {
        for (i, (version, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version as usize, i + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.0), Some(LATEST));
    }
}
