//! What a configuration reload replaces: one [`Live`] snapshot of
//! everything built from `hearth.toml` and the environment that can change
//! without a restart (the catalog of providers, models and prices; the
//! engine with its permissions, tool profiles, confirmations, limits, retry
//! and budget pools; the model router), swapped whole.
//!
//! A run takes the snapshot once, as it starts, and keeps it to its end, so
//! a reload never changes a run in flight; the next run sees the new one.
//! Calls outside runs (the thread's model, `/v1/models`, permissions checks)
//! read the snapshot current at the call.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use hearth_agent::Engine;
use hearth_agent::router::Router;
use hearth_config::Config;

use crate::catalog::Catalog;

/// One version of the live configuration.
#[derive(Clone)]
pub(crate) struct Live {
    /// The configuration it was built from.
    pub(crate) config: Arc<Config>,
    /// The environment it was read with (the key and token variables).
    pub(crate) env: Arc<BTreeMap<String, String>>,
    /// The sealed secrets it opened, as hashes (see `config_view`).
    pub(crate) secrets: Arc<BTreeMap<String, String>>,
    /// Providers, models and prices.
    pub(crate) catalog: Arc<Catalog>,
    /// The engine runs execute with.
    pub(crate) engine: Arc<Engine>,
    /// The model router, once enabled.
    pub(crate) router: Option<Arc<Router>>,
    /// `[llm] incognito_local_only` (first from the runtime's options).
    pub(crate) incognito_local_only: bool,
    /// `[llm] daily_spend_alert_usd` (first from the runtime's options).
    pub(crate) daily_spend_alert_usd: Option<f64>,
    /// When the configuration was read (ms since the epoch).
    pub(crate) loaded_at: i64,
}

/// The current [`Live`], replaced atomically: a reader holds the lock only
/// to clone the `Arc`.
pub(crate) struct LiveCell(RwLock<Arc<Live>>);

impl LiveCell {
    pub(crate) fn new(live: Live) -> Self {
        Self(RwLock::new(Arc::new(live)))
    }

    /// The snapshot in force now.
    pub(crate) fn get(&self) -> Arc<Live> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the snapshot with `change` applied to a copy of the current
    /// one, in one step (two changes never lose each other).
    pub(crate) fn update(&self, change: impl FnOnce(&mut Live)) {
        let mut slot = self.0.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = Live::clone(&slot);
        change(&mut next);
        *slot = Arc::new(next);
    }
}
