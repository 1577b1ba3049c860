//! Memories in `SqliteStore`: saving, full-text search, scoping, erasure and
//! retention.

// clippy's allow-unwrap-in-tests covers only `#[test]` bodies, not helpers.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use hearth_store::{
    AuditEvent, Durability, MemoryScope, MemoryStore, NewMemory, RetentionCutoffs, RetentionStore,
    SqliteStore, Store,
};

fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(&dir.join("hearth.db"), Durability::Normal).unwrap()
}

/// The audit event the CLI stores with an erasure.
fn erasure(user: &str, at: i64) -> AuditEvent {
    AuditEvent {
        at,
        actor: "operator".to_owned(),
        action: "memory.delete".to_owned(),
        target: user.to_owned(),
        outcome: "deleted".to_owned(),
        capability: None,
        scope: None,
    }
}

fn new(user: &str, thread: Option<&str>, text: &str, at: i64) -> NewMemory {
    NewMemory {
        user_key: user.to_owned(),
        thread_key: thread.map(str::to_owned),
        text: text.to_owned(),
        run_id: Some("run_1".to_owned()),
        at,
    }
}

fn scope(user: &str, thread: Option<&str>) -> MemoryScope {
    MemoryScope {
        user_key: user.to_owned(),
        thread_key: thread.map(str::to_owned),
    }
}

async fn save(store: &SqliteStore, user: &str, thread: Option<&str>, text: &str) -> i64 {
    store
        .save_memory(new(user, thread, text, 1_000))
        .await
        .unwrap()
        .memory
        .id
}

async fn found(store: &SqliteStore, s: &MemoryScope, query: &str) -> Vec<String> {
    store
        .search_memories(s, query, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.memory.text)
        .collect()
}

#[tokio::test]
async fn search_ranks_by_relevance_and_returns_sources() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    save(&store, "u", None, "The user likes green tea").await;
    let dog = save(
        &store,
        "u",
        None,
        "The user's dog is called Rex; the dog is a beagle",
    )
    .await;
    save(&store, "u", None, "Meeting with Anna on Friday").await;

    let hits = store
        .search_memories(&scope("u", None), "what is my dog called?", 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].memory.id, dog);
    assert_eq!(hits[0].memory.run_id.as_deref(), Some("run_1"));

    // More shared words rank higher; stemming matches "dogs" to "dog".
    save(&store, "u", None, "Dogs are not allowed at the office").await;
    let texts = found(&store, &scope("u", None), "dogs called Rex").await;
    assert_eq!(
        texts,
        vec![
            "The user's dog is called Rex; the dog is a beagle".to_owned(),
            "Dogs are not allowed at the office".to_owned(),
        ]
    );
    let hits = store
        .search_memories(&scope("u", None), "dogs called Rex", 10)
        .await
        .unwrap();
    assert!(hits[0].score > hits[1].score, "{hits:?}");
    assert!(found(&store, &scope("u", None), "coffee").await.is_empty());
}

#[tokio::test]
async fn saving_the_same_text_again_returns_the_first_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let first = store
        .save_memory(new("u", None, "Prefers metric units", 1_000))
        .await
        .unwrap();
    assert!(first.created);
    let again = store
        .save_memory(new("u", None, "Prefers metric units", 2_000))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.memory.id, first.memory.id);
    assert_eq!(again.memory.created_at, 1_000);
    assert_eq!(again.memory.last_used_at, 2_000);
    // Another scope or another user is another memory.
    let in_thread = store
        .save_memory(new("u", Some("t1"), "Prefers metric units", 3_000))
        .await
        .unwrap();
    assert!(in_thread.created);
    let other_user = store
        .save_memory(new("v", None, "Prefers metric units", 3_000))
        .await
        .unwrap();
    assert!(other_user.created);
    assert_eq!(store.export_user_memories("u").await.unwrap().len(), 2);
}

#[tokio::test]
async fn reads_see_only_the_users_own_and_this_threads_memories() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    save(&store, "u", None, "wide fact about kiwis").await;
    save(&store, "u", Some("t1"), "thread one fact about kiwis").await;
    save(&store, "u", Some("t2"), "thread two fact about kiwis").await;
    save(&store, "v", None, "other user fact about kiwis").await;

    let mut t1 = found(&store, &scope("u", Some("t1")), "kiwis").await;
    t1.sort();
    assert_eq!(
        t1,
        vec![
            "thread one fact about kiwis".to_owned(),
            "wide fact about kiwis".to_owned()
        ]
    );
    assert_eq!(
        found(&store, &scope("u", None), "kiwis").await,
        vec!["wide fact about kiwis".to_owned()]
    );
    assert_eq!(
        found(&store, &scope("v", Some("t1")), "kiwis").await,
        vec!["other user fact about kiwis".to_owned()]
    );
    assert!(
        found(&store, &scope("w", Some("t1")), "kiwis")
            .await
            .is_empty()
    );

    let listed: Vec<String> = store
        .list_memories(&scope("u", Some("t2")), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    // Newest first; ties on time go by id.
    assert_eq!(
        listed,
        vec![
            "thread two fact about kiwis".to_owned(),
            "wide fact about kiwis".to_owned()
        ]
    );
    assert_eq!(
        store
            .list_memories(&scope("u", Some("t2")), 1)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn hostile_queries_never_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    save(&store, "u", None, "NEAR the river, a star * shines").await;
    for q in [
        "\"",
        "\"\"",
        "NEAR(",
        "NEAR(a b, 3)",
        "*",
        "a*",
        "^start",
        "col:term",
        "text:river",
        "AND",
        "OR OR",
        "NOT",
        "(",
        ")",
        "{text}: river",
        "'; DROP TABLE memories; --",
        "-river",
        "+",
        "\u{0}",
        "",
        "   ",
        "🦀🦀",
        &"x".repeat(10_000),
    ] {
        let r = store.search_memories(&scope("u", None), q, 5).await;
        assert!(r.is_ok(), "{q:?}: {r:?}");
    }
    // Operator words are searched as plain words.
    assert_eq!(
        found(&store, &scope("u", None), "NEAR(").await,
        vec!["NEAR the river, a star * shines".to_owned()]
    );
    assert_eq!(store.export_user_memories("u").await.unwrap().len(), 1);
}

#[tokio::test]
async fn forget_removes_only_the_users_own_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mine = save(&store, "u", None, "my secret plan").await;
    assert!(!store.forget_memory("v", mine).await.unwrap());
    assert_eq!(found(&store, &scope("u", None), "plan").await.len(), 1);
    assert!(store.forget_memory("u", mine).await.unwrap());
    assert!(!store.forget_memory("u", mine).await.unwrap());
    assert!(found(&store, &scope("u", None), "plan").await.is_empty());
}

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

#[tokio::test]
async fn purge_deletes_memories_unused_since_the_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let old = store
        .save_memory(new("u", None, "old fact about lemons", 1_000))
        .await
        .unwrap()
        .memory
        .id;
    let used = store
        .save_memory(new("u", None, "old fact about limes", 1_000))
        .await
        .unwrap()
        .memory
        .id;
    store
        .save_memory(new("u", None, "new fact about lemons", 5_000))
        .await
        .unwrap();
    // Being found keeps a memory alive; another user's id is not touched.
    assert_eq!(store.touch_memories("u", &[used], 6_000).await.unwrap(), 1);
    assert_eq!(store.touch_memories("v", &[old], 6_000).await.unwrap(), 0);

    assert_eq!(store.purge_memories(4_000).await.unwrap(), 1);
    let left: Vec<String> = store
        .export_user_memories("u")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(
        left,
        vec![
            "old fact about limes".to_owned(),
            "new fact about lemons".to_owned()
        ]
    );
    assert_eq!(
        found(&store, &scope("u", None), "lemons").await,
        vec!["new fact about lemons".to_owned()]
    );

    let report = store
        .purge_expired(RetentionCutoffs {
            memories_unused_since: 7_000,
            audit_before: 0,
            confirmations_expired_before: 0,
        })
        .await
        .unwrap();
    assert_eq!(report.memories, 2);
    assert_eq!(report.audit_events, 0);
    assert!(store.export_user_memories("u").await.unwrap().is_empty());
}

#[tokio::test]
async fn purge_deletes_old_audit_events_and_confirmations_of_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for at in [1_000, 9_000] {
        store
            .append_audit(AuditEvent {
                at,
                actor: "operator".to_owned(),
                action: "grant.add".to_owned(),
                target: "user:u".to_owned(),
                outcome: "ok".to_owned(),
                capability: None,
                scope: None,
            })
            .await
            .unwrap();
    }
    // Rows written straight to the file: one run still waiting, one done.
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute_batch(
        "INSERT INTO runs (run_id, thread_key, user_key, source, input, status, created_at, updated_at) \
         VALUES ('r_wait', 't', 'u', 'api', 'x', 'awaiting_confirmation', 0, 0), \
                ('r_done', 't', 'u', 'api', 'x', 'succeeded', 0, 0);
         INSERT INTO confirmations (token_hash, run_id, call_id, thread_key, user_key, tool, summary, \
             created_at, expires_at, state) VALUES \
             ('h1', 'r_wait', 'c1', 't', 'u', 'memory_forget', 's', 0, 1000, 'pending'), \
             ('h2', 'r_done', 'c1', 't', 'u', 'memory_forget', 's', 0, 1000, 'denied'), \
             ('h3', 'r_done', 'c2', 't', 'u', 'memory_forget', 's', 0, 9000, 'approved');",
    )
    .unwrap();

    let report = store
        .purge_expired(RetentionCutoffs {
            memories_unused_since: 0,
            audit_before: 5_000,
            confirmations_expired_before: 5_000,
        })
        .await
        .unwrap();
    assert_eq!(
        (report.memories, report.audit_events, report.confirmations),
        (0, 1, 1)
    );
    let events = store.list_audit(10).await.unwrap();
    assert_eq!(events.iter().map(|e| e.at).collect::<Vec<_>>(), vec![9_000]);
    let mut left: Vec<String> = conn
        .prepare("SELECT token_hash FROM confirmations")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    left.sort();
    assert_eq!(left, vec!["h1".to_owned(), "h3".to_owned()]);
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
async fn deleting_a_users_memories_stores_its_audit_event_in_the_same_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    save(&store, "u", None, "likes quokkas").await;
    save(&store, "other", None, "likes wombats").await;

    assert_eq!(
        store
            .delete_user_memories("u", erasure("u", 7))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![erasure("u", 7)]);
    assert_eq!(store.export_user_memories("other").await.unwrap().len(), 1);
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
