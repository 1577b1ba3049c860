//! `Runtime::builder`: everything `hearth serve` runs, assembled in one
//! place that the CLI, the tests (`hearth_runtime::testing`) and the
//! benchmarks share: the store, the sealed secrets, the providers and their
//! catalog, the tools (built-ins, memory, web, skills, jobs), the MCP
//! servers and executable skills, the engine with its policy,
//! confirmations, compaction, retry and budgets, the model router, and the
//! chat surface given to it.
//!
//! Nothing is bound after [`RuntimeBuilder::build`]: the job tools get their
//! runtime as it is made (a cycle formed in one step), and the chat
//! surface's reply router exists before the runtime because it needs
//! nothing of it. Every step that a configuration can fail runs before any
//! MCP server or skill is started, so a refused start leaves no child.

mod secrets;
pub mod skills;
mod tools;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hearth_agent::{Engine, Limits, RetryPolicy};
use hearth_config::Config;
use hearth_store::{Durability, SqliteStore, Store, StoreError};
use hearth_tools::{Tool, ToolRegistry, ToolSource};
use tracing::info;

pub use secrets::{KEY_VAR, open_secrets, sealer_for, sealer_from};
pub(crate) use tools::profiles as tool_profiles;

use crate::catalog::Catalog;
use crate::notices::Notices;
use crate::runtime::{Parts, Runtime, RuntimeOptions};
use crate::surfaces::{ChatSurface, ChatSurfaceFactory, SurfaceContext};

/// The database file inside the home.
pub const DB_FILE: &str = "hearth.db";

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The configuration cannot be served as it is (a key missing, a
    /// provider or rule misconfigured, a public bind without a token): the
    /// message says what to change. `hearth serve` exits 2 on it.
    #[error("{0}")]
    Config(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Something else failed; `what` says what was being done.
    #[error("{what}")]
    Failed {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl BuildError {
    fn failed(what: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Failed {
            what,
            source: Box::new(e),
        }
    }
}

/// Adjusts the engine before the runtime is made from it.
type EngineHook = Box<dyn FnOnce(Engine) -> Engine + Send>;
/// Adjusts the model router before it is enabled.
type RouterHook =
    Box<dyn FnOnce(hearth_agent::router::Router) -> hearth_agent::router::Router + Send>;

/// Assembles a [`Runtime`] from a home and its configuration; see the
/// module documentation. Made by [`Runtime::builder`].
pub struct RuntimeBuilder {
    home: PathBuf,
    config: Config,
    env: Option<BTreeMap<String, String>>,
    store: Option<Arc<dyn Store>>,
    surface: Option<Box<dyn ChatSurfaceFactory>>,
    listen: Option<SocketAddr>,
    options: Option<RuntimeOptions>,
    registry: Option<ToolRegistry>,
    tools: Vec<Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    skills: bool,
    sighup: bool,
    system_prompt: Option<String>,
    limits: Option<Limits>,
    engine: Option<EngineHook>,
    router: Option<RouterHook>,
    source: Option<crate::reload::ConfigSource>,
    subagents: bool,
}

impl Runtime {
    /// A builder of the runtime `hearth serve` runs over `home` (the
    /// database, `SYSTEM.md`, `AGENTS.md`, skills) with `config`.
    pub fn builder(home: impl Into<PathBuf>, config: Config) -> RuntimeBuilder {
        RuntimeBuilder {
            home: home.into(),
            config,
            env: None,
            store: None,
            surface: None,
            listen: None,
            options: None,
            registry: None,
            tools: Vec::new(),
            sources: Vec::new(),
            skills: true,
            sighup: true,
            system_prompt: None,
            limits: None,
            engine: None,
            subagents: false,
            router: None,
            source: None,
        }
    }
}

impl RuntimeBuilder {
    /// The environment token and key variables are read from (the process's
    /// by default); MCP children get theirs from it too.
    pub fn env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = Some(env);
        self
    }

    /// Uses `store` instead of opening `<home>/hearth.db`.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The chat channels: built before the runtime, started with it.
    pub fn surface(mut self, factory: Box<dyn ChatSurfaceFactory>) -> Self {
        self.surface = Some(factory);
        self
    }

    /// The address the API will listen on: a non-loopback one is refused
    /// (a configuration error) while no API token exists.
    pub fn listening_on(mut self, addr: SocketAddr) -> Self {
        self.listen = Some(addr);
        self
    }

    /// These settings instead of the ones `config` gives (`[server]
    /// max_queued_runs`, `[llm] daily_spend_alert_usd`, ...).
    pub fn options(mut self, options: RuntimeOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// These tools instead of the configured ones (the built-ins, memory,
    /// web search, the skills' tools and the job tools); MCP servers' tools
    /// still join them.
    pub fn tools(mut self, registry: ToolRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Adds the sub-agent tools (`delegate`, ...) also to the tools given
    /// with [`Self::tools`]; the configured tools always have them.
    pub fn subagent_tools(mut self) -> Self {
        self.subagents = true;
        self
    }

    /// One more tool.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// One more source of tools that come and go.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// Whether skills are looked for (default true); without, none is
    /// offered and no executable skill runs.
    pub fn skills(mut self, discover: bool) -> Self {
        self.skills = discover;
        self
    }

    /// Whether SIGHUP reloads the skills (default true; a process that
    /// holds several runtimes wants it off).
    pub fn reload_on_sighup(mut self, on: bool) -> Self {
        self.sighup = on;
        self
    }

    /// This system prompt instead of `<home>/SYSTEM.md` and `AGENTS.md`.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// These limits instead of `[agent]`'s (finer than whole seconds).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Adjusts the engine before the runtime is made from it (settings
    /// `hearth.toml` does not have, such as a confirmation's lifetime in a
    /// test).
    pub fn engine(mut self, hook: impl FnOnce(Engine) -> Engine + Send + 'static) -> Self {
        self.engine = Some(Box::new(hook));
        self
    }

    /// Adjusts the model router before it is enabled.
    pub fn router(
        mut self,
        hook: impl FnOnce(hearth_agent::router::Router) -> hearth_agent::router::Router + Send + 'static,
    ) -> Self {
        self.router = Some(Box::new(hook));
        self
    }

    /// Where a configuration reload ([`Runtime::reload_config`]) reads
    /// `hearth.toml` and the environment again; without one, a reload is
    /// refused.
    pub fn config_source(mut self, source: crate::reload::ConfigSource) -> Self {
        self.source = Some(source);
        self
    }

    /// Builds the runtime; call [`Runtime::start`] on it to recover runs and
    /// start the chat surface.
    pub async fn build(self) -> Result<Runtime, BuildError> {
        let Self {
            home,
            config,
            env,
            store,
            surface,
            listen,
            options,
            registry,
            tools: extra_tools,
            sources,
            skills: discover_skills,
            sighup,
            system_prompt: prompt,
            limits,
            engine: engine_hook,
            subagents,
            router: router_hook,
            source,
        } = self;
        let store = match store {
            Some(s) => s,
            None => open_store(&home, &config, env.as_ref()).await?,
        };
        if let Some(addr) = listen {
            refuse_public_without_token(addr, store.as_ref()).await?;
        }
        let http = hearth_http::client_builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| BuildError::failed("building the HTTP client", e))?;
        let env = env.unwrap_or_else(|| std::env::vars().collect());
        let secrets = secrets::open_secrets(&config, &env, store.as_ref()).await?;
        let catalog = Catalog::from_config(&config, &env, &secrets, http.clone())
            .map_err(|e| BuildError::Config(e.to_string()))?;
        info!(
            default_model = %catalog.default_model(),
            origin = %catalog.origin,
            "provider selected"
        );
        let skills = if discover_skills {
            skills::load(skills::options(&config, &home)?, sighup)
        } else {
            Arc::new(hearth_skills::Skills::load(
                hearth_skills::SkillsOptions::default(),
            ))
        };
        let memory = Arc::new(semantic_memory(&config, &catalog, &store)?);
        let custom_tools = registry.is_some();
        let mut tools = match registry {
            Some(r) => r,
            None => tools::registry(&config, &env, &store, &skills, &memory).await?,
        };
        for tool in extra_tools {
            tools.register(tool);
        }
        for source in sources {
            tools.add_source(source);
        }
        let budget = crate::budget::from_config(&config, &catalog.prices);
        let mut router = crate::routing::build_router(&config.router, &catalog, budget.clone())
            .map_err(|e| BuildError::Config(e.to_string()))?;
        if let Some(hook) = router_hook {
            router = hook(router);
        }
        let notices = Notices::default();
        let built_surface: Option<Arc<dyn ChatSurface>> = match &surface {
            Some(factory) => Some(factory.build(SurfaceContext {
                config: &config,
                env: &env,
                secrets: &secrets,
                http: http.clone(),
                outbox: store.clone(),
                access: store.clone(),
                notices: notices.clone(),
                previous: None,
            })?),
            None => None,
        };
        // The opened keys now live only inside the providers and the
        // channels; a reload compares their hashes.
        let secret_hashes = Arc::new(crate::config_view::secret_hashes(&secrets));
        drop(secrets);

        // Nothing above started a child; from here on, MCP servers and
        // executable skills run (their tools join as each comes up).
        let mcp = hearth_mcp::McpManager::new(&config.mcp, &env, &http);
        let exec_settings = if discover_skills {
            Some(skills::run_executables(&skills, &mcp, &config, &home))
        } else {
            None
        };
        tools.add_source(Arc::new(mcp.clone()));
        mcp.start();
        let options = options.unwrap_or_else(|| options_of(&config, listen));
        let live_config = Arc::new(config.clone());
        let reload = crate::reload::Reloader {
            home: home.clone(),
            http: http.clone(),
            source,
            exec_settings,
            surface_factory: surface.map(Arc::from),
            lock: tokio::sync::Mutex::new(()),
        };
        let runtime = Runtime::from_parts(Parts {
            store: store.clone(),
            catalog,
            tools,
            job_tools: !custom_tools,
            subagent_tools: !custom_tools || subagents,
            make_engine: Box::new(|tools| {
                let engine = engine_settings(
                    &config,
                    &home,
                    (prompt, limits),
                    store,
                    tools,
                    &skills,
                    budget,
                );
                match engine_hook {
                    Some(hook) => hook(engine),
                    None => engine,
                }
            }),
            options,
            notices,
            surface: built_surface,
            mcp: mcp.clone(),
            skills: skills.clone(),
            config: live_config,
            env: Arc::new(env),
            secrets: secret_hashes,
            reload,
            memory,
        });
        if let Err(e) = runtime.enable_router(router).await {
            mcp.shutdown().await;
            return Err(BuildError::failed(
                "loading what the model router learnt",
                e,
            ));
        }
        Ok(runtime)
    }
}

/// Memory search for `[memory] embeddings`: by words only when unset, else
/// also by meaning with that model, whose provider must be in the catalog
/// and speak an embeddings API (the loader checked the type of a configured
/// one; a provider found only in the environment is checked here).
pub(crate) fn semantic_memory(
    config: &Config,
    catalog: &Catalog,
    store: &Arc<dyn Store>,
) -> Result<crate::memory::SemanticMemory, BuildError> {
    let Some(name) = &config.memory.embeddings else {
        return Ok(crate::memory::SemanticMemory::text_only(store.clone()));
    };
    let model = hearth_core::ModelRef::parse(name)
        .map_err(|e| BuildError::Config(format!("memory.embeddings: {e}")))?;
    let entry = catalog.providers().get(&model.provider).ok_or_else(|| {
        BuildError::Config(format!(
            "memory.embeddings = {name:?} names provider {:?}, which is not configured \
             or detected; add a [llm.providers.{}] section of type openai, openai_compat \
             or gemini",
            model.provider, model.provider
        ))
    })?;
    if !entry.provider.embeds() {
        return Err(BuildError::Config(format!(
            "memory.embeddings = {name:?}: provider {} has no embeddings API hearth speaks; \
             name an openai, openai_compat or gemini provider",
            model.provider
        )));
    }
    let local = catalog.is_local(&model);
    Ok(crate::memory::SemanticMemory::with_embeddings(
        store.clone(),
        model,
        entry.provider.clone(),
        local,
    ))
}

/// Opens the store `[store] backend` names: the home's SQLite file
/// (`<home>/hearth.db`, with `[store] durability`), or the PostgreSQL database
/// whose URL is in the variable `[store] url_env` names (read from `env`, or
/// from the process environment when `None`).
pub async fn open_store(
    home: &Path,
    config: &Config,
    env: Option<&BTreeMap<String, String>>,
) -> Result<Arc<dyn Store>, BuildError> {
    match config.store.backend {
        hearth_config::StoreBackend::Sqlite => {
            let durability = match config.store.durability {
                hearth_config::Durability::Normal => Durability::Normal,
                hearth_config::Durability::Strict => Durability::Strict,
            };
            let store = SqliteStore::open(&home.join(DB_FILE), durability)?;
            store.set_vector_cache_bytes(vector_cache_bytes(config));
            Ok(Arc::new(store))
        }
        hearth_config::StoreBackend::Postgres => open_postgres(config, env).await,
    }
}

#[cfg(feature = "postgres")]
async fn open_postgres(
    config: &Config,
    env: Option<&BTreeMap<String, String>>,
) -> Result<Arc<dyn Store>, BuildError> {
    let var = &config.store.url_env;
    let url = match env {
        Some(env) => env.get(var).cloned(),
        None => std::env::var(var).ok(),
    }
    .filter(|u| !u.is_empty())
    .ok_or_else(|| {
        BuildError::Config(format!(
            "[store] backend = \"postgres\" needs the database URL in the environment \
             variable {var}, which is not set; export {var}=postgres://user@host:5432/db (the \
             password in the URL or in ~/.pgpass), or name another variable with \
             [store] url_env"
        ))
    })?;
    let pool = usize::try_from(config.store.pool_size).unwrap_or(usize::MAX);
    let store = hearth_store::PostgresStore::connect(&url, var, pool).await?;
    store.set_vector_cache_bytes(vector_cache_bytes(config));
    tracing::info!(target = store.target(), "store: PostgreSQL");
    Ok(Arc::new(store))
}

/// `[memory] vector_cache_mb` in bytes.
fn vector_cache_bytes(config: &Config) -> usize {
    usize::try_from(config.memory.vector_cache_mb)
        .unwrap_or(usize::MAX)
        .saturating_mul(1 << 20)
}

#[cfg(all(test, feature = "postgres"))]
#[test]
fn the_vector_cache_bound_is_the_configured_megabytes_and_the_stores_default() {
    let mut config = Config::default();
    assert_eq!(
        vector_cache_bytes(&config),
        hearth_store::postgres::DEFAULT_VECTOR_CACHE_BYTES
    );
    config.memory.vector_cache_mb = 0;
    assert_eq!(vector_cache_bytes(&config), 0);
    config.memory.vector_cache_mb = 3;
    assert_eq!(vector_cache_bytes(&config), 3 << 20);
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(
    _config: &Config,
    _env: Option<&BTreeMap<String, String>>,
) -> Result<Arc<dyn Store>, BuildError> {
    Err(BuildError::Config(
        "[store] backend = \"postgres\", but this hearth was built without PostgreSQL \
         support; build it with `cargo build --release --features postgres` (README, \
         \"Run several replicas on PostgreSQL\")"
            .into(),
    ))
}

/// A public bind without an API token would let anyone on the network in.
async fn refuse_public_without_token(
    addr: SocketAddr,
    store: &dyn Store,
) -> Result<(), BuildError> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    let tokens = store
        .active_token_count()
        .await
        .map_err(|e| BuildError::failed("reading API tokens", e))?;
    if tokens == 0 {
        return Err(BuildError::Config(format!(
            "refusing to listen on non-loopback address {addr} without an API token: \
             create one with `hearth token create`, or bind 127.0.0.1"
        )));
    }
    Ok(())
}

/// The system prompt: `SYSTEM.md`, then `AGENTS.md`, from the home.
pub fn system_prompt(home: &Path) -> String {
    let read = |name: &str| std::fs::read_to_string(home.join(name)).unwrap_or_default();
    let system = read("SYSTEM.md");
    let agents = read("AGENTS.md");
    match (system.trim().is_empty(), agents.trim().is_empty()) {
        (false, false) => format!("{}\n\n{}", system.trim_end(), agents.trim_end()),
        (false, true) => system.trim_end().to_owned(),
        (true, false) => agents.trim_end().to_owned(),
        (true, true) => String::new(),
    }
}

/// `[permissions]` as the engine's policy.
pub fn policy_config(config: &Config) -> hearth_agent::policy::PolicyConfig {
    use hearth_agent::policy::Preset;
    use hearth_config::PresetName;
    let p = &config.permissions;
    hearth_agent::policy::PolicyConfig {
        default_preset: match p.default_preset {
            PresetName::None => Preset::None,
            PresetName::Member => Preset::Member,
            PresetName::Trusted => Preset::Trusted,
            PresetName::Admin => Preset::Admin,
        },
        admins: p.admins.clone(),
    }
}

/// The runtime's settings from `[server]` and `[llm]`.
fn options_of(config: &Config, listen: Option<SocketAddr>) -> RuntimeOptions {
    let options = RuntimeOptions {
        daily_spend_alert_usd: config.llm.daily_spend_alert_usd,
        incognito_local_only: config.llm.incognito_local_only,
        max_queued: config.server.max_queued_runs,
        addr: listen.map(|a| a.to_string()),
        ..RuntimeOptions::default()
    };
    match config.store.backend {
        hearth_config::StoreBackend::Sqlite => options,
        // Other replicas share the store: a lease left behind may be a live
        // replica's, so it is never released at start, only let lapse; and
        // an idle replica asks the database once per third of a lease.
        hearth_config::StoreBackend::Postgres => {
            let lease = Duration::from_secs(config.store.lease_secs.max(2));
            RuntimeOptions {
                owner: crate::cluster::replica_id(),
                sole_owner: false,
                lease,
                sweep_every: (lease / 3).max(Duration::from_millis(500)),
                ..options
            }
        }
    }
}

/// The engine of `config`: limits, policy, confirmations, compaction,
/// retry, budgets and the output cap from `[agent]`, `[permissions]`,
/// `[tools]`, `[llm]` and `[budget]`.
fn engine_settings(
    config: &Config,
    home: &Path,
    (prompt, limits): (Option<String>, Option<Limits>),
    store: Arc<dyn Store>,
    tools: ToolRegistry,
    skills: &Arc<hearth_skills::Skills>,
    budget: Option<Arc<hearth_agent::budget::Budget>>,
) -> Engine {
    let limits = limits.unwrap_or_else(|| crate::reload::limits_of(config));
    let retry = &config.llm.retry;
    let prompt = prompt.unwrap_or_else(|| system_prompt(home));
    let engine = Engine::new(store, tools, limits, prompt)
        .with_prompt_hook(skills::prompt_hook(skills))
        .with_policy(policy_config(config))
        .with_confirmations(hearth_agent::ConfirmPolicy {
            confirm_writes: config.tools.confirm_writes,
            exempt: config.tools.no_confirm.clone(),
            edit_tools: config.permissions.edit_tools.clone(),
            always_ask: config.permissions.always_ask.clone(),
            ..Default::default()
        })
        .with_compaction(hearth_agent::CompactionConfig {
            enabled: config.agent.compaction,
            fraction: config.agent.context_fraction,
            default_context_tokens: config.agent.default_context_tokens,
        })
        .with_retry(RetryPolicy {
            max_attempts: retry.max_attempts.max(1),
            initial_backoff: Duration::from_millis(retry.initial_backoff_ms),
            max_backoff: Duration::from_millis(retry.max_backoff_ms),
            max_total_wait: Duration::from_secs(retry.max_total_wait_secs),
        });
    match budget {
        Some(budget) => engine.with_budget(budget),
        None => engine,
    }
    .with_max_output_tokens(config.agent.max_output_tokens)
}
