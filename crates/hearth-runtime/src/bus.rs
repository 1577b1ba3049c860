//! The event bus: each live run's numbered events, for SSE and `wait`.
//!
//! Logs live in memory: a run's log exists from ingest (or recovery) until a
//! while after its terminal event. A finished run whose log is gone is served
//! from the store instead.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use hearth_core::{RunEvent, RunEventKind, RunStatus};
use hearth_store::RunRecord;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

/// How long a finished run's events stay replayable from memory.
const FINISHED_RETENTION: Duration = Duration::from_secs(120);
/// At most this many finished logs are kept, oldest evicted first.
const FINISHED_MAX: usize = 512;

/// A run whose status changed or which gained an event on this replica:
/// its id, for live views (the dashboard) that redraw what they show of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunChange {
    /// The run.
    pub run_id: String,
    /// Its status after the change.
    pub status: RunStatus,
}

/// How many changes a slow live view may fall behind before it is told it
/// missed some (and redraws everything).
const CHANGES_CAPACITY: usize = 64;

/// The events of one run.
pub struct RunLog {
    run_id: String,
    /// Where status changes are announced (a send without receivers is free).
    changes: broadcast::Sender<RunChange>,
    /// Ids of this log's events start after `base` (a log that replaces an
    /// earlier one of the same run continues its numbering).
    base: u64,
    events: Mutex<Vec<RunEvent>>,
    /// (id of the last event, current status): changes wake followers.
    state: watch::Sender<(u64, RunStatus)>,
    /// The run as its end stored it, when this process ended it, the store
    /// gave it back with the end and it has no sub-agents: a `wait` answers
    /// with it instead of reading the run again.
    ended: OnceLock<RunRecord>,
}

impl RunLog {
    fn new(
        run_id: &str,
        changes: broadcast::Sender<RunChange>,
        status: RunStatus,
        base: u64,
    ) -> Self {
        let log = Self {
            run_id: run_id.to_owned(),
            changes,
            base,
            events: Mutex::new(Vec::new()),
            state: watch::Sender::new((base, status)),
            ended: OnceLock::new(),
        };
        log.announce();
        log
    }

    /// Tells live views that this run changed; only status changes and
    /// lifecycle events are announced, not every text delta.
    fn announce(&self) {
        if self.changes.receiver_count() > 0 {
            let _ = self.changes.send(RunChange {
                run_id: self.run_id.clone(),
                status: self.status(),
            });
        }
    }

    /// The id of the last event (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.state.borrow().0
    }

    fn events(&self) -> MutexGuard<'_, Vec<RunEvent>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends an event, numbering it, and wakes followers. A log that
    /// ended takes no second end: the end learnt from another replica (see
    /// `wakeups.rs`) and the one this process computed are the same.
    pub fn push(&self, kind: RunEventKind, data: Value, status: Option<RunStatus>) {
        let mut events = self.events();
        if kind.is_terminal() && self.status().is_terminal() {
            return;
        }
        let seq = events.last().map_or(self.base, |e| e.seq) + 1;
        events.push(RunEvent { seq, kind, data });
        drop(events);
        self.state.send_modify(|(n, st)| {
            *n = seq;
            if let Some(s) = status {
                *st = s;
            }
        });
        if status.is_some() {
            self.announce();
        }
    }

    /// Ends the log with `end`, numbered as the executing replica numbered
    /// it (`end.seq`, when later than what the log has), unless it ended
    /// already. Followers of a run another replica executed see the end
    /// under the id its own stream gave it.
    pub(crate) fn end_with(&self, end: RunEvent, status: RunStatus) {
        let mut events = self.events();
        if self.status().is_terminal() {
            return;
        }
        let seq = end.seq.max(events.last().map_or(self.base, |e| e.seq) + 1);
        events.push(RunEvent { seq, ..end });
        drop(events);
        self.state.send_modify(|(n, st)| {
            *n = seq;
            *st = status;
        });
        self.announce();
    }

    /// Sets the status without an event (e.g. queued -> running before `run.started`).
    pub fn set_status(&self, status: RunStatus) {
        self.state.send_modify(|(_, st)| *st = status);
        self.announce();
    }

    /// Events with `seq > after`.
    pub fn since(&self, after: u64) -> Vec<RunEvent> {
        let events = self.events();
        // By id, not by position: an end learnt from another replica keeps
        // that replica's id, which may skip some.
        let start = events.partition_point(|e| e.seq <= after);
        events[start..].to_vec()
    }

    /// A receiver that changes whenever an event is pushed or the status changes.
    pub fn subscribe(&self) -> watch::Receiver<(u64, RunStatus)> {
        self.state.subscribe()
    }

    /// The current status.
    pub fn status(&self) -> RunStatus {
        self.state.borrow().1
    }

    /// Keeps `run`, as its end stored it (terminal, without sub-agents),
    /// for the waiters its terminal event wakes. Set before that event.
    pub(crate) fn set_ended(&self, run: RunRecord) {
        let _ = self.ended.set(run);
    }

    /// The run as its end stored it, once the log is terminal and the end
    /// was stored by this process with the run given back.
    pub(crate) fn ended(&self) -> Option<&RunRecord> {
        self.ended.get().filter(|_| self.status().is_terminal())
    }
}

#[derive(Default)]
struct Logs {
    live: HashMap<String, Arc<RunLog>>,
    /// Finished logs by age, with the log itself: a run re-opened since has
    /// a new log, which is not evicted with the old one.
    finished: VecDeque<(Instant, String, Arc<RunLog>)>,
}

impl Logs {
    fn evict(&mut self, now: Instant, retention: Duration) {
        while let Some((at, _, _)) = self.finished.front() {
            let expired = now.duration_since(*at) > retention;
            if !expired && self.finished.len() <= FINISHED_MAX {
                break;
            }
            if let Some((_, id, old)) = self.finished.pop_front()
                && self.live.get(&id).is_some_and(|l| Arc::ptr_eq(l, &old))
            {
                self.live.remove(&id);
            }
        }
    }
}

/// All live run logs.
pub struct EventBus {
    logs: Mutex<Logs>,
    changes: broadcast::Sender<RunChange>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self {
            logs: Mutex::default(),
            changes: broadcast::channel(CHANGES_CAPACITY).0,
        }
    }
}

impl EventBus {
    /// Changes of runs from now on (see [`RunChange`]). A receiver that
    /// falls behind is told how many it missed.
    pub fn changes(&self) -> broadcast::Receiver<RunChange> {
        self.changes.subscribe()
    }

    fn logs(&self) -> MutexGuard<'_, Logs> {
        self.logs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The log of `run_id`, created (with `status`) if missing.
    pub fn open(&self, run_id: &str, status: RunStatus) -> Arc<RunLog> {
        let mut logs = self.logs();
        let changes = &self.changes;
        logs.live
            .entry(run_id.to_owned())
            .or_insert_with(|| Arc::new(RunLog::new(run_id, changes.clone(), status, 0)))
            .clone()
    }

    /// The log of `run_id`, made with the events `past` gives when missing
    /// (a follower of a run another replica executes); whether it was made.
    pub(crate) fn follow(
        &self,
        run_id: &str,
        status: RunStatus,
        past: impl FnOnce() -> Vec<RunEvent>,
    ) -> (Arc<RunLog>, bool) {
        let mut logs = self.logs();
        if let Some(log) = logs.live.get(run_id) {
            return (log.clone(), false);
        }
        let log = Arc::new(RunLog::new(run_id, self.changes.clone(), status, 0));
        {
            let mut events = log.events();
            *events = past();
            let last = events.last().map_or(0, |e| e.seq);
            log.state.send_modify(|(n, _)| *n = last);
        }
        logs.live.insert(run_id.to_owned(), log.clone());
        (log, true)
    }

    /// The log of a run this process has just claimed. A log whose run had
    /// ended (its end could not be stored, so the run executes again) is
    /// replaced by a fresh one that continues its numbering.
    pub(crate) fn reopen(&self, run_id: &str, status: RunStatus) -> Arc<RunLog> {
        let mut logs = self.logs();
        match logs.live.get(run_id) {
            Some(log) if !log.status().is_terminal() => log.clone(),
            old => {
                let base = old.map_or(0, |l| l.last_seq());
                let log = Arc::new(RunLog::new(run_id, self.changes.clone(), status, base));
                logs.live.insert(run_id.to_owned(), log.clone());
                log
            }
        }
    }

    /// The log of `run_id`, if it is still in memory.
    pub fn get(&self, run_id: &str) -> Option<Arc<RunLog>> {
        self.logs().live.get(run_id).cloned()
    }

    /// Marks a log finished; it is dropped after the retention period.
    pub fn finished(&self, run_id: &str) {
        let now = Instant::now();
        let mut logs = self.logs();
        if let Some(log) = logs.live.get(run_id).cloned() {
            logs.finished.push_back((now, run_id.to_owned(), log));
        }
        logs.evict(now, FINISHED_RETENTION);
    }

    /// Drops finished logs past the retention period; called periodically,
    /// so an idle hearth does not keep the last burst's logs forever.
    pub fn evict_expired(&self) {
        self.logs().evict(Instant::now(), FINISHED_RETENTION);
    }

    /// Number of logs in memory (for tests and metrics).
    pub fn len(&self) -> usize {
        self.logs().live.len()
    }

    /// True when no log is in memory.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_events_and_replays_after_cursor() {
        let bus = EventBus::default();
        let log = bus.open("r1", RunStatus::Queued);
        log.push(RunEventKind::Queued, json!({}), None);
        log.push(RunEventKind::Started, json!({}), Some(RunStatus::Running));
        log.push(
            RunEventKind::Succeeded,
            json!({}),
            Some(RunStatus::Succeeded),
        );
        let all = log.since(0);
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(log.since(2).len(), 1);
        assert!(log.since(99).is_empty());
        assert_eq!(log.status(), RunStatus::Succeeded);
    }

    #[test]
    fn status_changes_are_announced_but_deltas_are_not() {
        let bus = EventBus::default();
        let mut rx = bus.changes();
        let log = bus.open("r1", RunStatus::Queued);
        log.push(RunEventKind::TextDelta, json!({}), None);
        log.push(RunEventKind::Started, json!({}), Some(RunStatus::Running));
        let seen: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|c| (c.run_id, c.status))
            .collect();
        assert_eq!(
            seen,
            [
                ("r1".to_owned(), RunStatus::Queued),
                ("r1".to_owned(), RunStatus::Running)
            ]
        );
    }

    #[test]
    fn a_reopened_log_continues_the_numbering() {
        let bus = EventBus::default();
        let log = bus.open("r1", RunStatus::Queued);
        log.push(RunEventKind::Queued, json!({}), None);
        log.push(RunEventKind::Failed, json!({}), Some(RunStatus::Failed));
        assert!(Arc::ptr_eq(&log, &bus.open("r1", RunStatus::Failed)));
        let again = bus.reopen("r1", RunStatus::Running);
        again.push(RunEventKind::Started, json!({}), Some(RunStatus::Running));
        assert_eq!(
            again.since(0).iter().map(|e| e.seq).collect::<Vec<_>>(),
            [3]
        );
        assert_eq!(again.since(2).len(), 1);
        assert!(again.since(3).is_empty());
    }

    #[test]
    fn an_end_learnt_elsewhere_keeps_its_id_and_is_not_ended_twice() {
        let bus = EventBus::default();
        let (log, made) = bus.follow("r1", RunStatus::Running, || {
            vec![RunEvent {
                seq: 1,
                kind: RunEventKind::Queued,
                data: json!({}),
            }]
        });
        assert!(made);
        log.end_with(
            RunEvent {
                seq: 9,
                kind: RunEventKind::Succeeded,
                data: json!({"output": {"text": "a"}}),
            },
            RunStatus::Succeeded,
        );
        log.push(
            RunEventKind::Succeeded,
            json!({"output": {"text": "a"}}),
            Some(RunStatus::Succeeded),
        );
        let seqs: Vec<_> = log.since(0).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 9]);
        assert_eq!(log.since(1).len(), 1);
        assert!(log.since(9).is_empty());
        assert_eq!(log.last_seq(), 9);
    }

    #[test]
    fn idle_eviction_drops_expired_logs_only() {
        let bus = EventBus::default();
        let log = bus.open("done", RunStatus::Queued);
        log.push(
            RunEventKind::Cancelled,
            json!({}),
            Some(RunStatus::Cancelled),
        );
        bus.open("live", RunStatus::Running);
        bus.finished("done");
        {
            let mut logs = bus.logs();
            let later = Instant::now() + FINISHED_RETENTION + Duration::from_secs(1);
            logs.evict(later, FINISHED_RETENTION);
        }
        assert!(bus.get("done").is_none());
        assert!(bus.get("live").is_some());
    }

    #[test]
    fn evicts_finished_logs_beyond_cap() {
        let bus = EventBus::default();
        for i in 0..(FINISHED_MAX + 10) {
            let id = format!("r{i}");
            bus.open(&id, RunStatus::Queued);
            bus.finished(&id);
        }
        assert_eq!(bus.len(), FINISHED_MAX);
        assert!(bus.get("r0").is_none());
    }
}
