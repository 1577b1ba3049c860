//! Run ends that reach the store together are written by one statement.
//!
//! A run's end is the largest statement of a run on PostgreSQL, and under
//! load most of its cost is not its rows: each statement is a round trip,
//! an executor set up for nine CTEs, and a commit with its WAL flush
//! (BENCHMARKS.md, "where a PostgreSQL run's CPU goes"). Ends that come in
//! while another is being written wait for it and are then written
//! together, by [`finish::end_together`]: one statement and one commit for
//! all of them. An end that finds the queue idle is written at once, so a
//! lone end waits for nothing; under load the batches grow by themselves,
//! to at most [`MAX_BATCH`].
//!
//! Nothing changes for the guarantees: the statement is atomic, so each
//! end in it is written whole or not at all, as alone; its caller is
//! answered only after the commit. When the statement fails, each of its
//! ends is written again alone, so an end that PostgreSQL refuses fails
//! only its own run. An end whose commit was cut (the connection lost
//! after the commit was sent) finds its run terminal when written again,
//! as a caller retrying would. Two ends of one run never share a batch.

use std::sync::Arc;

use deadpool_postgres::Pool;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::finish;
use crate::error::{Result, StoreError};
use crate::records::RunFinish;
use crate::runs::Finished;

/// The most ends one statement writes. At 64 messages in flight, the
/// batches on a 2-core machine held 15.6 ends on average (6.6 each with two
/// replicas); the bound keeps one statement's arrays and its time in the
/// server small.
const MAX_BATCH: usize = 32;

/// Statements of ends in flight at once: one, so that the ends that come
/// in while it waits for its commit's WAL flush all go in the next. Two
/// halved the batches (7.4 ends at 64) for no gain: on a 2-core machine one
/// replica reached a median 0.86 of SQLite's runs per second at 16 and 64
/// with one, 0.69 and 0.73 with two, over eight interleaved pairs; with every
/// WAL flush made 2 ms slower the two were within their spread
/// (BENCHMARKS.md, "one statement of ends in flight").
const IN_FLIGHT: usize = 1;

/// One end waiting to be written, and where its outcome goes.
struct Pending {
    finish: RunFinish,
    reply: oneshot::Sender<Result<Finished>>,
}

/// The queue of ends of one store. Dropping it ends its task once every
/// end sent to it was written.
pub(super) struct EndQueue {
    tx: mpsc::UnboundedSender<Pending>,
}

impl EndQueue {
    /// A queue writing through `pool`; `target` names the database in
    /// errors. Starts its task on the current tokio runtime.
    pub(super) fn start(pool: Pool, target: String) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_ends(pool, target, rx));
        EndQueue { tx }
    }

    /// Ends `finish`'s run, which must [fit one statement](finish::fits_one_statement),
    /// with whatever other ends are waiting; answers once it committed.
    pub(super) async fn end(&self, finish: RunFinish) -> Result<Finished> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Pending { finish, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The error of an end whose queue's task is gone (the runtime shutting down).
fn stopped() -> StoreError {
    StoreError::Closed
}

/// The queue's task: takes every end waiting (up to [`MAX_BATCH`], and no
/// two of one run), writes them in one statement while the next batch
/// gathers, and answers each.
async fn write_ends(pool: Pool, target: String, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut held: Option<Pending> = None;
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match held.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            let Ok(next) = rx.try_recv() else { break };
            if batch.iter().any(|p| p.finish.run_id == next.finish.run_id) {
                held = Some(next);
                break;
            }
            batch.push(next);
        }
        let pool = pool.clone();
        let target = target.clone();
        tokio::spawn(async move {
            write_batch(&pool, &target, batch).await;
            drop(slot);
        });
    }
}

/// Writes `finishes` as the queue writes one batch, and gives each one's
/// outcome in order, and whether they were written together: for tests
/// that need a batch of known members (which ends the queue puts together
/// depends on timing).
#[cfg(feature = "conformance")]
pub(super) async fn write_as_one_batch(
    pool: &Pool,
    target: &str,
    finishes: Vec<RunFinish>,
) -> (bool, Vec<Result<Finished>>) {
    let mut batch = Vec::new();
    let mut answers = Vec::new();
    for finish in finishes {
        let (reply, answer) = oneshot::channel();
        batch.push(Pending { finish, reply });
        answers.push(answer);
    }
    let together = write_batch(pool, target, batch).await;
    let mut outcomes = Vec::new();
    for answer in answers {
        outcomes.push(answer.await.unwrap_or_else(|_| Err(stopped())));
    }
    (together, outcomes)
}

/// Writes one batch and answers each of its ends: together, and when that
/// fails and there were several, each alone. Whether the one statement
/// wrote them.
async fn write_batch(pool: &Pool, target: &str, batch: Vec<Pending>) -> bool {
    let (finishes, replies): (Vec<RunFinish>, Vec<_>) =
        batch.into_iter().map(|p| (p.finish, p.reply)).unzip();
    let together = end_with(pool, target, &finishes).await;
    match together {
        Ok(done) => {
            for (reply, finished) in replies.into_iter().zip(done) {
                let _ = reply.send(Ok(finished));
            }
            true
        }
        Err(e) if finishes.len() == 1 => {
            if let Some(reply) = replies.into_iter().next() {
                let _ = reply.send(Err(e));
            }
            false
        }
        Err(e) => {
            tracing::debug!(ends = finishes.len(), error = %e, "run ends written together failed; writing each alone");
            for (finish, reply) in finishes.into_iter().zip(replies) {
                let alone = end_with(pool, target, std::slice::from_ref(&finish)).await;
                let _ = reply.send(alone.and_then(|mut one| {
                    one.pop().ok_or_else(|| {
                        StoreError::Corrupt("the end of one run answered for none".into())
                    })
                }));
            }
            false
        }
    }
}

/// [`finish::end_together`] on a pooled connection.
async fn end_with(pool: &Pool, target: &str, finishes: &[RunFinish]) -> Result<Vec<Finished>> {
    let client = super::pooled(pool, target).await?;
    finish::end_together(&client, finishes).await
}
