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
use hearth_core::records::ConfirmationRecord;
use hearth_core::records::outbox::{NewOutboxItem, RunEnd};

use crate::catalog::Catalog;
use crate::surfaces::{ChatSurface, ReplyRouter};

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

/// The chat surface in force: built at start, replaced whole by a reload
/// that changes `[channels]` or `[alerts]`. Readers hold the lock only to
/// clone the `Arc`.
#[derive(Default)]
pub(crate) struct SurfaceCell {
    current: RwLock<Option<Arc<dyn ChatSurface>>>,
    /// What runs route their replies through; it follows the surface.
    replies: Arc<CurrentReplies>,
}

impl SurfaceCell {
    pub(crate) fn new(surface: Option<Arc<dyn ChatSurface>>) -> Self {
        let cell = Self::default();
        cell.set(surface);
        cell
    }

    /// The surface in force now.
    pub(crate) fn get(&self) -> Option<Arc<dyn ChatSurface>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts `surface` in force (its reply router with it) and gives the
    /// one it replaces.
    pub(crate) fn set(
        &self,
        surface: Option<Arc<dyn ChatSurface>>,
    ) -> Option<Arc<dyn ChatSurface>> {
        let router = surface.as_ref().and_then(|s| s.reply_router());
        let mut slot = self.current.write().unwrap_or_else(PoisonError::into_inner);
        *self
            .replies
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner) = router;
        std::mem::replace(&mut *slot, surface)
    }

    /// The router runs are given: it asks the surface in force at each
    /// call, so a run that started before a reload still routes its answer
    /// (and wakes the sender) of the channels in force when it ends.
    pub(crate) fn replies(&self) -> Arc<dyn ReplyRouter> {
        self.replies.clone()
    }
}

/// The reply router of the surface in force; owes nothing while no channel
/// is enabled.
#[derive(Default)]
pub(crate) struct CurrentReplies(RwLock<Option<Arc<dyn ReplyRouter>>>);

impl CurrentReplies {
    fn get(&self) -> Option<Arc<dyn ReplyRouter>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ReplyRouter for CurrentReplies {
    fn on_finish(&self, end: RunEnd<'_>) -> Vec<NewOutboxItem> {
        self.get().map(|r| r.on_finish(end)).unwrap_or_default()
    }

    fn on_confirmation(&self, rec: &ConfirmationRecord, token: &str) -> Vec<NewOutboxItem> {
        self.get()
            .map(|r| r.on_confirmation(rec, token))
            .unwrap_or_default()
    }

    fn committed(&self, channel: &str) {
        if let Some(r) = self.get() {
            r.committed(channel);
        }
    }

    fn scope_of(&self, thread_key: &str) -> Option<String> {
        self.get()?.scope_of(thread_key)
    }

    fn on_app_message(
        &self,
        thread_key: &str,
        run_id: Option<&str>,
        text: &str,
    ) -> Option<NewOutboxItem> {
        self.get()?.on_app_message(thread_key, run_id, text)
    }
}
