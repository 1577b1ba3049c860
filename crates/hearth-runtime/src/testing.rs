//! Runtimes for tests, built through the same [`RuntimeBuilder`] as `hearth
//! serve`, over a temporary home (feature `testing`, for dev-dependencies).
//!
//! ```ignore
//! let t = TestRuntime::start(&fake_toml(&fake.base_url(), "", "")).await;
//! let run = t.runtime.ingest(inbound).await?;
//! ```
//!
//! A test runtime reads no environment, discovers no skills, leaves SIGHUP
//! alone and opens its store at `<home>/hearth.db` (kept in the fixture, so
//! a test can look at what was stored, or build a second runtime over it
//! as a restarted process would).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use hearth_core::records::outbox::{OutboxItem, OutboxStatus, PairingRecord};
use hearth_core::{AllowedEntry, ChannelInfo, Removed, ThreadKey, UserKey};
use hearth_store::{Durability, SqliteStore, Store};

use crate::builder::{BuildError, DB_FILE, RuntimeBuilder};
use crate::error::Result;
use crate::runtime::Runtime;
use crate::surfaces::{
    ChannelAdmin, ChatSurface, ChatSurfaceFactory, ReplyRouter, SurfaceContext, Webhook,
};

/// A hearth.toml whose default model `fake/m` is the OpenAI-compatible fake
/// at `base_url`: `llm_extra` goes into `[llm]` (keys or further tables),
/// `provider_extra` into the fake provider's table.
pub fn fake_toml(base_url: &str, provider_extra: &str, llm_extra: &str) -> String {
    format!(
        "[llm]\ndefault_model = \"fake/m\"\n{llm_extra}\n[llm.providers.fake]\n\
         type = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\n{provider_extra}\n"
    )
}

/// `key` as a thread key; panics when it is not one (a test's own key).
pub fn thread(key: impl Into<String>) -> ThreadKey {
    let key = key.into();
    match ThreadKey::new(key.as_str()) {
        Ok(k) => k,
        Err(e) => panic!("{key:?}: {e}"),
    }
}

/// `key` as a user key; panics when it is not one (a test's own key).
pub fn user(key: impl Into<String>) -> UserKey {
    let key = key.into();
    match UserKey::new(key.as_str()) {
        Ok(k) => k,
        Err(e) => panic!("{key:?}: {e}"),
    }
}

/// The store a test runtime over `home` uses: `<home>/hearth.db`. Panics
/// when it cannot be opened (a test set-up failure).
pub fn store(home: &Path) -> Arc<dyn Store> {
    match SqliteStore::open(&home.join(DB_FILE), Durability::Normal) {
        Ok(s) => Arc::new(s),
        Err(e) => panic!("opening the test store in {}: {e}", home.display()),
    }
}

/// The builder of a test runtime over `home`, configured by the hearth.toml
/// text `toml`, over `store` (see [`store`]). Panics when `toml` is not a
/// valid configuration (a test set-up failure).
pub fn builder(home: &Path, toml: &str, store: Arc<dyn Store>) -> RuntimeBuilder {
    let config = match hearth_config::load_str(toml, "test", Vec::new()) {
        Ok(c) => c,
        Err(e) => panic!("the test configuration is refused: {e}\n{toml}"),
    };
    Runtime::builder(home, config)
        .env(Default::default())
        .store(store)
        .skills(false)
        .reload_on_sighup(false)
}

/// A test runtime, its store and its home.
pub struct TestRuntime {
    pub runtime: Runtime,
    /// Its store (`<home>/hearth.db`).
    pub store: Arc<dyn Store>,
    /// Its home, removed when the fixture drops.
    pub home: tempfile::TempDir,
}

impl TestRuntime {
    /// A runtime over a new temporary home configured by `toml`, built and
    /// started (runs recovered, the chat surface started).
    pub async fn start(toml: &str) -> Self {
        Self::start_with(toml, |b| b).await
    }

    /// As [`TestRuntime::start`], with the builder adjusted by `adjust`
    /// (tools, options, a chat surface, engine settings...).
    pub async fn start_with(
        toml: &str,
        adjust: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
    ) -> Self {
        let t = Self::build_with(toml, adjust).await;
        if let Err(e) = t.runtime.start().await {
            panic!("starting the test runtime: {e}");
        }
        t
    }

    /// As [`TestRuntime::start_with`], not started.
    pub async fn build_with(
        toml: &str,
        adjust: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
    ) -> Self {
        let home = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("making a temporary home: {e}"),
        };
        let store = store(home.path());
        let runtime = build(adjust(builder(home.path(), toml, store.clone()))).await;
        Self {
            runtime,
            store,
            home,
        }
    }
}

/// Builds `builder`; panics with the reason when it cannot (a test set-up
/// failure).
pub async fn build(builder: RuntimeBuilder) -> Runtime {
    match builder.build().await {
        Ok(rt) => rt,
        Err(e) => panic!("building the test runtime: {e}"),
    }
}

/// A chat surface that only routes replies through `router`: for tests of
/// what the runtime commits for the channels, without any channel.
pub fn reply_router_surface(router: Arc<dyn ReplyRouter>) -> Box<dyn ChatSurfaceFactory> {
    reply_router_surface_on(router, &[])
}

/// [`reply_router_surface`] whose administration shows `channels` as
/// enabled (so jobs may post to their threads).
pub fn reply_router_surface_on(
    router: Arc<dyn ReplyRouter>,
    channels: &[&'static str],
) -> Box<dyn ChatSurfaceFactory> {
    Box::new(TestSurface {
        router: Some(router),
        webhooks: Vec::new(),
        enabled: channels.to_vec(),
    })
}

/// A chat surface of no channel serving `webhooks`: for tests of how a
/// server mounts push endpoints.
pub fn webhook_surface(webhooks: Vec<Arc<dyn Webhook>>) -> Box<dyn ChatSurfaceFactory> {
    Box::new(TestSurface {
        router: None,
        webhooks,
        enabled: Vec::new(),
    })
}

/// A surface of no channel: a reply router and push endpoints, if given.
struct TestSurface {
    router: Option<Arc<dyn ReplyRouter>>,
    webhooks: Vec<Arc<dyn Webhook>>,
    /// Channels its administration shows as enabled.
    enabled: Vec<&'static str>,
}

impl ChatSurfaceFactory for TestSurface {
    fn build(
        &self,
        _ctx: SurfaceContext<'_>,
    ) -> std::result::Result<Arc<dyn ChatSurface>, BuildError> {
        Ok(Arc::new(TestSurface {
            router: self.router.clone(),
            webhooks: self.webhooks.clone(),
            enabled: self.enabled.clone(),
        }))
    }
}

#[async_trait::async_trait]
impl ChatSurface for TestSurface {
    fn reply_router(&self) -> Option<Arc<dyn ReplyRouter>> {
        self.router.clone()
    }

    fn admin(&self) -> Arc<dyn ChannelAdmin> {
        Arc::new(NoChannels {
            enabled: self.enabled.clone(),
        })
    }

    fn webhooks(&self) -> Vec<Arc<dyn Webhook>> {
        self.webhooks.clone()
    }

    async fn restore(&self, _runtime: &Runtime) {}

    fn start(&self, _runtime: Runtime) {}

    async fn shutdown(&self) {}
}

/// The administration of a surface without channels: every channel shows
/// as disabled (but those named in `enabled`, which show as ready), nothing
/// is pending.
struct NoChannels {
    enabled: Vec<&'static str>,
}

#[async_trait::async_trait]
impl ChannelAdmin for NoChannels {
    async fn list(&self) -> Result<Vec<ChannelInfo>> {
        Ok(hearth_core::CHANNEL_NAMES
            .iter()
            .map(|&name| ChannelInfo {
                name,
                enabled: self.enabled.contains(&name),
                state: hearth_core::ChannelState::Disabled,
                last_error: None,
                last_event_at: None,
                outbox_pending: 0,
            })
            .collect())
    }

    fn readiness(&self) -> Vec<(String, String)> {
        self.enabled
            .iter()
            .map(|c| (format!("channel:{c}"), "ok".to_owned()))
            .collect()
    }

    async fn pairings(&self) -> Result<Vec<PairingRecord>> {
        Ok(Vec::new())
    }

    async fn approve_pairing(&self, _code: &str) -> Result<Option<PairingRecord>> {
        Ok(None)
    }

    async fn deny_pairing(&self, _code: &str) -> Result<Option<PairingRecord>> {
        Ok(None)
    }

    async fn allowed(&self, name: &str) -> Result<Option<Vec<AllowedEntry>>> {
        Ok(hearth_core::CHANNEL_NAMES.contains(&name).then(Vec::new))
    }

    async fn remove_allowed(&self, _name: &str, _user_key: &str) -> Result<Removed> {
        Ok(Removed::NotFound)
    }

    async fn outbox(&self, _status: Option<OutboxStatus>, _limit: u32) -> Result<Vec<OutboxItem>> {
        Ok(Vec::new())
    }

    async fn retry_outbox(&self, _id: i64) -> Result<Option<OutboxItem>> {
        Ok(None)
    }
}

/// A webhook at `path` that answers `202 Accepted` with the request's body
/// and tells whether the runtime it was handed takes messages: for tests of
/// how a server mounts push endpoints.
pub struct EchoWebhook {
    /// Where it is mounted.
    pub path: &'static str,
}

#[async_trait::async_trait]
impl Webhook for EchoWebhook {
    fn path(&self) -> &'static str {
        self.path
    }

    async fn handle(
        &self,
        runtime: &Runtime,
        request: http::Request<Bytes>,
    ) -> http::Response<Bytes> {
        let mut resp = http::Response::new(request.into_body());
        *resp.status_mut() = http::StatusCode::ACCEPTED;
        let accepting = if runtime.is_shutting_down() {
            "no"
        } else {
            "yes"
        };
        resp.headers_mut().insert(
            "x-runtime-accepting",
            http::HeaderValue::from_static(accepting),
        );
        resp
    }
}
