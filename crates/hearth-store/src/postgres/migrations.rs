//! Versioned schema migrations for PostgreSQL, one file per version in
//! `migrations/postgres`, recorded in `hearth_schema_migrations`.
//!
//! Replicas that start together all call [`migrate`]; a session advisory
//! lock lets one of them apply what is missing while the others wait, then
//! find nothing left to do.

use deadpool_postgres::Object;

use crate::error::{Result, StoreError};

/// Every migration, in increasing order of version: `(version, SQL)`. A
/// released migration is never edited, only followed by a new one. Versions
/// need not be contiguous (branches that each add one are merged in any
/// order): each listed version the database lacks is applied, in order.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../migrations/postgres/0001_schema.sql")),
    (
        2,
        include_str!("../../migrations/postgres/0002_wakeups.sql"),
    ),
    (3, include_str!("../../migrations/postgres/0003_budget.sql")),
    (
        4,
        include_str!("../../migrations/postgres/0004_channels.sql"),
    ),
    (5, include_str!("../../migrations/postgres/0005_jobs.sql")),
    (
        6,
        include_str!("../../migrations/postgres/0006_ui_sessions.sql"),
    ),
    (7, include_str!("../../migrations/postgres/0007_modes.sql")),
    (
        8,
        include_str!("../../migrations/postgres/0008_scope_credentials.sql"),
    ),
    (
        9,
        include_str!("../../migrations/postgres/0009_memory_vectors.sql"),
    ),
    (
        10,
        include_str!("../../migrations/postgres/0010_parent_run_id.sql"),
    ),
    (11, include_str!("../../migrations/postgres/0011_apps.sql")),
    (
        12,
        include_str!("../../migrations/postgres/0012_dashboard.sql"),
    ),
    (
        13,
        include_str!("../../migrations/postgres/0013_memory_blocks.sql"),
    ),
    (
        14,
        include_str!("../../migrations/postgres/0014_memory_block_versions.sql"),
    ),
    (
        15,
        include_str!("../../migrations/postgres/0015_throughput.sql"),
    ),
    (
        16,
        include_str!("../../migrations/postgres/0016_store_run.sql"),
    ),
    (
        17,
        include_str!("../../migrations/postgres/0017_ends_notify_themselves.sql"),
    ),
    (
        18,
        include_str!("../../migrations/postgres/0018_store_run_sees_history.sql"),
    ),
    (
        19,
        include_str!("../../migrations/postgres/0019_store_runs_together.sql"),
    ),
    (
        20,
        include_str!("../../migrations/postgres/0020_access_notify.sql"),
    ),
    (
        21,
        include_str!("../../migrations/postgres/0021_store_run_assuming_defaults.sql"),
    ),
    (
        22,
        include_str!("../../migrations/postgres/0022_run_supplied.sql"),
    ),
    (
        23,
        include_str!("../../migrations/postgres/0023_ended_runs_hold_their_thread.sql"),
    ),
    (
        24,
        include_str!("../../migrations/postgres/0024_store_run_sees_newest_message.sql"),
    ),
];

/// The schema version this build writes (its highest migration).
pub(crate) const LATEST: u32 = 24;

/// The migration after which hearth writes the compact copy of every
/// embedding stored before, in the same transaction.
const COMPACT_VECTORS: u32 = 9;

/// The migration that packs the compact vectors into blocks (its SQL fills
/// them from the vectors stored before).
#[cfg(test)]
const MEMORY_BLOCKS: u32 = 13;

/// The advisory lock key of migrations ("hearth-m" in ASCII).
const MIGRATION_LOCK: i64 = 0x6865_6172_7468_2d6d;

/// Applies every migration the database lacks, each in its own transaction.
pub(crate) async fn migrate(client: &mut Object) -> Result<()> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let applied = apply_missing(client, LATEST).await;
    // Released also when applying failed; a lost connection releases it too.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    applied?;
    unlocked?;
    Ok(())
}

/// Applies every migration up to `through` that the database lacks.
pub(crate) async fn apply_missing(client: &mut Object, through: u32) -> Result<()> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS hearth_schema_migrations (
                 version INTEGER PRIMARY KEY,
                 applied_at BIGINT NOT NULL
             )",
        )
        .await?;
    let applied = applied_versions(client).await?;
    if let Some(&found) = applied.iter().max()
        && found > LATEST
    {
        return Err(StoreError::TooNew {
            found,
            supported: LATEST,
        });
    }
    let missing = MIGRATIONS
        .iter()
        .filter(|(v, _)| !applied.contains(v) && *v <= through);
    for &(version, sql) in missing {
        let failed = |source| StoreError::PostgresMigration { version, source };
        let tx = client.transaction().await?;
        tx.batch_execute(sql).await.map_err(failed)?;
        if version == COMPACT_VECTORS {
            super::memory::backfill_compact_vectors(&tx)
                .await
                .map_err(failed)?;
        }
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

/// Every version recorded as applied.
async fn applied_versions(client: &Object) -> Result<Vec<u32>> {
    let rows = client
        .query("SELECT version FROM hearth_schema_migrations", &[])
        .await?;
    rows.iter()
        .map(|row| {
            let v: i32 = row
                .try_get(0)
                .map_err(|e| StoreError::Corrupt(format!("hearth_schema_migrations: {e}")))?;
            Ok(u32::try_from(v).unwrap_or(0))
        })
        .collect()
}

/// The highest version recorded as applied (0 on an empty database).
pub(crate) async fn current_version(client: &Object) -> Result<u32> {
    Ok(applied_versions(client)
        .await?
        .into_iter()
        .max()
        .unwrap_or(0))
}

/// The schema must be the one this build writes (for `/readyz`): every
/// listed version applied, none newer.
pub(crate) async fn check_current(client: &Object) -> Result<()> {
    let applied = applied_versions(client).await?;
    let found = applied.iter().copied().max().unwrap_or(0);
    if found > LATEST {
        return Err(StoreError::TooNew {
            found,
            supported: LATEST,
        });
    }
    let missing: Vec<u32> = MIGRATIONS
        .iter()
        .map(|m| m.0)
        .filter(|v| !applied.contains(v))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(StoreError::Corrupt(format!(
        "PostgreSQL schema lacks migration(s) {missing:?} of this build (latest {LATEST}); \
         restart a replica of this version to apply them"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_start_at_one_and_grow() {
        assert_eq!(MIGRATIONS.first().map(|m| m.0), Some(1));
        for pair in MIGRATIONS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} then {}", pair[0].0, pair[1].0);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.0), Some(LATEST));
    }

    #[tokio::test]
    async fn embeddings_stored_before_get_their_compact_copy() {
        let Some(url) = super::super::testing::fresh_database_url().await else {
            return;
        };
        let store = super::super::PostgresStore::connect_unmigrated(&url, "TEST", 1)
            .await
            .unwrap();
        let mut client = store.client().await.unwrap();
        apply_missing(&mut client, COMPACT_VECTORS - 1)
            .await
            .unwrap();
        let v = [0.5_f32, -1.0, 0.25];
        for (user, thread, embedding) in [
            ("u", None, Some(crate::memory::vector_to_bytes(&v))),
            ("w", Some("t"), Some(crate::memory::vector_to_bytes(&v))),
            ("x", None, None),
        ] {
            client
                .execute(
                    "INSERT INTO memories (user_key, thread_key, text, created_at, last_used_at, \
                     embedding, embedding_model) VALUES ($1, $2, $1 || coalesce($2, ''), 0, 0, $3, 'm')",
                    &[&user, &thread, &embedding],
                )
                .await
                .unwrap();
        }
        migrate(&mut client).await.unwrap();
        let rows = client
            .query(
                "SELECT user_key, memory_id, thread_key, model, compact FROM memory_vectors \
                 ORDER BY memory_id",
                &[],
            )
            .await
            .unwrap();
        type Row = (String, i64, Option<String>, String, Vec<u8>);
        let got: Vec<Row> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect();
        let compact = crate::nearest::compact_vector(&v);
        assert_eq!(
            got,
            vec![
                ("u".into(), 1, None, "m".into(), compact.clone()),
                ("w".into(), 2, Some("t".into()), "m".into(), compact),
            ]
        );
    }

    #[tokio::test]
    async fn vectors_stored_before_are_packed_into_blocks_and_found() {
        use crate::memory::{MemoryScope, MemoryStore, vector_to_bytes};
        let Some(url) = super::super::testing::fresh_database_url().await else {
            return;
        };
        let store = super::super::PostgresStore::connect_unmigrated(&url, "TEST", 2)
            .await
            .unwrap();
        let mut client = store.client().await.unwrap();
        apply_missing(&mut client, MEMORY_BLOCKS - 1).await.unwrap();
        // As version 12 stored them: 300 user-wide vectors of "u" (more
        // than two blocks), one of its thread "t", one of user "w".
        let vector = |i: i32| vec![1.0_f32, 0.01 * i as f32, 0.0];
        let mut expected = Vec::new();
        for i in 0..302 {
            let (user, thread) = match i {
                300 => ("u", Some("t")),
                301 => ("w", None),
                _ => ("u", None),
            };
            let v = vector(i);
            let id: i64 = client
                .query_one(
                    "INSERT INTO memories (user_key, thread_key, text, created_at, last_used_at, \
                     embedding, embedding_model) VALUES ($1, $2, 'fact ' || $3::int, 0, 0, $4, 'm') \
                     RETURNING id",
                    &[&user, &thread, &i, &vector_to_bytes(&v)],
                )
                .await
                .unwrap()
                .get(0);
            client
                .execute(
                    "INSERT INTO memory_vectors (user_key, memory_id, thread_key, model, compact) \
                     VALUES ($1, $2, $3, 'm', $4)",
                    &[&user, &id, &thread, &crate::nearest::compact_vector(&v)],
                )
                .await
                .unwrap();
            if user == "u" {
                expected.push(id);
            }
        }
        migrate(&mut client).await.unwrap();
        let rows = client
            .query(
                "SELECT user_key, thread_key, count FROM memory_blocks ORDER BY id",
                &[],
            )
            .await
            .unwrap();
        let blocks: Vec<(String, Option<String>, i32)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let mut sorted = blocks.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            vec![
                ("u".into(), None, 44),
                ("u".into(), None, 128),
                ("u".into(), None, 128),
                ("u".into(), Some("t".into()), 1),
                ("w".into(), None, 1),
            ],
            "{blocks:?}"
        );
        // Found by meaning, the thread's too, best (the smallest i) first.
        let scope = MemoryScope {
            user_key: "u".into(),
            thread_key: Some("t".into()),
        };
        let found: Vec<i64> = store
            .nearest_memories(&scope, "m", &[1.0, 0.0, 0.0], 400)
            .await
            .unwrap()
            .iter()
            .map(|n| n.memory.id)
            .collect();
        assert_eq!(found, expected);
        // A new vector of "u" waits in the tail, and is found.
        let id = store
            .save_memory(crate::memory::NewMemory {
                user_key: "u".into(),
                thread_key: None,
                text: "new".into(),
                run_id: None,
                at: 0,
            })
            .await
            .unwrap()
            .memory
            .id;
        assert!(
            store
                .set_memory_embedding(id, "m", &vector(0))
                .await
                .unwrap()
        );
        let block: Option<i64> = client
            .query_one(
                "SELECT block_id FROM memory_vectors WHERE memory_id = $1",
                &[&id],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(block, None);
        let found = store
            .nearest_memories(&scope, "m", &[1.0, 0.0, 0.0], 1)
            .await
            .unwrap();
        assert_eq!(found[0].memory.id, id, "the newer of two equals first");
    }
}
