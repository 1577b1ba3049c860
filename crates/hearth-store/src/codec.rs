//! Text forms of stored values that every backend shares: roles, step kinds
//! and statuses, JSON columns. A value that does not decode is
//! `StoreError::Corrupt`, never a panic.

use hearth_core::Role;

use crate::error::{Result, StoreError};
use crate::records::{StepKind, StepStatus};

/// The stored name of a role.
pub(crate) fn role_str(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// A role from its stored name.
pub(crate) fn parse_role(s: &str) -> Result<Role> {
    match s {
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        _ => Err(StoreError::Corrupt(format!("unknown message role {s:?}"))),
    }
}

/// A JSON column decoded; `what` names it in the error.
pub(crate) fn json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// Serialises a value for a JSON column.
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T, what: &str) -> Result<String> {
    // Our record types always serialise; this is reached only through a bug.
    serde_json::to_string(value)
        .map_err(|e| StoreError::Corrupt(format!("cannot encode {what}: {e}")))
}

/// A step kind from its stored name.
pub(crate) fn step_kind(s: &str) -> Result<StepKind> {
    match s {
        "llm" => Ok(StepKind::Llm),
        "tool" => Ok(StepKind::Tool),
        "compaction" => Ok(StepKind::Compaction),
        "route" => Ok(StepKind::Route),
        _ => Err(StoreError::Corrupt(format!("unknown step kind {s:?}"))),
    }
}

/// A step status from its stored name.
pub(crate) fn step_status(s: &str) -> Result<StepStatus> {
    match s {
        "started" => Ok(StepStatus::Started),
        "succeeded" => Ok(StepStatus::Succeeded),
        "failed" => Ok(StepStatus::Failed),
        "unknown" => Ok(StepStatus::Unknown),
        _ => Err(StoreError::Corrupt(format!("unknown step status {s:?}"))),
    }
}

/// The `llm_calls` columns of a finished model-call step, as every backend
/// stores them (the statement that writes them is the backend's).
pub(crate) struct LlmCall<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub reasoning_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub latency_ms: i64,
    /// `ok` or `error`.
    pub status: &'static str,
    pub error_kind: Option<&'a str>,
    /// `chat` or `compaction`.
    pub purpose: &'static str,
}

impl<'a> LlmCall<'a> {
    /// The usage row of `step` (its name is `<provider>/<model>`).
    pub(crate) fn of(step: &'a crate::records::StepRecord) -> Self {
        let (provider, model) = step
            .name
            .split_once('/')
            .unwrap_or((step.name.as_str(), ""));
        let tok = |k: &str| {
            step.tokens
                .as_ref()
                .and_then(|t| t.get(k))
                .and_then(serde_json::Value::as_i64)
        };
        Self {
            provider,
            model,
            input_tokens: tok("input_tokens"),
            output_tokens: tok("output_tokens"),
            cached_tokens: tok("cached_tokens"),
            reasoning_tokens: tok("reasoning_tokens"),
            cache_write_tokens: tok("cache_write_tokens"),
            latency_ms: step.finished_at.map_or(0, |f| (f - step.started_at).max(0)),
            status: if step.status == StepStatus::Succeeded {
                "ok"
            } else {
                "error"
            },
            error_kind: step
                .payload
                .get("error")
                .and_then(|e| e.get("kind"))
                .and_then(|k| k.as_str()),
            // The router routes compaction calls apart; usage tells them apart.
            purpose: match step.kind {
                StepKind::Compaction => "compaction",
                StepKind::Llm | StepKind::Tool | StepKind::Route => "chat",
            },
        }
    }
}
