//! A run's events for followers: the live log while it is in memory, else a
//! replay of its lifecycle from the store that keeps the live numbering.

use std::sync::Arc;

use hearth_core::{RunEvent, RunEventKind, RunStatus};
use hearth_store::{RunRecord, StepKind, StepRecord, StepStatus};
use serde_json::{Value, json};

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

/// The tool calls of a run's journal, as the run announced them live:
/// `tool.started` for each call, then `tool.finished` once it ended (a call
/// cut off mid-way has no end). What a follower on a replica that does not
/// execute the run is told between `run.started` and the end.
pub(crate) fn step_events(steps: &[StepRecord]) -> Vec<(RunEventKind, Value)> {
    let mut out = Vec::new();
    for step in steps.iter().filter(|s| s.kind == StepKind::Tool) {
        let call_id = step.payload.get("call_id").cloned().unwrap_or(Value::Null);
        out.push((
            RunEventKind::ToolStarted,
            json!({ "call_id": call_id, "name": step.name }),
        ));
        match step.status {
            StepStatus::Succeeded | StepStatus::Failed => out.push((
                RunEventKind::ToolFinished,
                json!({ "call_id": call_id, "name": step.name,
                        "ok": step.status == StepStatus::Succeeded }),
            )),
            StepStatus::Started | StepStatus::Unknown => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: u32, kind: StepKind, status: StepStatus, call_id: &str) -> StepRecord {
        StepRecord {
            run_id: "run_1".into(),
            index,
            kind,
            name: "current_time".into(),
            status,
            started_at: 0,
            finished_at: None,
            tokens: None,
            payload: json!({ "call_id": call_id }),
        }
    }

    #[test]
    fn tool_steps_read_as_the_events_the_run_announced() {
        let steps = [
            step(0, StepKind::Llm, StepStatus::Succeeded, ""),
            step(1, StepKind::Tool, StepStatus::Failed, "c1"),
            step(2, StepKind::Tool, StepStatus::Started, "c2"),
        ];
        let events: Vec<(&str, Value)> = step_events(&steps)
            .into_iter()
            .map(|(k, d)| (k.as_str(), d))
            .collect();
        assert_eq!(
            events,
            vec![
                (
                    "tool.started",
                    json!({ "call_id": "c1", "name": "current_time" })
                ),
                (
                    "tool.finished",
                    json!({ "call_id": "c1", "name": "current_time", "ok": false })
                ),
                (
                    "tool.started",
                    json!({ "call_id": "c2", "name": "current_time" })
                ),
            ]
        );
    }
}
