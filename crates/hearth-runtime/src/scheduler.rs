//! Per-thread queues: one run at a time per thread, in arrival order.
//!
//! Arrival order is the store's commit order. Ingest on one thread holds the
//! thread's ingest lock from `create_run` until the run is queued, so the queue
//! order is the commit order even when messages arrive at the same instant.
//!
//! The queues hold run ids only (the record is read when the run is claimed),
//! a run id is queued at most once in the process, and the total is bounded:
//! past `max_queued` new messages are refused (`Overloaded`) rather than
//! growing memory. None of this decides who executes a run: that is the
//! store's atomic claim, so a run queued twice (here and by another process)
//! still runs once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Steered messages a run's inbox holds before a steer waits for the store
/// path (it then becomes a follow-up).
const STEER_INBOX: usize = 64;

/// A steered message: its stored id and text.
pub(crate) type Steer = (i64, String);

/// The next run of a thread: its id, its cancel token and its steer inbox.
pub(crate) struct NextRun {
    pub run_id: String,
    pub cancel: CancellationToken,
    pub steer: mpsc::Receiver<Steer>,
}

/// The run a thread is working on.
pub(crate) struct ActiveRun {
    pub run_id: String,
    pub cancel: CancellationToken,
    pub steer: mpsc::Sender<Steer>,
}

#[derive(Default)]
pub(crate) struct Slot {
    /// Held across `create_run` + enqueue; its strong count also pins the slot.
    pub ingest: Arc<tokio::sync::Mutex<()>>,
    pub queue: VecDeque<String>,
    pub worker: bool,
    pub active: Option<ActiveRun>,
}

#[derive(Default)]
pub(crate) struct Threads {
    slots: HashMap<String, Slot>,
    /// Every run id queued or active in this process.
    known: HashSet<String>,
}

/// All threads with queued or running work (idle threads have no slot).
#[derive(Default)]
pub(crate) struct Scheduler {
    threads: Mutex<Threads>,
}

/// What `enqueue` asks the caller to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Enqueued {
    /// A worker already serves the thread.
    Served,
    /// Start a worker for the thread.
    StartWorker,
    /// The run is already queued or running here: nothing to do.
    Duplicate,
}

impl Scheduler {
    fn lock(&self) -> MutexGuard<'_, Threads> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread's ingest lock (creating the slot), pinned while held.
    pub fn ingest_lock(&self, thread_key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.lock()
            .slots
            .entry(thread_key.to_owned())
            .or_default()
            .ingest
            .clone()
    }

    /// Runs queued or active in this process.
    pub fn len(&self) -> usize {
        self.lock().known.len()
    }

    /// True when `run_id` is queued or active here.
    pub fn knows(&self, run_id: &str) -> bool {
        self.lock().known.contains(run_id)
    }

    /// True when the thread has no worker here (so nothing queued or
    /// running in this process): a run stored now is the next it runs.
    pub fn is_idle(&self, thread_key: &str) -> bool {
        self.lock()
            .slots
            .get(thread_key)
            .is_none_or(|slot| !slot.worker && slot.queue.is_empty())
    }

    /// Queues a stored run behind the thread's others (once).
    pub fn enqueue(&self, thread_key: &str, run_id: &str) -> Enqueued {
        let mut t = self.lock();
        if !t.known.insert(run_id.to_owned()) {
            return Enqueued::Duplicate;
        }
        let slot = t.slots.entry(thread_key.to_owned()).or_default();
        slot.queue.push_back(run_id.to_owned());
        if slot.worker {
            Enqueued::Served
        } else {
            slot.worker = true;
            Enqueued::StartWorker
        }
    }

    /// Ends the thread's active run and returns its next one, marked active;
    /// `None` ends the worker (and drops the slot when nobody is ingesting on
    /// it). With `stop`, no new run is taken: the rest stay queued in the
    /// store for the next start.
    pub fn next(&self, thread_key: &str, stop: bool) -> Option<NextRun> {
        let mut t = self.lock();
        let Threads { slots, known } = &mut *t;
        let slot = slots.get_mut(thread_key)?;
        if let Some(done) = slot.active.take() {
            known.remove(&done.run_id);
        }
        let next = if stop { None } else { slot.queue.pop_front() };
        match next {
            Some(run_id) => {
                let cancel = CancellationToken::new();
                let (tx, rx) = mpsc::channel(STEER_INBOX);
                slot.active = Some(ActiveRun {
                    run_id: run_id.clone(),
                    cancel: cancel.clone(),
                    steer: tx,
                });
                Some(NextRun {
                    run_id,
                    cancel,
                    steer: rx,
                })
            }
            None => {
                for id in slot.queue.drain(..) {
                    known.remove(&id);
                }
                slot.worker = false;
                if Arc::strong_count(&slot.ingest) == 1 {
                    slots.remove(thread_key);
                }
                None
            }
        }
    }

    /// Stops counting a run that has ended (before its followers are told,
    /// so a client that saw the end finds the room it freed).
    pub fn ended(&self, run_id: &str) {
        self.lock().known.remove(run_id);
    }

    /// The run the thread is working on, if any.
    pub fn active_run(&self, thread_key: &str) -> Option<String> {
        let t = self.lock();
        Some(t.slots.get(thread_key)?.active.as_ref()?.run_id.clone())
    }

    /// Hands a stored steer to `run_id` if it is still the thread's active run
    /// and its inbox has room; false otherwise.
    pub fn send_steer(&self, thread_key: &str, run_id: &str, id: i64, text: &str) -> bool {
        let t = self.lock();
        t.slots
            .get(thread_key)
            .and_then(|s| s.active.as_ref())
            .filter(|a| a.run_id == run_id)
            .is_some_and(|a| a.steer.try_send((id, text.to_owned())).is_ok())
    }

    /// Cancels `run_id` if this process has it: the active run's token is
    /// cancelled; a queued run is removed (the caller finishes it).
    pub fn cancel(&self, thread_key: &str, run_id: &str) -> CancelFound {
        let mut t = self.lock();
        let Threads { slots, known } = &mut *t;
        let Some(slot) = slots.get_mut(thread_key) else {
            return CancelFound::NotHere;
        };
        if let Some(a) = slot.active.as_ref().filter(|a| a.run_id == run_id) {
            a.cancel.cancel();
            return CancelFound::Active;
        }
        match slot.queue.iter().position(|r| r == run_id) {
            Some(i) => {
                slot.queue.remove(i);
                known.remove(run_id);
                CancelFound::Queued
            }
            None => CancelFound::NotHere,
        }
    }

    /// Run ids queued or active on a thread.
    pub fn runs_of(&self, thread_key: &str) -> Vec<String> {
        let t = self.lock();
        let Some(slot) = t.slots.get(thread_key) else {
            return Vec::new();
        };
        slot.active
            .iter()
            .map(|a| a.run_id.clone())
            .chain(slot.queue.iter().cloned())
            .collect()
    }
}

/// Where `Scheduler::cancel` found the run.
pub(crate) enum CancelFound {
    /// Running now; its token was cancelled.
    Active,
    /// Waiting in the queue; removed.
    Queued,
    /// Not in this process's queues.
    NotHere,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_queued_once() {
        let s = Scheduler::default();
        assert_eq!(s.enqueue("t", "r1"), Enqueued::StartWorker);
        assert_eq!(s.enqueue("t", "r1"), Enqueued::Duplicate);
        assert_eq!(s.enqueue("t", "r2"), Enqueued::Served);
        assert_eq!(s.len(), 2);
        let first = s.next("t", false).map(|n| n.run_id);
        assert_eq!(first.as_deref(), Some("r1"));
        // Still active: queuing it again (a sweep) is a duplicate.
        assert_eq!(s.enqueue("t", "r1"), Enqueued::Duplicate);
        assert_eq!(s.next("t", false).map(|n| n.run_id).as_deref(), Some("r2"));
        assert!(s.next("t", false).is_none());
        assert_eq!(s.len(), 0);
        // Finished and gone from the queues: it may be queued again.
        assert_eq!(s.enqueue("t", "r1"), Enqueued::StartWorker);
    }

    #[test]
    fn stopping_takes_no_new_run_and_forgets_the_queue() {
        let s = Scheduler::default();
        s.enqueue("t", "r1");
        s.enqueue("t", "r2");
        assert!(s.next("t", false).is_some());
        assert!(s.next("t", true).is_none());
        assert_eq!(s.len(), 0);
        assert!(s.runs_of("t").is_empty());
    }

    #[test]
    fn a_full_steer_inbox_refuses_instead_of_growing() {
        let s = Scheduler::default();
        s.enqueue("t", "r1");
        let _next = s.next("t", false);
        for i in 0..STEER_INBOX {
            assert!(s.send_steer("t", "r1", i as i64, "x"));
        }
        assert!(!s.send_steer("t", "r1", 999, "x"));
        assert!(!s.send_steer("t", "other", 1, "x"));
    }
}
