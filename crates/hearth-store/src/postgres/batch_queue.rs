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
//! finds its queue idle is made at once by its caller's own task, so a lone
//! one waits for nothing and wakes no other thread; under load the batches
//! grow by themselves, to at most [`MAX_BATCH`].
//!
//! Nothing changes for the guarantees: the statement is atomic, so each
//! write in it is made whole or not at all, as alone; its caller is
//! answered only after the commit. When the statement fails, each of its
//! writes is made again alone, so one that PostgreSQL refuses fails only
//! its own caller. An end whose commit was cut (the connection lost after
//! the commit was sent) finds its run terminal when written again, as a
//! caller retrying would, and a message stored again finds its run by its
//! idempotency key or fails on its run id. Two ends of one run never share
//! a batch. A caller dropped while its own statement is in flight leaves
//! that write made or not, as a dropped caller of any statement does (it
//! was never acknowledged); the writes that waited for it are made all the
//! same.
//!
//! A read that waits for the statement in flight is made by the next one,
//! which starts after the read was asked for: it sees every commit its
//! caller could have seen, as alone.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};

use deadpool_postgres::Pool;
use tokio::sync::oneshot;

use super::run_insert::{self, QueuedRun};
use super::{finish, threads};
use crate::error::{Result, StoreError};
use crate::records::{CreateRunOutcome, RunFinish, ThreadState};

/// The most writes one statement makes. At 64 messages in flight, the
/// batches of ends on a 2-core machine held 15.6 ends on average (6.6 each
/// with two replicas); the bound keeps one statement's arrays and its time
/// in the server small.
const MAX_BATCH: usize = 32;

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

/// The queue of one kind of write of one store.
pub(super) struct Queue<B: Batch> {
    inner: Arc<Shared<B>>,
}

/// What a queue's callers and its draining task share.
struct Shared<B: Batch> {
    pool: Pool,
    /// The database, for errors.
    target: String,
    state: Mutex<State<B>>,
}

/// Whether a statement of the queue is in flight, and the writes waiting
/// for it to end.
///
/// One statement of a queue is in flight at once, so that the writes that
/// come in while it waits for its commit's WAL flush all go in the next.
/// Two halved the batches of ends (7.4 at 64) for no gain: on a 2-core
/// machine one replica reached a median 0.86 of SQLite's runs per second at
/// 16 and 64 with one, 0.69 and 0.73 with two, over eight interleaved
/// pairs; with every WAL flush made 2 ms slower the two were within their
/// spread (BENCHMARKS.md, "one statement of ends in flight").
struct State<B: Batch> {
    busy: bool,
    waiting: VecDeque<Pending<B>>,
}

impl<B: Batch> Queue<B> {
    /// A queue writing through `pool`; `target` names the database in
    /// errors.
    pub(super) fn new(pool: Pool, target: String) -> Self {
        Queue {
            inner: Arc::new(Shared {
                pool,
                target,
                state: Mutex::new(State {
                    busy: false,
                    waiting: VecDeque::new(),
                }),
            }),
        }
    }

    /// Makes `item` with whatever other writes are waiting; answers once
    /// it committed.
    ///
    /// A write that finds the queue idle is made by its caller's task, as a
    /// statement of its own. Handing it to a task of the queue, which then
    /// spawned one for the statement, woke other threads for each lone
    /// write: making it here cost a replica about an eighth less CPU and a
    /// seventh fewer thread switches per run at 16 in flight (BENCHMARKS.md,
    /// "a lone write made by its caller"). A write that finds a statement in
    /// flight waits, and the writes waiting then are made together by a
    /// task of the queue, so that none of them depends on a caller that may
    /// be dropped.
    pub(super) async fn write(&self, item: B::Item) -> Result<B::Out> {
        let waiting = {
            let mut state = lock(&self.inner.state);
            if state.busy {
                let (reply, answer) = oneshot::channel();
                state.waiting.push_back(Pending { item, reply });
                Err(answer)
            } else {
                state.busy = true;
                Ok(item)
            }
            // The lock is never held across an await.
        };
        let item = match waiting {
            Err(answer) => return answer.await.map_err(|_| stopped())?,
            Ok(item) => item,
        };
        // Gives the queue on when this future ends, made or dropped.
        let _release = Release(&self.inner);
        let shared = &self.inner;
        B::write(&shared.pool, &shared.target, std::slice::from_ref(&item))
            .await
            .and_then(|mut one| match (one.pop(), one.is_empty()) {
                (Some(out), true) => Ok(out),
                _ => Err(StoreError::Corrupt(
                    "a write made alone answered for another number of writes".into(),
                )),
            })
    }
}

/// The error of a write whose queue could not make it (the runtime shutting
/// down).
fn stopped() -> StoreError {
    StoreError::Closed
}

/// Locks a queue's state; a panic elsewhere while it was held leaves it
/// whole (every change to it is one assignment or one push or pop).
fn lock<B: Batch>(state: &Mutex<State<B>>) -> std::sync::MutexGuard<'_, State<B>> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Ends a caller's own statement: the queue is idle again, or the writes
/// that waited for it are made by a task of the queue.
struct Release<'a, B: Batch>(&'a Arc<Shared<B>>);

impl<B: Batch> Drop for Release<'_, B> {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        if state.waiting.is_empty() {
            state.busy = false;
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(state);
                runtime.spawn(write_waiting(self.0.clone()));
            }
            Err(_) => {
                // No runtime to make them on (it is going away): each
                // waiting caller is told the store stopped.
                state.waiting.clear();
                state.busy = false;
            }
        }
    }
}

/// The queue's task, while writes wait: takes every write waiting (up to
/// [`MAX_BATCH`], and none [apart](Batch::apart) from one taken), makes
/// them in one statement, and again, until none waits.
async fn write_waiting<B: Batch>(shared: Arc<Shared<B>>) {
    loop {
        let batch = {
            let mut state = lock(&shared.state);
            let mut batch: Vec<Pending<B>> = Vec::new();
            while batch.len() < MAX_BATCH {
                let Some(next) = state.waiting.front() else {
                    break;
                };
                if batch.iter().any(|p| B::apart(&p.item, &next.item)) {
                    break;
                }
                if let Some(next) = state.waiting.pop_front() {
                    batch.push(next);
                }
            }
            if batch.is_empty() {
                state.busy = false;
                return;
            }
            batch
        };
        write_batch::<B>(&shared.pool, &shared.target, batch).await;
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::LazyLock;

    use tokio::sync::Notify;

    use super::*;

    /// What one test's queue was asked to make, and the gate its held
    /// writes wait at.
    #[derive(Default)]
    struct Probe {
        /// Each statement's items, and the task that made it.
        batches: Mutex<Vec<(Vec<u32>, Option<tokio::task::Id>)>>,
        entered: Notify,
        gate: Notify,
    }

    /// Probes by target, so that tests running at once keep apart.
    static PROBES: LazyLock<Mutex<HashMap<String, Arc<Probe>>>> = LazyLock::new(Default::default);

    fn probe(target: &str) -> Arc<Probe> {
        let mut probes = PROBES.lock().unwrap_or_else(|p| p.into_inner());
        probes.entry(target.to_owned()).or_default().clone()
    }

    fn made(target: &str) -> Vec<Vec<u32>> {
        let probe = probe(target);
        let batches = probe.batches.lock().unwrap_or_else(|p| p.into_inner());
        batches.iter().map(|(ids, _)| ids.clone()).collect()
    }

    /// Writes `(id, held)`: a held one waits at its probe's gate; two of one
    /// id are apart. Each is answered ten times its id.
    struct Probed;

    impl Batch for Probed {
        type Item = (u32, bool);
        type Out = u32;

        fn apart(queued: &(u32, bool), next: &(u32, bool)) -> bool {
            queued.0 == next.0
        }

        async fn write(_: &Pool, target: &str, items: &[(u32, bool)]) -> Result<Vec<u32>> {
            let probe = probe(target);
            probe
                .batches
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((items.iter().map(|i| i.0).collect(), tokio::task::try_id()));
            if items.iter().any(|i| i.1) {
                probe.entered.notify_one();
                probe.gate.notified().await;
            }
            Ok(items.iter().map(|i| i.0 * 10).collect())
        }
    }

    /// A queue whose pool is never used (the probe makes its writes).
    fn queue(target: &str) -> Arc<Queue<Probed>> {
        let manager =
            deadpool_postgres::Manager::new(tokio_postgres::Config::new(), tokio_postgres::NoTls);
        let pool = Pool::builder(manager).max_size(1).build();
        Arc::new(Queue::new(
            pool.expect("a pool that connects to nothing builds"),
            target.to_owned(),
        ))
    }

    fn waiting(queue: &Queue<Probed>) -> usize {
        lock(&queue.inner.state).waiting.len()
    }

    /// Lets the writes spawned so far reach the queue.
    async fn until_waiting(queue: &Queue<Probed>, n: usize) {
        while waiting(queue) < n {
            tokio::task::yield_now().await;
        }
    }

    /// Spawns a write of `item`.
    fn spawn_write(
        q: &Arc<Queue<Probed>>,
        item: (u32, bool),
    ) -> tokio::task::JoinHandle<Result<u32>> {
        let q = q.clone();
        tokio::spawn(async move { q.write(item).await })
    }

    /// A queue of `target` whose first write is in flight, held at the
    /// probe's gate.
    async fn holding(target: &str) -> (Arc<Queue<Probed>>, tokio::task::JoinHandle<Result<u32>>) {
        let q = queue(target);
        let first = spawn_write(&q, (1, true));
        probe(target).entered.notified().await;
        (q, first)
    }

    /// A spawned write's answer; bounded, not a wait: a queue left busy
    /// would never answer.
    async fn answered(write: tokio::task::JoinHandle<Result<u32>>) -> u32 {
        let answer = tokio::time::timeout(std::time::Duration::from_secs(10), write).await;
        answer.expect("answered").expect("ran").expect("made")
    }

    #[tokio::test]
    async fn a_lone_write_is_made_by_its_callers_task() {
        let q = queue("lone");
        let caller = tokio::spawn({
            let q = q.clone();
            async move { (q.write((7, false)).await, tokio::task::id()) }
        });
        let (answer, caller_id) = caller.await.expect("the caller ran");
        assert_eq!(answer.expect("made"), 70);
        let probe = probe("lone");
        let batches = probe.batches.lock().unwrap_or_else(|p| p.into_inner());
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0], (vec![7], Some(caller_id)));
        assert!(!lock(&q.inner.state).busy, "the queue is idle again");
    }

    #[tokio::test]
    async fn writes_that_come_during_a_statement_are_made_together_after_it() {
        let (q, first) = holding("together").await;
        let mut later = Vec::new();
        for id in [2, 3, 3, 4] {
            later.push(spawn_write(&q, (id, false)));
            until_waiting(&q, later.len()).await;
        }
        probe("together").gate.notify_one();
        assert_eq!(answered(first).await, 10);
        let mut answers = Vec::new();
        for w in later {
            answers.push(answered(w).await);
        }
        assert_eq!(answers, [20, 30, 30, 40]);
        // The second 3 is apart from the first: it waits for the next batch.
        assert_eq!(made("together"), [vec![1], vec![2, 3], vec![3, 4]]);
        assert!(!lock(&q.inner.state).busy, "the queue is idle again");
    }

    #[tokio::test]
    async fn a_caller_dropped_during_its_statement_leaves_the_waiting_writes_made() {
        let (q, first) = holding("dropped").await;
        let second = spawn_write(&q, (2, false));
        until_waiting(&q, 1).await;
        first.abort();
        assert!(first.await.is_err_and(|e| e.is_cancelled()));
        assert_eq!(answered(second).await, 20);
        // And the queue is not left busy: the next write is made alone.
        assert_eq!(q.write((5, false)).await.expect("made"), 50);
        assert_eq!(made("dropped"), [vec![1], vec![2], vec![5]]);
        assert!(!lock(&q.inner.state).busy);
    }
}
