//! Copying a SQLite store into PostgreSQL (`hearth store copy-to-postgres`):
//! every row arrives, types that differ between the backends compare equal,
//! sequences continue past the copied ids, and the checksum sees a change.

use hearth_store::postgres::copy::{CopyError, compare_with_sqlite, copy_from_sqlite};
use hearth_store::prelude::*;
use hearth_store::{NewMemory, PostgresStore};

/// A SQLite home with a row in the tables whose types differ between the
/// backends (booleans, blobs, the FTS index, a token's rowid), a text
/// holding a NUL (which PostgreSQL's `text` cannot), and a deleted memory
/// so that SQLite's AUTOINCREMENT is past the highest id.
fn seeded_home(dir: &std::path::Path) -> std::path::PathBuf {
    drop(crate::open(dir));
    let path = dir.join("hearth.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "INSERT INTO threads (thread_key, model, thinking, incognito, updated_at)
             VALUES ('t:1', NULL, 'off', 1, 5), ('t:2', 'a/b', 'high', 0, 6);
         INSERT INTO runs (run_id, thread_key, user_key, source, input, status, created_at, updated_at)
             VALUES ('r1', 't:1', 'u', 'api', '{\"text\":\"hi é\"}', 'succeeded', 1, 2);
         INSERT INTO runs (run_id, thread_key, user_key, source, input, status, created_at, updated_at, parent_run_id)
             VALUES ('r2', 't:1/sub/1.1', 'u', 'delegate', 'a ' || char(0) || 'task', 'succeeded', 1, 2, 'r1');
         INSERT INTO run_steps (run_id, idx, kind, name, status, started_at, payload)
             VALUES ('r1', 0, 'llm', 'a/b', 'done', 1, '{}');
         INSERT INTO messages (thread_key, run_id, role, content, created_at)
             VALUES ('t:1', 'r1', 'user', '[]', 1), ('t:1', 'r1', 'assistant', '[]', 2);
         INSERT INTO api_tokens (id, name, hash_hex, created_at) VALUES ('tok_b', 'b', 'h2', 7);
         INSERT INTO api_tokens (id, name, hash_hex, created_at) VALUES ('tok_a', 'a', 'h1', 7);
         INSERT INTO secrets (name, sealed, created_at, updated_at) VALUES ('k', x'00ff10', 1, 1);
         INSERT INTO jobs (id, name, schedule, timezone, thread_key, user_key, text, catch_up, enabled, created_at)
             VALUES ('j1', 'daily', '0 9 * * *', 'UTC', 't:1', 'u', 'go', 'skip', 1, 3);
         INSERT INTO memories (user_key, text, created_at, last_used_at, embedding, embedding_model)
             VALUES ('u', 'parked in spot B7', 1, 1, x'0000803f', 'f/e'), ('u', 'gone', 1, 1, NULL, NULL);
         DELETE FROM memories WHERE text = 'gone';
         INSERT INTO app_versions (app, version, manifest, status, public_dispatch_consent, imported_at, imported_by, approved_at, approved_by)
             VALUES ('dj', '1', '{}', 'approved', 1, 1, 'op', 2, 'op'), ('dj', '2', '{}', 'pending', 0, 3, 'op', NULL, NULL);
         INSERT INTO app_guilds (guild_id, app, version, enabled_at, enabled_by) VALUES ('100', 'dj', '1', 4, 'op');",
    )
    .unwrap();
    path
}

async fn fresh() -> Option<PostgresStore> {
    hearth_store::postgres::testing::fresh_store()
        .await
        .map(|(s, ())| s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_matches_table_by_table_and_ids_continue_past_the_copied_ones() {
    let Some(pg) = fresh().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = seeded_home(dir.path());
    // Embedded through the store, as hearth does: SQLite keeps its compact
    // copy in `memory_vectors`, which PostgreSQL packs into blocks.
    let sqlite = crate::open(dir.path());
    let fact = sqlite.export_user_memories("u").await.unwrap()[0].id;
    assert!(
        sqlite
            .set_memory_embedding(fact, "f/e", &[1.0, 0.5])
            .await
            .unwrap()
    );
    drop(sqlite);

    let mut events = Vec::new();
    let report = copy_from_sqlite(&path, &pg, &mut |e| events.push(format!("{e:?}")))
        .await
        .unwrap();
    let rows = |t: &str| report.tables.iter().find(|(n, _)| n == t).map(|(_, r)| *r);
    assert_eq!(rows("threads"), Some(2));
    assert_eq!(rows("memories"), Some(1));
    assert_eq!(rows("api_tokens"), Some(2));
    assert_eq!(rows("outbox"), Some(0));
    assert_eq!(rows("app_versions"), Some(2));
    assert_eq!(rows("app_guilds"), Some(1));
    assert!(report.postgres_only.contains(&"replicas".to_owned()));
    // Parents first: a run's steps are written after the run.
    let pos = |t: &str| report.tables.iter().position(|(n, _)| n == t).unwrap();
    assert!(pos("runs") < pos("run_steps"));
    assert!(
        events
            .iter()
            .any(|e| e.contains("Finished") && e.contains("threads"))
    );

    let checks = compare_with_sqlite(&path, &pg).await.unwrap();
    assert!(checks.len() >= 15, "{checks:?}");
    for c in &checks {
        assert!(c.matches(), "{c:?}");
    }

    // What the stores answer is the same.
    assert_eq!(
        pg.incognito_threads().await.unwrap(),
        vec!["t:1".to_owned()]
    );
    assert_eq!(pg.list_tokens().await.unwrap().len(), 2);
    // A sub-agent keeps its parent.
    let children = pg.child_runs("r1").await.unwrap();
    assert_eq!(
        children
            .iter()
            .map(|r| r.run_id.as_str())
            .collect::<Vec<_>>(),
        ["r2"]
    );
    // Its NUL, which PostgreSQL's text cannot hold, arrives as U+FFFD.
    assert_eq!(children[0].input, "a \u{FFFD}task");
    let apps = pg.list_app_versions().await.unwrap();
    assert!(apps[0].public_dispatch_consent && !apps[1].public_dispatch_consent);
    assert_eq!(pg.list_app_enablements(Some("100")).await.unwrap().len(), 1);
    // The deleted memory's id is not handed out again.
    let saved = pg
        .save_memory(NewMemory {
            user_key: "u".into(),
            thread_key: None,
            text: "new fact".into(),
            run_id: None,
            at: 9,
        })
        .await
        .unwrap();
    assert!(saved.memory.id >= 3, "{saved:?}");
    let found = pg
        .search_memories(
            &hearth_store::MemoryScope {
                user_key: "u".into(),
                thread_key: None,
            },
            "spot",
            10,
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "the copied fact is found by its words");
    // And by its meaning, from the block the copy packed it into.
    let scope = hearth_store::MemoryScope {
        user_key: "u".into(),
        thread_key: None,
    };
    let near = pg
        .nearest_memories(&scope, "f/e", &[1.0, 0.4], 10)
        .await
        .unwrap();
    assert_eq!(near.len(), 1, "{near:?}");
    assert_eq!(near[0].memory.id, fact);
    let client = connect(&pg).await;
    let packed: i64 = client
        .query_one(
            "SELECT count(*) FROM memory_vectors v JOIN memory_blocks b ON b.id = v.block_id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(packed, 1, "the copied vector is in a block");
}

/// A client of the database `pg` writes to.
async fn connect(pg: &PostgresStore) -> tokio_postgres::Client {
    hearth_store::postgres::testing::sql_client(pg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checksum_sees_a_changed_row_and_a_second_copy_is_refused() {
    let Some(pg) = fresh().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = seeded_home(dir.path());
    copy_from_sqlite(&path, &pg, &mut |_| {}).await.unwrap();

    let client = connect(&pg).await;
    client
        .execute(
            "UPDATE secrets SET sealed = '\\x00ff11'::bytea WHERE name = 'k'",
            &[],
        )
        .await
        .unwrap();
    let checks = compare_with_sqlite(&path, &pg).await.unwrap();
    let bad: Vec<_> = checks.iter().filter(|c| !c.matches()).collect();
    assert_eq!(bad.len(), 1, "{checks:?}");
    assert_eq!(bad[0].table, "secrets");
    assert_eq!(bad[0].sqlite.rows, bad[0].postgres.rows);

    let err = copy_from_sqlite(&path, &pg, &mut |_| {}).await.unwrap_err();
    assert!(matches!(err, CopyError::NotEmpty { .. }), "{err}");
    assert!(err.to_string().contains("is not empty"), "{err}");
}
