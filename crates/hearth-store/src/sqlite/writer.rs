//! The single writer: one thread owns the write connection and commits
//! whatever writes are queued together, so concurrent runs share one commit
//! (and, in strict durability, one fsync).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;
use tokio::sync::mpsc::Receiver;
use tokio::sync::oneshot;

use super::db::Db;
use crate::error::{Result, StoreError};

/// Most writes committed by one transaction; bounds how long the first
/// write of a burst waits for the last.
const MAX_BATCH: usize = 512;

/// One queued write: run inside the batch transaction, then answered once the
/// batch's fate is known.
pub(crate) trait Job: Send {
    /// Runs the write; false when it failed (its savepoint is then rolled back).
    fn run(&mut self, db: &mut Db<'_>) -> bool;
    /// Marks the write as not committed, keeping its own error if it had one.
    fn fail(&mut self, reason: &str);
    /// Sends the outcome to the caller.
    fn reply(self: Box<Self>);
    /// False for a write that need not reach the disk before it is answered
    /// (in strict durability, a batch of only such writes skips the fsync).
    fn durable(&self) -> bool;
}

struct Pending<T, F> {
    durable: bool,
    op: Option<F>,
    result: Option<Result<T>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Job for Pending<T, F>
where
    T: Send,
    F: FnOnce(&mut Db<'_>) -> Result<T> + Send,
{
    fn run(&mut self, db: &mut Db<'_>) -> bool {
        let Some(op) = self.op.take() else {
            return false;
        };
        let result = op(db);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn fail(&mut self, reason: &str) {
        self.op = None;
        if !matches!(self.result, Some(Err(_))) {
            self.result = Some(Err(StoreError::RolledBack(reason.to_owned())));
        }
    }

    fn durable(&self) -> bool {
        self.durable
    }

    fn reply(self: Box<Self>) {
        let result = self.result.unwrap_or(Err(StoreError::Closed));
        // The caller may have given up waiting; the write stands regardless.
        let _ = self.reply.send(result);
    }
}

/// Wraps a write operation and the channel its outcome goes to. A write that
/// is not `durable` is one whose loss in a power cut is harmless (a run's
/// claim: the run is then claimed again), so it need not wait for an fsync.
pub(crate) fn job<T, F>(durable: bool, op: F, reply: oneshot::Sender<Result<T>>) -> Box<dyn Job>
where
    T: Send + 'static,
    F: FnOnce(&mut Db<'_>) -> Result<T> + Send + 'static,
{
    Box::new(Pending {
        durable,
        op: Some(op),
        result: None,
        reply,
    })
}

/// Writes that may wait for the writer; a caller beyond this waits (without
/// blocking its executor thread) until the writer takes some. Two full
/// batches: the next batch is ready when one commits, and a burst is held
/// in bounded memory instead of growing the queue without limit.
pub(crate) const QUEUE: usize = 2 * MAX_BATCH;

/// The writer thread's body: returns when every sender is gone.
pub(crate) fn run(conn: Connection, mut jobs: Receiver<Box<dyn Job>>, commits: Arc<AtomicU64>) {
    // FULL (2) or more: strict durability, where each commit is synced.
    let strict = conn
        .pragma_query_value(None, "synchronous", |row| row.get::<_, i64>(0))
        .is_ok_and(|level| level >= 2);
    let mut db = Db::new(&conn);
    let mut batch: Vec<Box<dyn Job>> = Vec::new();
    while let Some(first) = jobs.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if strict && batch.iter().any(|j| !j.durable()) {
            // Lazy writes (claims) commit first, on their own and without an
            // fsync, and are answered at once: they do not wait for the sync
            // of the durable writes that came with them. The next synced
            // commit makes them durable too (the WAL is sequential).
            let (mut lazy, durable): (Vec<_>, Vec<_>) = batch.drain(..).partition(|j| !j.durable());
            if let Err(e) = db.exec("PRAGMA synchronous = NORMAL") {
                tracing::warn!(error = %e, "could not relax the sync of lazy writes");
            }
            commit_all(&mut db, &mut lazy, &commits);
            if let Err(e) = db.exec("PRAGMA synchronous = FULL") {
                tracing::warn!(error = %e, "could not restore strict durability after lazy writes");
            }
            batch = durable;
        }
        commit_all(&mut db, &mut batch, &commits);
        // A burst can grow the buffer to MAX_BATCH; don't keep that while idle.
        batch.shrink_to(16);
    }
}

/// Commits `jobs` (in as few transactions as their failures allow) and
/// answers them.
fn commit_all(db: &mut Db<'_>, jobs: &mut Vec<Box<dyn Job>>, commits: &AtomicU64) {
    let mut done = 0;
    while done < jobs.len() {
        done += run_transaction(db, &mut jobs[done..], commits);
    }
    for job in jobs.drain(..) {
        job.reply();
    }
}

/// Runs `jobs` in one transaction, each in its own savepoint (a lone job
/// needs none: rolling back the transaction undoes only it). Returns how
/// many jobs it settled: all of them, unless one made SQLite abandon the
/// whole transaction, in which case the jobs after it are left for a fresh
/// one.
fn run_transaction(db: &mut Db<'_>, jobs: &mut [Box<dyn Job>], commits: &AtomicU64) -> usize {
    if !db.conn().is_autocommit() {
        // Never expected; a leftover transaction would swallow this batch.
        let _ = db.exec("ROLLBACK");
    }
    if let Err(e) = db.exec("BEGIN IMMEDIATE") {
        return fail_all(jobs, &format!("cannot begin transaction: {e}"));
    }
    if let [job] = jobs {
        // A savepoint makes SQLite copy every page the write touches into a
        // statement journal first, in case of a rollback to it: about a
        // tenth of a run's instructions when each write commits alone.
        if !job.run(db) {
            if !db.conn().is_autocommit() {
                let _ = db.exec("ROLLBACK");
            }
            return 1;
        }
        return commit(db, jobs, commits);
    }
    for i in 0..jobs.len() {
        if let Err(e) = db.exec("SAVEPOINT op") {
            return abort(db, jobs, &format!("cannot open savepoint: {e}"));
        }
        if jobs[i].run(db) {
            if let Err(e) = db.exec("RELEASE op") {
                return abort(db, jobs, &format!("cannot release savepoint: {e}"));
            }
        } else if db.conn().is_autocommit() {
            // SQLite rolled the whole transaction back (disk full, I/O error):
            // the writes before this one are lost with it.
            let reason = "an earlier failure in the same transaction aborted it";
            for job in &mut jobs[..i] {
                job.fail(reason);
            }
            return i + 1;
        } else if let Err(e) = db
            .exec("ROLLBACK TO op")
            .and_then(|()| db.exec("RELEASE op"))
        {
            return abort(db, jobs, &format!("cannot roll back savepoint: {e}"));
        }
    }
    commit(db, jobs, commits)
}

/// Commits the open transaction holding `jobs`; all of them fail when it
/// cannot. Returns how many jobs it settled (all).
fn commit(db: &mut Db<'_>, jobs: &mut [Box<dyn Job>], commits: &AtomicU64) -> usize {
    if let Err(e) = db.exec("COMMIT") {
        tracing::warn!(error = %e, writes = jobs.len(), "write batch failed to commit");
        return abort(db, jobs, &format!("cannot commit: {e}"));
    }
    commits.fetch_add(1, Ordering::Relaxed);
    // One commit is one WAL sync in strict durability: writes per commit is
    // how much the batching shares.
    metrics::counter!("hearth_store_commits_total").increment(1);
    metrics::counter!("hearth_store_writes_total").increment(jobs.len() as u64);
    tracing::trace!(writes = jobs.len(), "committed write batch");
    jobs.len()
}

fn abort(db: &mut Db<'_>, jobs: &mut [Box<dyn Job>], reason: &str) -> usize {
    if !db.conn().is_autocommit() {
        let _ = db.exec("ROLLBACK");
    }
    fail_all(jobs, reason)
}

fn fail_all(jobs: &mut [Box<dyn Job>], reason: &str) -> usize {
    for job in jobs.iter_mut() {
        job.fail(reason);
    }
    jobs.len()
}
