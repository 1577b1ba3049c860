//! Conformance suites: what every `Store` backend must do, one suite per
//! aggregate trait. A backend's tests call each suite with a function that
//! makes a fresh, empty store; the suite runs its checks, each on its own
//! store, and panics (like a failed test) on the first check that fails.
//!
//! ```text
//! hearth_store::conformance::runs_suite(async || my_backend::open_empty().await).await;
//! ```
//!
//! Backend-specific behaviour (files, migrations, what a failure inside a
//! transaction looks like) stays in that backend's own tests.

// This module is test code compiled into the library (behind the
// `conformance` feature) so that other backends' tests can call it: a
// failed expectation is reported by panicking, as in any test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod channels;
mod confirmations;
pub mod fixtures;
mod grants;
mod history;
mod jobs;
mod memory;
mod retention;
mod router;
mod runs;
mod secrets;
mod threads;
mod tokens;
mod usage;

pub use channels::channels_suite;
pub use confirmations::confirmations_suite;
pub use grants::grants_suite;
pub use history::history_suite;
pub use jobs::jobs_suite;
pub use memory::memory_suite;
pub use retention::retention_suite;
pub use router::router_suite;
pub use runs::runs_suite;
pub use secrets::secrets_suite;
pub use threads::threads_suite;
pub use tokens::tokens_suite;
pub use usage::usage_suite;

use crate::Store;

/// Every suite, each check on a store from `fresh` (empty).
pub async fn store_suite<S: Store>(fresh: impl AsyncFn() -> S) {
    fresh().await.ping().await.unwrap();
    runs_suite(&fresh).await;
    threads_suite(&fresh).await;
    usage_suite(&fresh).await;
    grants_suite(&fresh).await;
    tokens_suite(&fresh).await;
    secrets_suite(&fresh).await;
    memory_suite(&fresh).await;
    confirmations_suite(&fresh).await;
    retention_suite(&fresh).await;
    channels_suite(&fresh).await;
    history_suite(&fresh).await;
    jobs_suite(&fresh).await;
    router_suite(&fresh).await;
}
