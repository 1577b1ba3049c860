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
