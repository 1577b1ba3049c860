//! hearth-runtime: the one API every surface calls.
//!
//! `Runtime` owns ingest (idempotent, acknowledged only once stored), the
//! per-thread scheduler (one run at a time per thread, in arrival order; threads
//! run concurrently), cancellation, recovery of runs left unfinished by a dead
//! process, the event bus clients follow, and the model catalog. Surfaces never
//! run the engine or touch the store's run tables themselves.

mod admin;
pub mod apps;
mod authorize;
pub mod budget;
pub mod builder;
pub mod bus;
pub mod catalog;
mod claimed_here;
pub mod cluster;
pub mod community;
mod config_view;
mod confirmations;
mod direct;
pub mod envelope;
pub mod error;
pub mod events;
mod execute;
mod history;
mod incognito;
mod ingest;
pub mod jobs;
mod live;
pub mod memory;
pub mod modes;
pub mod notices;
pub mod operator;
mod recovery;
pub mod reload;
pub mod retention;
pub mod routing;
pub mod runtime;
mod scheduler;
mod stats;
mod subagents;
mod supplied;
pub mod surfaces;
#[cfg(feature = "testing")]
pub mod testing;
mod threads;
pub mod usage;
mod wakeups;

pub use admin::{McpLookupError, McpServerStatus, SkillStatus};
pub use builder::{BuildError, RuntimeBuilder};
pub use bus::{EventBus, RunChange, RunLog};
pub use catalog::{Capabilities, Catalog, CatalogEntry, ToolSupport};
pub use confirmations::Answerer;
pub use direct::{DIRECT_SOURCE, ToolCallRequest};
pub use envelope::envelope;
pub use error::{Result, RuntimeError};
pub use events::RunEvents;
pub use jobs::{CatchUp, NewJob, Schedule, ScheduleError, disabled_channel, thread_channel};
pub use modes::{ModeSetter, ModeState};
pub use notices::{Notice, Notices};
pub use reload::{ConfigSource, ConfigView, ReloadReport, Reread};
pub use routing::{RouterReport, build_router};
pub use runtime::{Runtime, RuntimeOptions, WaitOutcome, check_key};
pub use supplied::RunOverrides;
pub use threads::ThreadRuntime;
pub use usage::UsageReport;

/// The configuration types, for the surfaces the runtime assembles (they
/// take their own sections of it; see docs/architecture.md).
pub use hearth_config as config;

/// Hashes an API token or confirmation token as the store keeps it
/// (SHA-256, lower-case hex): for whoever writes tokens (`hearth token`).
pub use hearth_agent::confirm::hash_token;

/// The permission model the runtime enforces, for the surfaces that show
/// and change it (`/v1/permissions`, Discord's `/permissions`): its names,
/// presets, subjects and scopes, and their parsing.
pub mod policy {
    pub use hearth_agent::policy::{
        CAPABILITIES, CapabilityName, GLOBAL_SCOPE, PRESET_PREFIX, PolicyConfig, PolicyError,
        Preset, Subject, known_capability_names, parse_capability, parse_subject, validate_scope,
    };
}
