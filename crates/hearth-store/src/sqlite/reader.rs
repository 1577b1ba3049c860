//! Reader threads: each owns a read-only connection and takes queries from a
//! shared queue, so reads never block the async runtime nor wait on the writer.
//!
//! The queue is a mutex-guarded deque with a condition variable rather than a
//! channel whose receiver the readers take turns to hold: with the latter,
//! every job woke two threads (the reader that took it, then, as that reader
//! let go of the receiver, the next one, only to park it again). Here a job
//! wakes exactly one idle reader.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use rusqlite::Connection;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::db::Db;
use crate::error::{Result, StoreError};

/// Reads that may wait for a reader; a caller beyond this waits (without
/// blocking its executor thread) until a reader takes one.
pub(crate) const QUEUE: usize = 256;

/// A query to run on some reader's connection; it sends its own reply.
pub(crate) type ReadJob = Box<dyn FnOnce(&mut Db<'_>) + Send>;

struct Queue {
    /// Each job holds one of the queue's permits until a reader takes it.
    jobs: VecDeque<(ReadJob, OwnedSemaphorePermit)>,
    /// Set when the sender is dropped: readers finish what is queued and exit.
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    slots: Arc<Semaphore>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic in a job happens outside the lock; the deque stays whole.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sending half: closing it (by dropping it) lets the readers exit once
/// the queue is empty.
pub(crate) struct ReadSender {
    shared: Arc<Shared>,
}

/// The receiving half, one clone per reader thread.
#[derive(Clone)]
pub(crate) struct ReadReceiver {
    shared: Arc<Shared>,
}

/// A bounded queue of read jobs.
pub(crate) fn queue(capacity: usize) -> (ReadSender, ReadReceiver) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            jobs: VecDeque::new(),
            closed: false,
        }),
        ready: Condvar::new(),
        slots: Arc::new(Semaphore::new(capacity)),
    });
    (
        ReadSender {
            shared: Arc::clone(&shared),
        },
        ReadReceiver { shared },
    )
}

impl ReadSender {
    /// Queues `job`, waiting (asynchronously) while the queue is full.
    pub(crate) async fn send(&self, job: ReadJob) -> Result<()> {
        let permit = Arc::clone(&self.shared.slots)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Closed)?;
        let mut queue = self.shared.lock();
        if queue.closed {
            return Err(StoreError::Closed);
        }
        queue.jobs.push_back((job, permit));
        drop(queue);
        self.shared.ready.notify_one();
        Ok(())
    }
}

impl Drop for ReadSender {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.slots.close();
        self.shared.ready.notify_all();
    }
}

impl ReadReceiver {
    /// The next job, or None once the sender is gone and the queue is empty.
    fn next(&self) -> Option<ReadJob> {
        let mut queue = self.shared.lock();
        loop {
            if let Some((job, permit)) = queue.jobs.pop_front() {
                drop(queue);
                // The slot is free as soon as a reader has the job.
                drop(permit);
                return Some(job);
            }
            if queue.closed {
                return None;
            }
            queue = self
                .shared
                .ready
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A reader thread's body: returns when the sender is gone and nothing is
/// left to read.
pub(crate) fn run(conn: Connection, jobs: ReadReceiver) {
    let mut db = Db::new(&conn);
    while let Some(job) = jobs.next() {
        job(&mut db);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop() -> ReadJob {
        Box::new(|_| {})
    }

    #[tokio::test]
    async fn a_full_queue_waits_for_a_reader_and_a_closed_one_refuses() {
        let (tx, rx) = queue(1);
        tx.send(noop()).await.unwrap();
        {
            // Full: the second send waits until a reader takes the first job.
            let second = tx.send(noop());
            tokio::pin!(second);
            assert!(futures_poll_once(second.as_mut()).await.is_none());
            assert!(rx.next().is_some());
            second.await.unwrap();
        }
        assert!(rx.next().is_some());
        drop(tx);
        assert!(rx.next().is_none(), "a closed, empty queue ends the reader");
    }

    #[test]
    fn readers_drain_what_was_queued_before_the_close() {
        let (tx, rx) = queue(4);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            tx.send(noop()).await.unwrap();
            tx.send(noop()).await.unwrap();
        });
        drop(tx);
        assert!(rx.next().is_some());
        assert!(rx.next().is_some());
        assert!(rx.next().is_none());
    }

    /// Polls `fut` once: Some(output) if it finished, None if it is pending.
    async fn futures_poll_once<F: std::future::Future + Unpin>(fut: F) -> Option<F::Output> {
        let mut fut = fut;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
