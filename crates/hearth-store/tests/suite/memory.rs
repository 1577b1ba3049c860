//! Memories in `SqliteStore`: the full-text index keeps no erased text, FTS5
//! is built in, and a failed audit write keeps the memories.

use std::path::Path;

use hearth_store::conformance::fixtures::{erasure, found, save, scope};
use hearth_store::prelude::*;

use crate::open;

/// Rows of the FTS index and index terms containing `term`, read from the
/// file through a connection of its own.
fn fts_rows_and_terms(path: &Path, term: &str) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE VIRTUAL TABLE temp.memories_vocab USING fts5vocab(main, memories_fts, 'row');",
    )
    .unwrap();
    let rows = conn
        .query_row("SELECT count(*) FROM memories_fts", [], |r| r.get(0))
        .unwrap();
    let terms = conn
        .query_row(
            "SELECT count(*) FROM temp.memories_vocab WHERE term = ?1",
            [term],
            |r| r.get(0),
        )
        .unwrap();
    // The index must agree with its own content after the deletes.
    conn.execute(
        "INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')",
        [],
    )
    .unwrap();
    (rows, terms)
}

/// True when some page of the FTS index still holds `term`'s bytes: without
/// FTS5's secure-delete, a deleted row's terms stay there until a merge.
fn fts_pages_hold(path: &Path, term: &str) -> bool {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare("SELECT block FROM memories_fts_data").unwrap();
    let blocks: Vec<Option<Vec<u8>>> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    blocks
        .iter()
        .flatten()
        .any(|b| b.windows(term.len()).any(|w| w == term.as_bytes()))
}

#[tokio::test]
async fn delete_user_removes_text_from_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    save(&store, "u", None, "zanzibar quokka one").await;
    save(&store, "u", Some("t"), "zanzibar quokka two").await;
    save(&store, "v", None, "unrelated wombat").await;
    let db = store.path().to_owned();
    assert_eq!(fts_rows_and_terms(&db, "quokka"), (3, 1));
    assert!(fts_pages_hold(&db, "quokka"));

    assert_eq!(
        store
            .delete_user_memories("u", erasure("u", 1))
            .await
            .unwrap(),
        2
    );
    assert!(
        found(&store, &scope("u", Some("t")), "quokka zanzibar")
            .await
            .is_empty()
    );
    assert!(store.export_user_memories("u").await.unwrap().is_empty());
    assert_eq!(fts_rows_and_terms(&db, "quokka"), (1, 0));
    assert_eq!(fts_rows_and_terms(&db, "zanzibar"), (1, 0));
    assert_eq!(fts_rows_and_terms(&db, "wombat"), (1, 1));
    assert!(!fts_pages_hold(&db, "quokka"));
    assert!(!fts_pages_hold(&db, "zanzibar"));
    assert!(fts_pages_hold(&db, "wombat"));
    assert_eq!(
        store
            .delete_user_memories("u", erasure("u", 1))
            .await
            .unwrap(),
        0
    );
}

#[test]
fn the_bundled_sqlite_has_fts5() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let has: i64 = conn
        .query_row("SELECT sqlite_compileoption_used('ENABLE_FTS5')", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(has, 1);
}

#[tokio::test]
async fn a_failed_audit_write_keeps_the_users_memories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    {
        let store = open(dir.path());
        save(&store, "u", None, "likes quokkas").await;
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER audit_fail BEFORE INSERT ON audit WHEN NEW.outcome = 'boom' \
         BEGIN SELECT RAISE(ABORT, 'audit refused'); END;",
    )
    .unwrap();
    drop(conn);
    let store = open(dir.path());
    let mut bad = erasure("u", 7);
    bad.outcome = "boom".to_owned();

    assert!(store.delete_user_memories("u", bad).await.is_err());
    // The erasure did not happen unrecorded: the memory is still there.
    assert_eq!(store.export_user_memories("u").await.unwrap().len(), 1);
    assert!(store.list_audit(0).await.unwrap().is_empty());
}
