//! hearth-agent: the engine that runs one run.
//!
//! `Engine::run` is the bounded agent loop: assemble context (system prompt,
//! thread history, the run's own messages), call the model, run the tools it
//! proposes, journal every step before the next starts, and stop at a limit with
//! a clear error. It resumes from journaled steps after a crash: finished steps
//! are not redone, and a write-class tool with no recorded outcome is reported
//! as "outcome unknown" instead of being run again.
//! When the context would outgrow the model's window, the oldest turns are
//! summarized (`compaction`) instead of dropped.
//! It does not decide when a run starts or write its final status: the runtime does.

pub mod budget;
pub mod compaction;
pub mod confirm;
pub mod context;
pub mod engine;
pub mod firewall;
pub mod json_len;
pub mod limits;
pub mod policy;
pub mod router;
pub mod subagents;
mod wall;

pub use compaction::CompactionConfig;
pub use engine::{
    Candidate, ConfirmPolicy, DIRECT_CALL_ID, DirectCall, Engine, EngineSettings, EventSink,
    ModelCall, Outcome, RunInput, RunResult, ToolMode,
};
pub use limits::Limits;
// Retry policy is hearth-llm's (DESIGN); re-exported for the engine's callers.
pub use hearth_llm::RetryPolicy;
