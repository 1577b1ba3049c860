//! Permission modes: how much a thread's agent may do without asking.
//! Capabilities decide what may run at all; the mode decides which of the
//! calls that may run wait for the user's confirmation first.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What an approved plan is sent back with as the next message (`hearth
/// mode set --run-plan`, `/runplan` in a chat, the TUI and the dashboard
/// all send it the same way, so the model reads one instruction).
pub const RUN_PLAN_PREFIX: &str = "The plan is approved. Carry it out now:\n\n";

/// A thread's permission mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PermissionMode {
    /// No tools are offered: the model can only talk.
    Deny,
    /// Only read-class tools are offered; the model answers with a plan.
    Plan,
    /// Every write-class call waits for a confirmation (the default).
    #[default]
    Ask,
    /// Write-class calls matching `[permissions] edit_tools` run without
    /// asking; others ask.
    AcceptEdits,
    /// Every allowed write-class call runs without asking, except those
    /// matching `[permissions] always_ask`.
    Auto,
    /// Nothing is asked. Needs `permissions.bypass`, never in a group, and
    /// expires back to `ask`.
    Bypass,
}

impl PermissionMode {
    /// Every mode, from least to most permissive (the order Shift+Tab cycles).
    pub const ALL: [PermissionMode; 6] = [
        Self::Deny,
        Self::Plan,
        Self::Ask,
        Self::AcceptEdits,
        Self::Auto,
        Self::Bypass,
    ];

    /// The wire name: `deny`, `plan`, `ask`, `accept_edits`, `auto`, `bypass`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Plan => "plan",
            Self::Ask => "ask",
            Self::AcceptEdits => "accept_edits",
            Self::Auto => "auto",
            Self::Bypass => "bypass",
        }
    }

    /// Parses a wire name (exact, case-sensitive).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The wire names, comma-separated, for error messages.
    pub fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_nothing_else_parses() {
        for m in PermissionMode::ALL {
            assert_eq!(PermissionMode::parse(m.as_str()), Some(m));
            assert_eq!(
                serde_json::to_value(m).unwrap(),
                serde_json::Value::String(m.as_str().into())
            );
        }
        for bad in ["Ask", "accept-edits", "", "bypass ", "yolo"] {
            assert_eq!(PermissionMode::parse(bad), None, "{bad:?}");
        }
        assert_eq!(PermissionMode::default(), PermissionMode::Ask);
    }
}
