//! Runs: status, the envelope clients see, and the events they can follow.

use serde::{Deserialize, Serialize};

/// Where a run is in its life.
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted and stored, waiting its turn on the thread.
    Queued,
    /// The engine is working on it.
    Running,
    /// Stopped until a person approves or denies an action.
    AwaitingConfirmation,
    /// Finished with an answer.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl RunStatus {
    /// All statuses, in life order.
    pub const ALL: [RunStatus; 6] = [
        Self::Queued,
        Self::Running,
        Self::AwaitingConfirmation,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::AwaitingConfirmation => "awaiting_confirmation",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True for `succeeded`, `failed` and `cancelled`.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// Why a run failed: a machine code and a sentence for people.
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// snake_case code, e.g. `provider_error`, `limit_exceeded`.
    pub code: String,
    /// What happened and what to do.
    pub message: String,
}

/// A pending confirmation as shown to clients.
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmation {
    /// The plaintext token; `None` after a restart (only its hash is stored).
    pub token: Option<String>,
    /// The tool waiting for approval.
    pub tool: String,
    /// A one-line summary of the action.
    pub summary: String,
    /// RFC 3339.
    pub expires_at: String,
}

/// The text output of a finished run.
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutput {
    /// The answer.
    pub text: String,
}

/// The run envelope of the HTTP API.
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnvelope {
    /// Opaque id.
    pub run_id: String,
    /// The thread it belongs to.
    pub thread_key: String,
    /// Who sent the message.
    pub user_key: String,
    /// Current status.
    pub status: RunStatus,
    /// The answer, once succeeded.
    pub output: Option<RunOutput>,
    /// The failure, once failed.
    pub error: Option<RunError>,
    /// The pending confirmation, while awaiting one.
    pub confirmation: Option<Confirmation>,
    /// The model that ran it, `<provider>/<model>`: once finished, the one
    /// that produced the answer (whose model call answered last).
    pub model: Option<String>,
    /// The model it was asked to use, present only when failover or the
    /// router made another one answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_model: Option<String>,
    /// The surface it came from (`api`, `cli`, `telegram`, `job`, ...).
    #[serde(default)]
    pub source: String,
    /// The job that fired it (job runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The scheduled instant it fired for, RFC 3339 (job runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// The run whose `delegate` call started this one (sub-agents only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The sub-agents this run started, in the order it started them
    /// (present on `GET /v1/runs/{id}` of a run that delegated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildRun>,
}

/// A sub-agent run, as its parent's envelope lists it.
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildRun {
    /// The child run.
    pub run_id: String,
    /// Its thread, `<parent thread>/sub/<n>`.
    pub thread_key: String,
    /// Its model once claimed, `<provider>/<model>`.
    pub model: Option<String>,
    /// Its status.
    pub status: RunStatus,
}

/// The source of a sub-agent's run.
pub const DELEGATE_SOURCE: &str = "delegate";

/// The idempotency key of the child a `delegate` call starts: the parent run
/// and the model's id of the call, so a parent resumed after a crash finds
/// the child it started instead of starting another.
pub fn delegate_key(parent_run_id: &str, call_id: &str) -> String {
    format!("delegate:{parent_run_id}:{call_id}")
}

/// The kinds of run event, named as on the SSE wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RunEventKind {
    /// `run.queued`
    #[serde(rename = "run.queued")]
    Queued,
    /// `run.started`
    #[serde(rename = "run.started")]
    Started,
    /// `text.delta`
    #[serde(rename = "text.delta")]
    TextDelta,
    /// `thinking.delta`
    #[serde(rename = "thinking.delta")]
    ThinkingDelta,
    /// `tool.started`
    #[serde(rename = "tool.started")]
    ToolStarted,
    /// `tool.finished`
    #[serde(rename = "tool.finished")]
    ToolFinished,
    /// `confirmation.required`
    #[serde(rename = "confirmation.required")]
    ConfirmationRequired,
    /// `run.succeeded`
    #[serde(rename = "run.succeeded")]
    Succeeded,
    /// `run.failed`
    #[serde(rename = "run.failed")]
    Failed,
    /// `run.cancelled`
    #[serde(rename = "run.cancelled")]
    Cancelled,
}

impl RunEventKind {
    /// The SSE `event:` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "run.queued",
            Self::Started => "run.started",
            Self::TextDelta => "text.delta",
            Self::ThinkingDelta => "thinking.delta",
            Self::ToolStarted => "tool.started",
            Self::ToolFinished => "tool.finished",
            Self::ConfirmationRequired => "confirmation.required",
            Self::Succeeded => "run.succeeded",
            Self::Failed => "run.failed",
            Self::Cancelled => "run.cancelled",
        }
    }

    /// True for the events that end a run's stream.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// One event of a run, numbered from 1 within the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
    /// Sequence number within the run (the SSE `id:`).
    pub seq: u64,
    /// What happened.
    pub kind: RunEventKind,
    /// Details, a JSON object.
    pub data: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_through_wire_names() {
        for st in RunStatus::ALL {
            assert_eq!(RunStatus::parse(st.as_str()), Some(st));
            let json = serde_json::to_string(&st).unwrap();
            assert_eq!(json, format!("\"{}\"", st.as_str()));
        }
        assert_eq!(RunStatus::parse("done"), None);
    }

    #[test]
    fn event_kind_serde_matches_wire_name() {
        let k = RunEventKind::ConfirmationRequired;
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            "\"confirmation.required\""
        );
    }
}
