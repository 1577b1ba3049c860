//! The writer's queue is bounded: with the writer busy, writes beyond the
//! queue wait at the door (their futures stay pending) instead of piling up,
//! and none is lost once the writer moves on.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc as std_mpsc;
use std::task::{Context, Waker};

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
