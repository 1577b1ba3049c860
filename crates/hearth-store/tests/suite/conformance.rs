//! Every conformance suite on both SQLite configurations: a database file,
//! and the in-memory database that incognito threads use.

use std::sync::atomic::{AtomicUsize, Ordering};

use hearth_store::conformance::store_suite;
use hearth_store::{Durability, SqliteStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_file_passes_every_suite() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicUsize::new(0);
    store_suite(async || {
        let name = format!("store-{}.db", n.fetch_add(1, Ordering::Relaxed));
        SqliteStore::open(&dir.path().join(name), Durability::Normal).unwrap()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_database_passes_every_suite() {
    store_suite(async || SqliteStore::open_in_memory().unwrap()).await;
}
