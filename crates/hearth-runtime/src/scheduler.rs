//! Per-thread queues: one run at a time per thread, in arrival order.
//!
//! Arrival order is the store's commit order. Ingest on one thread holds the
//! thread's ingest lock from `create_run` until the run is queued, so the queue
//! order is the commit order even when messages arrive at the same instant.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hearth_store::RunRecord;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The next run of a thread: its record, its cancel token and its steer inbox.
pub(crate) type NextRun = (
    RunRecord,
    CancellationToken,
    mpsc::UnboundedReceiver<(i64, String)>,
);

/// The run a thread is working on.
pub(crate) struct ActiveRun {
    pub run_id: String,
    pub cancel: CancellationToken,
    pub steer: mpsc::UnboundedSender<(i64, String)>,
}

#[derive(Default)]
pub(crate) struct Slot {
    /// Held across `create_run` + enqueue; its strong count also pins the slot.
    pub ingest: Arc<tokio::sync::Mutex<()>>,
    pub queue: VecDeque<RunRecord>,
    pub worker: bool,
    pub active: Option<ActiveRun>,
}

/// All threads with queued or running work (idle threads have no slot).
#[derive(Default)]
pub(crate) struct Scheduler {
    threads: Mutex<HashMap<String, Slot>>,
}

/// What `enqueue` asks the caller to do.
pub(crate) enum Enqueued {
    /// A worker already serves the thread.
    Served,
    /// Start a worker for the thread.
    StartWorker,
}

impl Scheduler {
    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread's ingest lock (creating the slot), pinned while held.
    pub fn ingest_lock(&self, thread_key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.lock()
            .entry(thread_key.to_owned())
            .or_default()
            .ingest
            .clone()
    }

    /// Queues a stored run behind the thread's others.
    pub fn enqueue(&self, run: RunRecord) -> Enqueued {
        let mut threads = self.lock();
        let slot = threads.entry(run.thread_key.clone()).or_default();
        slot.queue.push_back(run);
        if slot.worker {
            Enqueued::Served
        } else {
            slot.worker = true;
            Enqueued::StartWorker
        }
    }

    /// The thread's next run, marked active; `None` ends the worker (and drops
    /// the slot when nobody is ingesting on it).
    pub fn next(&self, thread_key: &str) -> Option<NextRun> {
        let mut threads = self.lock();
        let slot = threads.get_mut(thread_key)?;
        slot.active = None;
        match slot.queue.pop_front() {
            Some(run) => {
                let cancel = CancellationToken::new();
                let (tx, rx) = mpsc::unbounded_channel();
                slot.active = Some(ActiveRun {
                    run_id: run.run_id.clone(),
                    cancel: cancel.clone(),
                    steer: tx,
                });
                Some((run, cancel, rx))
            }
            None => {
                slot.worker = false;
                if Arc::strong_count(&slot.ingest) == 1 {
                    threads.remove(thread_key);
                }
                None
            }
        }
    }

    /// The run the thread is working on, if any.
    pub fn active_run(&self, thread_key: &str) -> Option<String> {
        let threads = self.lock();
        Some(threads.get(thread_key)?.active.as_ref()?.run_id.clone())
    }

    /// Hands a stored steer to `run_id` if it is still the thread's active run
    /// and still listening; false otherwise.
    pub fn send_steer(&self, thread_key: &str, run_id: &str, id: i64, text: &str) -> bool {
        let threads = self.lock();
        threads
            .get(thread_key)
            .and_then(|s| s.active.as_ref())
            .filter(|a| a.run_id == run_id)
            .is_some_and(|a| a.steer.send((id, text.to_owned())).is_ok())
    }

    /// Cancels `run_id` if this process has it: the active run's token is
    /// cancelled; a queued run is removed and returned (the caller finishes it).
    pub fn cancel(&self, thread_key: &str, run_id: &str) -> CancelFound {
        let mut threads = self.lock();
        let Some(slot) = threads.get_mut(thread_key) else {
            return CancelFound::NotHere;
        };
        if let Some(a) = slot.active.as_ref().filter(|a| a.run_id == run_id) {
            a.cancel.cancel();
            return CancelFound::Active;
        }
        match slot.queue.iter().position(|r| r.run_id == run_id) {
            Some(i) => match slot.queue.remove(i) {
                Some(r) => CancelFound::Queued(Box::new(r)),
                None => CancelFound::NotHere,
            },
            None => CancelFound::NotHere,
        }
    }

    /// Run ids queued or active on a thread.
    pub fn runs_of(&self, thread_key: &str) -> Vec<String> {
        let threads = self.lock();
        let Some(slot) = threads.get(thread_key) else {
            return Vec::new();
        };
        slot.active
            .iter()
            .map(|a| a.run_id.clone())
            .chain(slot.queue.iter().map(|r| r.run_id.clone()))
            .collect()
    }
}

/// Where `Scheduler::cancel` found the run.
pub(crate) enum CancelFound {
    /// Running now; its token was cancelled.
    Active,
    /// Waiting in the queue; removed.
    Queued(Box<RunRecord>),
    /// Not in this process's queues.
    NotHere,
}
