//! Per-run limits.

use std::time::Duration;

/// The bounds of one run; hitting one ends it with `limit_exceeded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Model calls plus tool calls.
    pub max_steps: u32,
    /// Tool calls.
    pub max_tool_calls: u32,
    /// Model calls.
    pub max_llm_calls: u32,
    /// Wall time of the run.
    pub max_wall: Duration,
    /// Time one tool call may take.
    pub tool_timeout: Duration,
    /// Past messages of the thread sent to the model.
    pub history_messages: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 24,
            max_tool_calls: 16,
            max_llm_calls: 12,
            max_wall: Duration::from_secs(300),
            tool_timeout: Duration::from_secs(30),
            history_messages: 50,
        }
    }
}
