//! The worker threads seen from the async side: the writer's queue is
//! bounded (with the writer busy, writes beyond the queue wait at the door
//! instead of piling up, and none is lost once the writer moves on), and
//! dropping the last handle does not stall the executor thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc as std_mpsc;
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{SqliteStore, writer};
use crate::error::Result;

type WriteFuture = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

#[tokio::test]
async fn a_burst_beyond_the_writer_queue_waits_and_then_commits() {
    let store = SqliteStore::open_in_memory().unwrap();

    // Hold the writer inside one write until `release` is sent.
    let (started_tx, started_rx) = oneshot::channel();
    let (release_tx, release_rx) = std_mpsc::channel::<()>();
    let held = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .write(move |_db| {
                    let _ = started_tx.send(());
                    let _ = release_rx.recv();
                    Ok(())
                })
                .await
        })
    };
    started_rx.await.unwrap();

    let mut burst: Vec<WriteFuture> = (0..writer::QUEUE + 3)
        .map(|_| {
            let store = store.clone();
            Box::pin(async move { store.write(|_db| Ok(())).await }) as WriteFuture
        })
        .collect();
    let mut cx = Context::from_waker(Waker::noop());
    for write in &mut burst {
        assert!(write.as_mut().poll(&mut cx).is_pending());
    }
    // The queue is full: the writes past it wait to get in, holding no slot.
    assert_eq!(store.inner.writer.capacity(), 0);

    release_tx.send(()).unwrap();
    held.await.unwrap().unwrap();
    for write in burst {
        write.await.unwrap();
    }
    assert_eq!(store.inner.writer.capacity(), writer::QUEUE);
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_last_handle_does_not_wait_for_a_busy_writer() {
    let store = SqliteStore::open_in_memory().unwrap();
    // Hold the writer in a job that keeps no store handle.
    let (started_tx, started_rx) = oneshot::channel();
    let (release_tx, release_rx) = std_mpsc::channel::<()>();
    let (reply_tx, reply_rx) = oneshot::channel();
    let held = writer::job(
        true,
        move |_db| {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
            Ok(())
        },
        reply_tx,
    );
    store.inner.writer.send(held).await.unwrap();
    started_rx.await.unwrap();

    // A watchdog turns a drop that blocks into a failure instead of a hang:
    // after a generous while it releases the writer, so a blocked drop
    // returns, late.
    let (dropped_tx, dropped_rx) = std_mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let in_time = dropped_rx.recv_timeout(Duration::from_secs(10)).is_ok();
        let _ = release_tx.send(());
        in_time
    });
    drop(store);
    let _ = dropped_tx.send(());
    assert!(
        watchdog.join().unwrap(),
        "dropping the store on the executor waited for the writer thread"
    );
    // The held write still completes once released.
    reply_rx.await.unwrap().unwrap();
}

/// The `synchronous` level a write runs under.
fn sync_level(db: &mut super::db::Db<'_>) -> Result<i64> {
    Ok(db
        .conn()
        .pragma_query_value(None, "synchronous", |row| row.get(0))?)
}

#[tokio::test]
async fn in_strict_durability_only_lazy_batches_skip_the_sync() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db"), super::Durability::Strict).unwrap();
    // FULL is 2, NORMAL 1.
    assert_eq!(store.write(sync_level).await.unwrap(), 2);
    assert_eq!(store.write_lazy(sync_level).await.unwrap(), 1);
    // The next durable write is synced again.
    assert_eq!(store.write(sync_level).await.unwrap(), 2);
    // In normal durability nothing changes.
    let normal = SqliteStore::open(&dir.path().join("n.db"), super::Durability::Normal).unwrap();
    assert_eq!(normal.write_lazy(sync_level).await.unwrap(), 1);
    assert_eq!(normal.write(sync_level).await.unwrap(), 1);
}

/// The rows of table `t` (made by the test), in order.
async fn rows_of_t(store: &SqliteStore) -> Vec<i64> {
    store
        .read(|db| {
            let mut stmt = db.conn().prepare("SELECT x FROM t ORDER BY x")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<rusqlite::Result<Vec<i64>>>()?)
        })
        .await
        .unwrap()
}

/// A write that inserts `x` into `t`, then fails when `fail` is set.
async fn insert(store: &SqliteStore, x: i64, fail: bool) -> Result<()> {
    store
        .write(move |db| {
            db.conn().execute("INSERT INTO t (x) VALUES (?1)", [x])?;
            if fail {
                return Err(crate::StoreError::Corrupt(format!("write {x} fails")));
            }
            Ok(())
        })
        .await
}

#[tokio::test]
async fn a_failed_write_leaves_nothing_alone_or_in_a_batch() {
    let store = SqliteStore::open_in_memory().unwrap();
    store
        .write(|db| Ok(db.conn().execute_batch("CREATE TABLE t (x INTEGER)")?))
        .await
        .unwrap();

    // Alone in its transaction (no savepoint).
    assert!(insert(&store, 1, true).await.is_err());
    insert(&store, 2, false).await.unwrap();
    assert_eq!(rows_of_t(&store).await, vec![2]);

    // In one batch with others (each in its own savepoint): hold the writer
    // so the three queue up and commit together.
    let (started_tx, started_rx) = oneshot::channel();
    let (release_tx, release_rx) = std_mpsc::channel::<()>();
    let held = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .write(move |_db| {
                    let _ = started_tx.send(());
                    let _ = release_rx.recv();
                    Ok(())
                })
                .await
        })
    };
    started_rx.await.unwrap();
    let mut batch: Vec<WriteFuture> = [(3, false), (4, true), (5, false)]
        .into_iter()
        .map(|(x, fail)| {
            let store = store.clone();
            Box::pin(async move { insert(&store, x, fail).await }) as WriteFuture
        })
        .collect();
    let mut cx = Context::from_waker(Waker::noop());
    for write in &mut batch {
        assert!(write.as_mut().poll(&mut cx).is_pending());
    }
    release_tx.send(()).unwrap();
    held.await.unwrap().unwrap();
    let mut outcomes = Vec::new();
    for write in batch {
        outcomes.push(write.await.is_ok());
    }
    assert_eq!(outcomes, vec![true, false, true]);
    assert_eq!(rows_of_t(&store).await, vec![2, 3, 5]);
}
