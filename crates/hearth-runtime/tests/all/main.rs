//! hearth-runtime's integration tests, one binary (link time): the runtime
//! in-process with a real SQLite store, the real engine and fake providers.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

mod common;

mod budget;
#[cfg(feature = "postgres")]
mod budget_shared;
mod cancel;
mod claim;
mod community;
mod confirmations;
mod conformance;
mod direct;
#[cfg(feature = "postgres")]
mod ended;
mod events;
mod incognito;
mod jobs;
mod memory;
mod modes;
mod recovery;
mod router;
mod runtime;
mod scope;
mod subagent_family;
mod subagents;
