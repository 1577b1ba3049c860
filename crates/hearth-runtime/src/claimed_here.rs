//! Runs this process stored already claimed, kept until their thread's
//! worker takes them: what the worker may skip for a run that nobody ran.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hearth_core::Timestamp;
use hearth_store::{HistorySeen, RunRecord};

use crate::execute::Prepared;
use crate::live::Live;

/// Runs stored already claimed by this process, with what they were
/// prepared with, until their thread's worker takes them. A message to a
/// thread with nothing else to run is stored and claimed in one commit
/// (`Runtime::ingest_stored`) instead of one each: the hot path of a chat.
#[derive(Default)]
pub(crate) struct Preclaimed(Mutex<HashMap<String, PreclaimedRun>>);

/// The configuration a preclaimed run was prepared with (it keeps it to its
/// end), its stored record, what it was prepared with, and what its insert
/// saw of its thread's stored history, when the store said.
type PreclaimedRun = (Arc<Live>, RunRecord, Prepared, Option<HistorySeen>);

impl Preclaimed {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, PreclaimedRun>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn put(
        &self,
        live: Arc<Live>,
        run: RunRecord,
        prepared: Prepared,
        history_seen: Option<HistorySeen>,
    ) {
        self.lock()
            .insert(run.run_id.clone(), (live, run, prepared, history_seen));
    }

    pub(crate) fn take(&self, run_id: &str) -> Option<PreclaimedRun> {
        self.lock().remove(run_id)
    }
}

/// Runs stored held by this process: claimed, without a model (a routed
/// run, a direct call, a sub-agent, a thread whose settings the defaults
/// did not match), for their worker to prepare and claim again. Such a run
/// never ran anywhere while the lease its insert took holds (no other
/// replica may claim it before it lapses), so its worker reads no journal
/// or stored steers for it, and no history when its thread had none: the
/// reads a run stored claimed with its model skips too (and the history
/// when the replica holds it up to the newest row its insert saw).
#[derive(Default)]
pub(crate) struct Held(Mutex<HashMap<String, HeldRun>>);

/// The lease a held run's insert took, and what it saw of its thread's
/// stored history, when the store said.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldRun {
    pub(crate) lease_until: Timestamp,
    pub(crate) history_seen: Option<HistorySeen>,
}

impl HeldRun {
    /// Whether a claim at `now` still falls within the insert's lease, by a
    /// margin of `margin_ms` for the clocks of other replicas: then no one
    /// else can have claimed, let alone run, the run since.
    pub(crate) fn unclaimed_since_insert(&self, now: Timestamp, margin_ms: i64) -> bool {
        now.saturating_add(margin_ms) < self.lease_until
    }
}

impl Held {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, HeldRun>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn put(&self, run_id: &str, held: HeldRun) {
        self.lock().insert(run_id.to_owned(), held);
    }

    pub(crate) fn take(&self, run_id: &str) -> Option<HeldRun> {
        self.lock().remove(run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_run_is_unclaimed_only_well_within_its_lease() {
        let held = HeldRun {
            lease_until: 20_000,
            history_seen: Some(HistorySeen::Empty),
        };
        assert!(held.unclaimed_since_insert(10_000, 5_000));
        assert!(!held.unclaimed_since_insert(15_000, 5_000));
        assert!(!held.unclaimed_since_insert(21_000, 0));
        let h = Held::default();
        h.put("r", held);
        assert!(h.take("r").is_some());
        assert!(h.take("r").is_none());
    }
}
