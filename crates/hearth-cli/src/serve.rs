//! `hearth serve`: prepare the home, load config, open the store, recover
//! unfinished runs, and serve the API until SIGTERM or SIGINT.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hearth_agent::{Engine, Limits, RetryPolicy};
use hearth_config::{Config, LogFormat};
use hearth_runtime::{Catalog, Runtime, RuntimeOptions};
use hearth_server::{AppState, Auth};
use hearth_store::{Durability, SqliteStore, Store};
use tracing::{info, warn};

use crate::Exit;
use crate::cli::{Global, LogFormatArg};

/// The database file inside the home.
const DB_FILE: &str = "hearth.db";

/// The home directory: `--home`, `HEARTH_HOME`, else `~/.hearth`.
pub fn home_dir(g: &Global) -> Result<PathBuf, Exit> {
    if let Some(h) = &g.home {
        return Ok(h.clone());
    }
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Ok(PathBuf::from(h).join(".hearth")),
        _ => Err(Exit::config(anyhow::anyhow!(
            "cannot find a home directory: set HEARTH_HOME or pass --home"
        ))),
    }
}

/// Loads the config named by `--config`/`HEARTH_CONFIG`, else `<home>/hearth.toml`.
pub fn load_config(g: &Global, home: &Path) -> Result<Config, Exit> {
    let path = g.config.clone().unwrap_or_else(|| home.join("hearth.toml"));
    if g.config.is_some() && !path.exists() {
        return Err(Exit::config(anyhow::anyhow!(
            "config file {} does not exist",
            path.display()
        )));
    }
    hearth_config::load(&path, std::env::vars()).map_err(Exit::config)
}

/// Opens the home's store.
pub fn open_store(home: &Path, config: &Config) -> Result<SqliteStore, Exit> {
    let durability = match config.store.durability {
        hearth_config::Durability::Normal => Durability::Normal,
        hearth_config::Durability::Strict => Durability::Strict,
    };
    SqliteStore::open(&home.join(DB_FILE), durability)
        .map_err(|e| Exit::from(anyhow::Error::new(e)))
}

fn system_prompt(home: &Path) -> String {
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
fn policy_config(config: &Config) -> hearth_agent::policy::PolicyConfig {
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

fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Runs the gateway.
pub async fn run(g: &Global, bind: Option<String>) -> Result<(), Exit> {
    let t0 = Instant::now();
    let routes = hearth_server::Routes::build();
    let home = home_dir(g)?;
    let report = hearth_config::prepare_home(&home).map_err(Exit::config)?;
    let config = load_config(g, &home)?;
    let format = match g.log_format {
        Some(LogFormatArg::Json) => LogFormat::Json,
        Some(LogFormatArg::Human) => LogFormat::Human,
        None => config.log.format,
    };
    crate::logging::init(&config.log.level, format);
    // Installing the recorder calibrates a TSC clock (busy for about a
    // millisecond, more on a VM); done beside the store's opening instead of
    // before serving.
    let metrics = tokio::task::spawn_blocking(install_metrics);
    if report.created_home {
        info!(home = %home.display(), "created hearth home");
    }
    for f in &report.created_files {
        info!(file = %f.display(), "wrote default file");
    }
    if report.readable_by_others {
        warn!(home = %home.display(), "the hearth home is readable by other users; run chmod 700 on it");
    }

    let bind = bind.unwrap_or_else(|| config.server.bind.clone());
    let addr: SocketAddr = bind.parse().map_err(|e| {
        Exit::config(anyhow::anyhow!(
            "bind address {bind:?} is not an IP:port such as 127.0.0.1:7777: {e}"
        ))
    })?;

    // Before the store: a second server must not recover the first one's runs.
    let _home_lock =
        crate::home_lock::lock(&home).map_err(|e| Exit::from(anyhow::Error::new(e)))?;
    let store = open_store(&home, &config)?;
    let store: Arc<dyn Store> = Arc::new(store);
    if !is_loopback(&addr)
        && store
            .active_token_count()
            .await
            .context("reading API tokens")?
            == 0
    {
        return Err(Exit::config(anyhow::anyhow!(
            "refusing to listen on non-loopback address {addr} without an API token: \
             create one with `hearth token create`, or bind 127.0.0.1"
        )));
    }

    let client = hearth_http::client_builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .context("building the HTTP client")?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let secrets = crate::secrets::provider_secrets(
        &config,
        env.get(crate::secrets::KEY_VAR).map(String::as_str),
        store.as_ref(),
    )
    .await?;
    let catalog =
        Catalog::from_config(&config, &env, &secrets, client.clone()).map_err(Exit::config)?;
    info!(
        default_model = %catalog.default_model(),
        origin = %catalog.origin,
        "provider selected"
    );

    let limits = Limits {
        max_steps: config.agent.max_steps,
        max_tool_calls: config.agent.max_tool_calls,
        max_llm_calls: config.agent.max_llm_calls,
        max_wall: Duration::from_secs(config.agent.max_wall_secs),
        tool_timeout: Duration::from_secs(config.agent.tool_timeout_secs),
        history_messages: config.agent.history_messages,
    };
    let retry = &config.llm.retry;
    let skills = crate::skills::load(&config, &home)?;
    let mut tools = crate::tools::build_registry(&config, &store, &skills).await?;
    // Bound to the runtime once it exists (it is built from these tools).
    let job_tools = hearth_runtime::jobs::JobTools::default();
    for tool in job_tools.tools() {
        tools.register(tool);
    }
    // MCP servers and executable skills start with hearth, not on first
    // use; their tools join the registry as each server comes up.
    let mcp = hearth_mcp::McpManager::new(&config.mcp, &env, &client);
    crate::skills::run_executables(&skills, &mcp, &config, &home);
    tools.add_source(Arc::new(mcp.clone()));
    mcp.start();
    let budget = hearth_runtime::budget::from_config(&config, &catalog.prices);
    let engine = Engine::new(store.clone(), tools, limits, system_prompt(&home))
        .with_prompt_hook(crate::skills::prompt_hook(&skills))
        .with_policy(policy_config(&config))
        .with_confirmations(hearth_agent::ConfirmPolicy {
            confirm_writes: config.tools.confirm_writes,
            exempt: config.tools.no_confirm.clone(),
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
    let engine = match budget.clone() {
        Some(budget) => engine.with_budget(budget),
        None => engine,
    }
    .with_max_output_tokens(config.agent.max_output_tokens);
    let options = RuntimeOptions {
        daily_spend_alert_usd: config.llm.daily_spend_alert_usd,
        incognito_local_only: config.llm.incognito_local_only,
        max_queued: config.server.max_queued_runs,
        ..RuntimeOptions::default()
    };
    let router = hearth_runtime::build_router(&config.router, &catalog, budget.clone())
        .map_err(Exit::config)?;
    let runtime = Runtime::new(store.clone(), catalog, engine, options);
    job_tools.bind(&runtime);
    runtime
        .enable_router(router)
        .await
        .context("loading what the model router learnt")?;
    let channels = crate::channels::build(&config, &env, &secrets, &client, &runtime, &store);
    let alert_secret = config
        .alerts
        .webhook_secret_env
        .as_deref()
        .and_then(|var| env.get(var))
        .cloned();
    let alerts = hearth_channels::alerts::Alerts::new(
        &config.alerts,
        alert_secret,
        client.clone(),
        store.clone(),
        channels.clone(),
        config.channels.outbox_max_age(),
    )
    .map_err(|e| Exit::config(anyhow::Error::new(e)))?;
    // Before recovery, so a recovered run that fails is alerted about too.
    let alerts_stop = alerts.map(|a| a.start(runtime.notices()));
    // The opened keys now live only inside the providers and the channels.
    drop(secrets);
    if !channels.is_empty() {
        runtime.set_reply_router(Arc::new(channels.clone()));
    }

    let metrics = metrics.await.unwrap_or_else(|e| {
        warn!(error = %e, "metrics are disabled");
        None
    });
    let state = AppState {
        runtime: runtime.clone(),
        auth: Arc::new(Auth::new(runtime.clone(), is_loopback(&addr))),
        metrics,
        policy: policy_config(&config),
    };
    let hosts = hearth_server::AllowedHosts::new(Some(addr.ip()), &config.server.allowed_hosts);
    let app = hearth_server::with_state(
        routes
            .with_allowed_hosts(hosts)
            .with_channels(channels.clone()),
        state,
        config.server.max_body_bytes,
    );
    let app = hearth_server::routes::skills::with_skills(app, skills);
    let app = app.layer(axum::Extension(mcp.clone()));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;

    // Before recovery: a recovered run's answer must find the progress
    // message the previous process showed, to clean it up.
    channels.restore().await;
    let recovered = runtime
        .start()
        .await
        .context("recovering unfinished runs")?;
    info!(
        address = %local,
        home = %home.display(),
        durability = ?config.store.durability,
        recovered,
        startup_ms = t0.elapsed().as_millis() as u64,
        "hearth is listening"
    );
    // After recovery: replies left in the outbox by a previous process go
    // out; their runs are not executed again.
    channels.start();
    // Machine-readable for scripts and tests that bind port 0.
    println!("hearth listening on http://{local}");

    let grace = Duration::from_secs(config.server.shutdown_grace_secs);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let rt = runtime.clone();
    let limits = hearth_server::ServeLimits {
        header_read_timeout: Duration::from_millis(config.server.header_read_timeout_ms),
        max_connections: config.server.max_connections,
    };
    let server = tokio::spawn(async move {
        hearth_server::serve(listener, app, limits, async move {
            let _ = stop_rx.await;
        })
        .await
    });
    shutdown_signal().await;
    info!(
        grace_secs = grace.as_secs(),
        "shutting down: no new messages, waiting for runs in flight"
    );
    let left = rt.shutdown(grace).await;
    channels.shutdown();
    if let Some(stop) = alerts_stop {
        stop.cancel();
    }
    mcp.shutdown().await;
    if left > 0 {
        info!(
            runs = left,
            "runs still in flight are left for recovery at next start"
        );
    }
    let _ = stop_tx.send(());
    // Followers of live event streams would hold graceful shutdown open; give
    // them a moment, then exit anyway.
    let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
    info!("stopped");
    Ok(())
}

fn install_metrics() -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let buckets = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        120.0, 300.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
        .and_then(|b| b.install_recorder());
    match handle {
        Ok(h) => {
            let upkeep = h.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(5));
                loop {
                    tick.tick().await;
                    upkeep.run_upkeep();
                }
            });
            hearth_server::metrics::describe();
            metrics::gauge!("hearth_runs_in_flight").set(0.0);
            Some(h)
        }
        Err(e) => {
            warn!(error = %e, "metrics are disabled");
            None
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
