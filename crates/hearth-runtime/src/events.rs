//! A run's events for followers: the live log while it is in memory, else a
//! replay of its lifecycle from the store that keeps the live numbering.

use std::sync::Arc;

use hearth_core::{RunEvent, RunEventKind, RunStatus};
use hearth_store::RunRecord;
use serde_json::json;

use crate::bus::RunLog;
use crate::error::Result;
use crate::runtime::Runtime;

/// Where a run's events come from.
pub enum RunEvents {
    /// The run's log is in memory: past events, then live ones.
    Live(Arc<RunLog>),
    /// The log is gone (finished a while ago, or before a restart): the
    /// run's lifecycle without deltas.
    Stored(Vec<RunEvent>),
}

impl Runtime {
    /// The events of `run_id` (`RunNotFound` when there is no such run).
    pub async fn events(&self, run_id: &str) -> Result<RunEvents> {
        if let Some(log) = self.inner.bus.get(run_id) {
            return Ok(RunEvents::Live(log));
        }
        let run = self.run_record(run_id).await?;
        // It may have been re-opened meanwhile (a recovered run starting).
        if let Some(log) = self.inner.bus.get(run_id) {
            return Ok(RunEvents::Live(log));
        }
        // Executed by another replica: its stored lifecycle, then its end
        // when the database tells of it.
        if self.inner.store.cluster().is_some()
            && !run.status.is_terminal()
            && !self.is_incognito_run(run_id)
        {
            return Ok(RunEvents::Live(self.follow_remote(&run).await?));
        }
        Ok(RunEvents::Stored(stored_events(&run)))
    }
}

/// The lifecycle of a run whose live log is gone: `run.queued` (1),
/// `run.started` (2) once it had a model, and the terminal event under the id
/// the live stream gave it, so a client resuming with `Last-Event-ID` from
/// the live stream still gets the end (runs finished before that id was
/// stored number it next).
pub(crate) fn stored_events(run: &RunRecord) -> Vec<RunEvent> {
    let mut out = vec![RunEvent {
        seq: 1,
        kind: RunEventKind::Queued,
        data: json!({ "run_id": run.run_id, "thread_key": run.thread_key }),
    }];
    if run.model.is_some() {
        out.push(RunEvent {
            seq: 2,
            kind: RunEventKind::Started,
            data: json!({ "run_id": run.run_id, "model": run.model }),
        });
    }
    let terminal = match run.status {
        RunStatus::Succeeded => Some((
            RunEventKind::Succeeded,
            json!({ "run_id": run.run_id, "output": { "text": run.output.clone().unwrap_or_default() } }),
        )),
        RunStatus::Failed => Some((
            RunEventKind::Failed,
            json!({ "run_id": run.run_id, "error": {
                "code": run.error_code, "message": run.error_message } }),
        )),
        RunStatus::Cancelled => Some((RunEventKind::Cancelled, json!({ "run_id": run.run_id }))),
        RunStatus::Queued | RunStatus::Running | RunStatus::AwaitingConfirmation => None,
    };
    if let Some((kind, data)) = terminal {
        let next = out.len() as u64 + 1;
        out.push(RunEvent {
            seq: run.last_event_seq.filter(|&n| n >= next).unwrap_or(next),
            kind,
            data,
        });
    }
    out
}
