//! Writes that reach the store together are made by one statement: the
//! ends of runs ([`Ends`]) and the messages that start them ([`Runs`]). So
//! is the one read every run makes before it starts, its thread's settings
//! ([`Settings`]).
//!
//! Under load most of such a statement's cost is not its rows: each
//! statement is a round trip, an executor set up, and a commit with its WAL
//! flush (BENCHMARKS.md, "where a PostgreSQL run's CPU goes"). Writes that
//! come in while another is being made wait for it and are then made
//! together: one statement and one commit for all of them. A write that
//! finds its queue idle is made at once, so a lone one waits for nothing;
//! under load the batches grow by themselves, to at most [`MAX_BATCH`].
//!
//! Nothing changes for the guarantees: the statement is atomic, so each
//! write in it is made whole or not at all, as alone; its caller is
//! answered only after the commit. When the statement fails, each of its
//! writes is made again alone, so one that PostgreSQL refuses fails only
//! its own caller. An end whose commit was cut (the connection lost after
//! the commit was sent) finds its run terminal when written again, as a
//! caller retrying would, and a message stored again finds its run by its
//! idempotency key or fails on its run id. Two ends of one run never share
//! a batch.
//!
//! A read that waits for the statement in flight is made by the next one,
//! which starts after the read was asked for: it sees every commit its
//! caller could have seen, as alone.

use std::future::Future;
use std::sync::Arc;

use deadpool_postgres::Pool;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::run_insert::{self, QueuedRun};
use super::{finish, threads};
use crate::error::{Result, StoreError};
use crate::records::{CreateRunOutcome, RunFinish, ThreadState};

/// The most writes one statement makes. At 64 messages in flight, the
/// batches of ends on a 2-core machine held 15.6 ends on average (6.6 each
/// with two replicas); the bound keeps one statement's arrays and its time
/// in the server small.
const MAX_BATCH: usize = 32;

/// Statements of one queue in flight at once: one, so that the writes that
/// come in while it waits for its commit's WAL flush all go in the next.
/// Two halved the batches of ends (7.4 at 64) for no gain: on a 2-core
/// machine one replica reached a median 0.86 of SQLite's runs per second at
/// 16 and 64 with one, 0.69 and 0.73 with two, over eight interleaved
/// pairs; with every WAL flush made 2 ms slower the two were within their
/// spread (BENCHMARKS.md, "one statement of ends in flight").
const IN_FLIGHT: usize = 1;

/// A kind of write (or read) that a statement can make several of at once.
pub(super) trait Batch: Send + Sync + 'static {
    /// One write.
    type Item: Send + Sync + 'static;
    /// What its caller is answered.
    type Out: Send + 'static;

    /// Whether `next` must wait for a batch after the one holding `queued`.
    fn apart(queued: &Self::Item, next: &Self::Item) -> bool;

    /// Makes `items` in one statement; their outcomes, in order.
    fn write<'a>(
        pool: &'a Pool,
        target: &'a str,
        items: &'a [Self::Item],
    ) -> impl Future<Output = Result<Vec<Self::Out>>> + Send + 'a;
}

/// Run ends ([`finish::end_together`]); each must
/// [fit one statement](finish::fits_one_statement).
pub(super) struct Ends;

impl Batch for Ends {
    type Item = RunFinish;
    type Out = finish::Ended;

    fn apart(queued: &RunFinish, next: &RunFinish) -> bool {
        queued.run_id == next.run_id
    }

    async fn write(pool: &Pool, target: &str, items: &[RunFinish]) -> Result<Vec<finish::Ended>> {
        let client = super::pooled(pool, target).await?;
        finish::end_together(&client, items).await
    }
}

/// Messages stored as runs ([`run_insert::store_together`]), with whether
/// each one's thread had a stored message.
pub(super) struct Runs;

impl Batch for Runs {
    type Item = QueuedRun;
    type Out = (CreateRunOutcome, Option<crate::HistorySeen>);

    fn apart(_: &QueuedRun, _: &QueuedRun) -> bool {
        false
    }

    async fn write(
        pool: &Pool,
        target: &str,
        items: &[QueuedRun],
    ) -> Result<Vec<(CreateRunOutcome, Option<crate::HistorySeen>)>> {
        run_insert::store_together(pool, target, items).await
    }
}

/// Threads' settings ([`threads::settings_together`]), by thread key.
pub(super) struct Settings;

impl Batch for Settings {
    type Item = String;
    type Out = ThreadState;

    fn apart(_: &String, _: &String) -> bool {
        false
    }

    async fn write(pool: &Pool, target: &str, items: &[String]) -> Result<Vec<ThreadState>> {
        threads::settings_together(pool, target, items).await
    }
}

/// One write waiting to be made, and where its outcome goes.
struct Pending<B: Batch> {
    item: B::Item,
    reply: oneshot::Sender<Result<B::Out>>,
}

/// The queue of one kind of write of one store. Dropping it ends its task
/// once every write sent to it was made.
pub(super) struct Queue<B: Batch> {
    tx: mpsc::UnboundedSender<Pending<B>>,
}

impl<B: Batch> Queue<B> {
    /// A queue writing through `pool`; `target` names the database in
    /// errors. Starts its task on the current tokio runtime.
    pub(super) fn start(pool: Pool, target: String) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_all::<B>(pool, target, rx));
        Queue { tx }
    }

    /// Makes `item` with whatever other writes are waiting; answers once
    /// it committed.
    pub(super) async fn write(&self, item: B::Item) -> Result<B::Out> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Pending { item, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The error of a write whose queue's task is gone (the runtime shutting
/// down).
fn stopped() -> StoreError {
    StoreError::Closed
}

/// The queue's task: takes every write waiting (up to [`MAX_BATCH`], and
/// none [apart](Batch::apart) from one taken), makes them in one statement
/// while the next batch gathers, and answers each.
async fn write_all<B: Batch>(
    pool: Pool,
    target: String,
    mut rx: mpsc::UnboundedReceiver<Pending<B>>,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut held: Option<Pending<B>> = None;
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
            if batch.iter().any(|p| B::apart(&p.item, &next.item)) {
                held = Some(next);
                break;
            }
            batch.push(next);
        }
        let pool = pool.clone();
        let target = target.clone();
        tokio::spawn(async move {
            write_batch::<B>(&pool, &target, batch).await;
            drop(slot);
        });
    }
}

/// Makes `items` as the queue makes one batch, and gives each one's outcome
/// in order, and whether they were made together: for tests that need a
/// batch of known members (which writes the queue puts together depends on
/// timing).
#[cfg(feature = "conformance")]
pub(super) async fn write_as_one_batch<B: Batch>(
    pool: &Pool,
    target: &str,
    items: Vec<B::Item>,
) -> (bool, Vec<Result<B::Out>>) {
    let mut batch = Vec::new();
    let mut answers = Vec::new();
    for item in items {
        let (reply, answer) = oneshot::channel();
        batch.push(Pending::<B> { item, reply });
        answers.push(answer);
    }
    let together = write_batch::<B>(pool, target, batch).await;
    let mut outcomes = Vec::new();
    for answer in answers {
        outcomes.push(answer.await.unwrap_or_else(|_| Err(stopped())));
    }
    (together, outcomes)
}

/// Makes one batch and answers each of its writes: together, and when that
/// fails and there were several, each alone. Whether the one statement
/// made them.
async fn write_batch<B: Batch>(pool: &Pool, target: &str, batch: Vec<Pending<B>>) -> bool {
    let (items, replies): (Vec<B::Item>, Vec<_>) =
        batch.into_iter().map(|p| (p.item, p.reply)).unzip();
    match B::write(pool, target, &items).await {
        Ok(done) if done.len() == items.len() => {
            for (reply, out) in replies.into_iter().zip(done) {
                let _ = reply.send(Ok(out));
            }
            true
        }
        Ok(_) => {
            for reply in replies {
                let _ = reply.send(Err(StoreError::Corrupt(
                    "a batch of writes answered for another number of writes".into(),
                )));
            }
            false
        }
        Err(e) if items.len() == 1 => {
            if let Some(reply) = replies.into_iter().next() {
                let _ = reply.send(Err(e));
            }
            false
        }
        Err(e) => {
            tracing::debug!(writes = items.len(), error = %e, "writes made together failed; making each alone");
            for (item, reply) in items.iter().zip(replies) {
                let alone = B::write(pool, target, std::slice::from_ref(item)).await;
                let _ = reply.send(alone.and_then(|mut one| {
                    one.pop().ok_or_else(|| {
                        StoreError::Corrupt("a write made alone answered for none".into())
                    })
                }));
            }
            false
        }
    }
}
