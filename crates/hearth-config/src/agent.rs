//! `[agent]`: a run's limits, history and compaction.

use serde::{Deserialize, Serialize};

/// `[agent]`: limits of one run. A run and the sub-agents it starts (and
/// theirs) share them: their steps, tool calls, model calls and wall time
/// count together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Model calls plus tool calls.
    pub max_steps: u32,
    /// Tool calls.
    pub max_tool_calls: u32,
    /// Model calls.
    pub max_llm_calls: u32,
    /// Wall time of a run, in seconds.
    pub max_wall_secs: u64,
    /// Time one tool call may take, in seconds.
    pub tool_timeout_secs: u64,
    /// How many past messages of the thread are sent to the model; only
    /// with `compaction = false` (compaction replaces this cap).
    pub history_messages: u32,
    /// Summarize the oldest turns when a run's context would pass
    /// `context_fraction` of the model's window.
    pub compaction: bool,
    /// Share of the context window a run's context may fill before the
    /// oldest turns are summarized (0 < fraction <= 1).
    pub context_fraction: f64,
    /// Context window assumed for a model whose window is not known.
    pub default_context_tokens: u32,
    /// Most tokens one model answer may have: sent to the provider as its
    /// max tokens, and reserved from budget pools before each call.
    pub max_output_tokens: u32,
    /// `[agent.subagents]`: what the `delegate` tools may start.
    pub subagents: SubagentsConfig,
}

/// `[agent.subagents]`: limits of the sub-agents a run starts with the
/// `delegate` tool (a child run in the thread `<parent thread>/sub/<n>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubagentsConfig {
    /// How deep sub-agents may nest: 1 lets a run delegate but not its
    /// children; 0 turns delegation off (default 2).
    pub max_depth: u32,
    /// Children one run may start in all (default 8).
    pub max_children: u32,
    /// Children of one run that may be unfinished at once (default 4).
    pub max_parallel: u32,
}

impl Default for SubagentsConfig {
    fn default() -> Self {
        Self {
            max_depth: 2,
            max_children: 8,
            max_parallel: 4,
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: 24,
            max_tool_calls: 16,
            max_llm_calls: 12,
            max_wall_secs: 300,
            tool_timeout_secs: 30,
            history_messages: 50,
            compaction: true,
            context_fraction: 0.75,
            default_context_tokens: 32_000,
            max_output_tokens: 4096,
            subagents: SubagentsConfig::default(),
        }
    }
}
