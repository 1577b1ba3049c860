//! Runs across replicas on a shared store (PostgreSQL): pulling work with
//! the store's `claim_next`, and acting on what other replicas notify.
//!
//! A replica pulls when the database says work may be claimable (a run
//! queued, a lease given up, a thread's run ended with another queued
//! behind it), when its listening connection is (re)established, and at
//! each upkeep round (every `lease_secs / 3`: a dead replica's lapsed lease
//! notifies nobody). Pulls are coalesced: one in flight, one pending, however
//! many notifications arrive meanwhile. Idle, an upkeep round sends two
//! queries (the heartbeat and one `claim_next` that finds nothing); the
//! listening connection sends none.
//!
//! The replica that ends a run takes its thread's next queued run itself at
//! once, so a thread's follow-up does not wait for a round trip through
//! `NOTIFY`. A run that ends elsewhere stops here if this replica executes
//! it (a cancel on another replica), and ends the log its followers here
//! read (`?wait=`, SSE), with the stored answer under the id the executing
//! replica's stream gave it. A thread turned incognito or back on any
//! replica changes the flag here (see `incognito.rs` for who holds it).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hearth_core::{RunEvent, RunStatus, now_ms};
use hearth_store::{RunRecord, Wake};
use tokio::sync::Notify;
use tracing::{debug, warn};

use crate::bus::RunLog;
use crate::error::Result;
use crate::events::{step_events, stored_events};
use crate::runtime::{Runtime, lease_ms};
use crate::scheduler::CancelFound;

/// What the runtime keeps for wake-ups.
#[derive(Default)]
pub(crate) struct Wakeups {
    /// Asks the pulling task for a pull; a permit is kept when it is busy,
    /// which makes "one in flight, one pending".
    pull: Arc<Notify>,
    /// Runs whose log here follows another replica's execution.
    followed: Mutex<HashSet<String>>,
    /// Whether the listening connection is established (for `/readyz`).
    listening: std::sync::atomic::AtomicBool,
    /// Runs whose end this process is storing and telling: the end the
    /// database then announces is their own, and nothing here need read it.
    ending: Mutex<HashSet<String>>,
}

impl Wakeups {
    fn followed(&self) -> MutexGuard<'_, HashSet<String>> {
        self.followed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ending(&self) -> MutexGuard<'_, HashSet<String>> {
        self.ending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `run_id` as ended by this process until the guard is dropped
    /// (once its followers here were told).
    pub(crate) fn ending_here<'a>(&'a self, run_id: &str) -> EndingHere<'a> {
        self.ending().insert(run_id.to_owned());
        EndingHere {
            wakeups: self,
            run_id: run_id.to_owned(),
        }
    }
}

/// A run this process is ending; see [`Wakeups::ending_here`].
pub(crate) struct EndingHere<'a> {
    wakeups: &'a Wakeups,
    run_id: String,
}

impl Drop for EndingHere<'_> {
    fn drop(&mut self) {
        self.wakeups.ending().remove(&self.run_id);
    }
}

impl Runtime {
    /// On a shared store: starts the pulling task and the listener.
    pub(crate) fn start_wakeups(&self) {
        let Some(cluster) = self.inner.store.cluster() else {
            return;
        };
        let mut wakes = cluster.listen();
        let weak = Arc::downgrade(&self.inner);
        let pull = self.inner.wakeups.pull.clone();
        tokio::spawn(async move {
            loop {
                pull.notified().await;
                let Some(inner) = weak.upgrade() else { return };
                let rt = Runtime { inner };
                if let Err(e) = rt.pull().await {
                    warn!(error = %e, "could not claim queued runs; retrying at the next wake-up or round");
                }
            }
        });
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            while let Some(wake) = wakes.recv().await {
                let Some(inner) = weak.upgrade() else { return };
                let rt = Runtime { inner };
                match wake {
                    Wake::Work => rt.request_pull(),
                    Wake::Connected => {
                        rt.request_pull();
                        rt.settle_followed().await;
                        // A thread turned incognito, or a job changed, while
                        // nobody listened.
                        rt.reload_incognito().await;
                        rt.inner.jobs_wake.notify_one();
                        rt.inner.wakeups.listening.store(true, Ordering::Relaxed);
                    }
                    Wake::Lost => rt.inner.wakeups.listening.store(false, Ordering::Relaxed),
                    Wake::Ended(run_id) => rt.ended_elsewhere(&run_id).await,
                    Wake::Incognito { thread_key, on } => {
                        rt.inner.incognito.set_thread(&thread_key, on);
                        if !on {
                            rt.let_go_incognito(&thread_key).await;
                        }
                    }
                    Wake::Asks(run_id) => rt.asks_elsewhere(&run_id),
                    Wake::Jobs => rt.inner.jobs_wake.notify_one(),
                    Wake::Confirmation(run_id) => {
                        rt.inner.live().engine.confirmations().wake(&run_id);
                        if let Some(log) = rt.followed_log(&run_id)
                            && log.status() == RunStatus::AwaitingConfirmation
                        {
                            log.set_status(RunStatus::Running);
                        }
                    }
                }
            }
        });
    }

    /// On a shared store, whether this replica hears the others now
    /// (`/readyz` shows it; not being heard slows wake-ups to the upkeep
    /// round but stops nothing). `None` when alone with the store.
    pub fn hears_other_replicas(&self) -> Option<bool> {
        self.inner.store.cluster()?;
        Some(self.inner.wakeups.listening.load(Ordering::Relaxed))
    }

    /// The stored incognito flags, taken again.
    async fn reload_incognito(&self) {
        match self.inner.store.incognito_threads().await {
            Ok(keys) => self.inner.incognito.replace_threads(keys),
            Err(e) => warn!(error = %e, "could not read the incognito threads again"),
        }
    }

    /// Asks for a pull (coalesced with any pending one).
    pub(crate) fn request_pull(&self) {
        self.inner.wakeups.pull.notify_one();
    }

    /// Claims runs with `claim_next` until none is left (or this process
    /// has as many as it takes) and queues each on its thread; returns how
    /// many. The thread's worker claims its run again, which the store
    /// allows its owner, and records the model then.
    pub(crate) async fn pull(&self) -> Result<usize> {
        let Some(cluster) = self.inner.store.cluster() else {
            return Ok(0);
        };
        let owner = self.inner.options.owner.as_str();
        let mut n = 0;
        while !self.is_shutting_down() && self.inner.scheduler.len() < self.inner.options.max_queued
        {
            let now = now_ms();
            let until = now + lease_ms(&self.inner.options);
            let Some(run) = cluster.claim_next(owner, until, now).await? else {
                break;
            };
            self.adopt(run);
            n += 1;
        }
        if n > 0 {
            debug!(runs = n, "claimed queued runs");
        }
        Ok(n)
    }

    /// Queues a run this process claimed, as the recovery sweep does, with
    /// what the surface that took its message on another replica supplied.
    fn adopt(&self, claimed: hearth_store::Claimed) {
        let run = &claimed.run;
        if let Some(json) = &claimed.supplied {
            match crate::supplied::RunOverrides::from_carried(json) {
                Ok(overrides) => self.inner.supplied.put_if_absent(&run.run_id, overrides),
                // Run as its thread says, and say why.
                Err(e) => {
                    warn!(run_id = %run.run_id, error = %e, "a claimed run's supplied model and history are not readable; it runs with its thread's");
                }
            }
        }
        if run.source == crate::direct::DIRECT_SOURCE {
            self.inner.direct.put(&run.run_id);
        }
        self.inner.wakeups.followed().remove(&run.run_id);
        // Every run it claims is `running` now: only the mode its first
        // claim recorded tells one that had started elsewhere.
        if run.mode.is_some() {
            self.inner.families.resumed(run);
        }
        self.inner.bus.open(&run.run_id, run.status);
        self.schedule(&run.thread_key, &run.run_id);
    }

    /// After a run of `thread_key` ended here: claims the thread's next
    /// queued run now. When this process has it queued, that one: its end
    /// told the other replicas too, and one of them could take it without
    /// what this process holds for it (its overrides). Otherwise the store
    /// is asked only when `may_be_queued` (the end did not see the thread
    /// without a queued run): a run queued after that wakes every replica
    /// by its own insert.
    pub(crate) async fn take_next_of_thread(&self, thread_key: &str, may_be_queued: bool) {
        let Some(cluster) = self.inner.store.cluster() else {
            return;
        };
        if self.is_shutting_down() {
            return;
        }
        let now = now_ms();
        let until = now + lease_ms(&self.inner.options);
        let owner = &self.inner.options.owner;
        if let Some(next) = self.inner.scheduler.runs_of(thread_key).get(1) {
            // Its worker claims it again (allowed to its owner) with its model.
            if let Err(e) = self.inner.store.claim_run(next, owner, until, now).await {
                warn!(error = %e, "could not claim a thread's next run; its worker tries again");
            }
            return;
        }
        if !may_be_queued {
            return;
        }
        match cluster
            .claim_next_of_thread(thread_key, owner, until, now)
            .await
        {
            Ok(Some(run)) => self.adopt(run),
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "could not claim a thread's next run; a wake-up or the next round takes it");
            }
        }
    }

    /// The log of `run_id` here, when it follows another replica.
    fn followed_log(&self, run_id: &str) -> Option<Arc<RunLog>> {
        if !self.inner.wakeups.followed().contains(run_id) {
            return None;
        }
        self.inner.bus.get(run_id)
    }

    /// A run began waiting for an answer on another replica: its followers
    /// here (`?wait=` returns then) learn it.
    fn asks_elsewhere(&self, run_id: &str) {
        if let Some(log) = self.followed_log(run_id)
            && !log.status().is_terminal()
        {
            log.set_status(RunStatus::AwaitingConfirmation);
        }
    }

    /// A run ended, maybe elsewhere: if this process executes it (a cancel
    /// on another replica), it stops; a log here that waits for its end
    /// gets the stored end.
    async fn ended_elsewhere(&self, run_id: &str) {
        if self.inner.wakeups.ending().contains(run_id) {
            // Its end is this process's own (or, when another replica ended
            // it first, found by the end this process tried to store): the
            // finish tells its followers.
            return;
        }
        let Some(log) = self.inner.bus.get(run_id) else {
            return;
        };
        if log.status().is_terminal() {
            return;
        }
        let run = match self.inner.store.get_run(run_id).await {
            Ok(Some(run)) if run.status.is_terminal() => run,
            Ok(_) => return,
            Err(e) => {
                warn!(run_id, error = %e, "could not read a run that ended on another replica");
                return;
            }
        };
        match self.inner.scheduler.cancel(&run.thread_key, run_id) {
            // Its worker stops, finds the run ended in the store and tells
            // the followers what the store holds.
            CancelFound::Active => return,
            CancelFound::Queued => {
                self.inner.supplied.take(run_id);
                self.inner.held.take(run_id);
                if self.inner.preclaimed.take(run_id).is_some() {
                    self.inner.executing_remove(run_id);
                }
                // Claimed here and never started: nothing left to stop.
                self.let_go(run_id, &run.thread_key).await;
            }
            CancelFound::NotHere => {}
        }
        self.settle(&log, &run).await;
    }

    /// Gives up this replica's lease on `run_id`, ended by another process
    /// while claimed here, once nothing of it runs here any more, and takes
    /// its thread's next run: that end kept the lease so that the thread's
    /// next run would not start beside this one (migration 0023).
    pub(crate) async fn let_go(&self, run_id: &str, thread_key: &str) {
        let Some(cluster) = self.inner.store.cluster() else {
            return;
        };
        match cluster.let_go(run_id, &self.inner.options.owner).await {
            Ok(true) => self.take_next_of_thread(thread_key, true).await,
            Ok(false) => {}
            Err(e) => {
                warn!(run_id, error = %e, "could not give up the lease of a run ended elsewhere; its thread waits until the lease lapses");
            }
        }
    }

    /// Ends `log` with the stored end of `run`, after the tool calls of its
    /// journal the log has not told yet.
    async fn settle(&self, log: &RunLog, run: &RunRecord) {
        self.inner.wakeups.followed().remove(&run.run_id);
        match self.inner.store.steps(&run.run_id).await {
            Ok(steps) => {
                let told: HashSet<(&'static str, String)> = log
                    .since(0)
                    .iter()
                    .map(|e| (e.kind.as_str(), e.data["call_id"].to_string()))
                    .collect();
                for (kind, data) in step_events(&steps) {
                    if !told.contains(&(kind.as_str(), data["call_id"].to_string())) {
                        log.push(kind, data, None);
                    }
                }
            }
            Err(e) => {
                warn!(run_id = %run.run_id, error = %e, "could not read a followed run's steps; its end alone is told");
            }
        }
        if let Some(end) = stored_events(run)
            .into_iter()
            .rfind(|e| e.kind.is_terminal())
        {
            log.end_with(end, run.status);
            self.inner.bus.finished(&run.run_id);
        }
    }

    /// A log here for `run`, which another replica may be executing: its
    /// stored lifecycle so far, ended when the run ends.
    pub(crate) async fn follow_remote(&self, run: &RunRecord) -> Result<Arc<RunLog>> {
        // Its lifecycle so far and the tool calls journaled so far.
        let steps = self.inner.store.steps(&run.run_id).await?;
        let (log, made) = self.inner.bus.follow(&run.run_id, run.status, || {
            let mut past: Vec<RunEvent> = stored_events(run)
                .into_iter()
                .filter(|e| !e.kind.is_terminal())
                .collect();
            for (kind, data) in step_events(&steps) {
                let seq = past.last().map_or(0, |e| e.seq) + 1;
                past.push(RunEvent { seq, kind, data });
            }
            past
        });
        if !made {
            return Ok(log);
        }
        self.inner.wakeups.followed().insert(run.run_id.clone());
        // Its end is notified only when somebody asked (migration 0015); an
        // end committed before the ask is read just below.
        if let Some(cluster) = self.inner.store.cluster() {
            cluster.watch_end(&run.run_id).await?;
        }
        // The end may have been notified before the log existed.
        if let Some(now) = self.inner.store.get_run(&run.run_id).await?
            && now.status.is_terminal()
        {
            self.settle(&log, &now).await;
        }
        Ok(log)
    }

    /// Looks in the store for the end of every run followed here: a
    /// notification lost while the listener was down is not waited for
    /// beyond one upkeep round. Costs nothing when nothing is followed.
    pub(crate) async fn settle_followed(&self) {
        let ids: Vec<String> = self.inner.wakeups.followed().iter().cloned().collect();
        for run_id in ids {
            let Some(log) = self.inner.bus.get(&run_id) else {
                self.inner.wakeups.followed().remove(&run_id);
                continue;
            };
            match self.inner.store.get_run(&run_id).await {
                Ok(Some(run)) if run.status.is_terminal() => self.settle(&log, &run).await,
                Ok(Some(run)) if run.status == RunStatus::AwaitingConfirmation => {
                    log.set_status(RunStatus::AwaitingConfirmation);
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    self.inner.wakeups.followed().remove(&run_id);
                }
                Err(e) => {
                    warn!(run_id, error = %e, "could not read a followed run");
                    return;
                }
            }
        }
    }
}
