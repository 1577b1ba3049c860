//! `hearth serve`: prepare and lock the home, load the config, have the
//! runtime's builder assemble everything, recover unfinished runs, and
//! serve the API until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hearth_config::{Config, LogFormat};
use hearth_runtime::{BuildError, Runtime};
use hearth_server::{AppState, Auth};
use hearth_store::Store;
use tracing::{info, warn};

use crate::Exit;
use crate::cli::{Global, LogFormatArg};

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
    load_named(g.config.as_deref(), home, std::env::vars()).map_err(Exit::config)
}

/// Loads `named`, else `<home>/hearth.toml`, with `env`'s overrides: what a
/// start and a reload read alike.
fn load_named(
    named: Option<&Path>,
    home: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<Config> {
    let path = named.map_or_else(|| home.join("hearth.toml"), Path::to_owned);
    if named.is_some() && !path.exists() {
        anyhow::bail!("config file {} does not exist", path.display());
    }
    Ok(hearth_config::load(&path, env)?)
}

/// The address to listen on, or why `bind` is not one (`serve` and
/// `doctor` say it in the same words).
pub fn bind_addr(bind: &str) -> Result<SocketAddr, Exit> {
    bind.parse().map_err(|e| {
        Exit::config(anyhow::anyhow!(
            "bind address {bind:?} is not an IP:port such as 127.0.0.1:7777: {e}"
        ))
    })
}

/// Opens the store `[store]` names (as the runtime's builder does).
pub async fn open_store(home: &Path, config: &Config) -> Result<Arc<dyn Store>, Exit> {
    hearth_runtime::builder::open_store(home, config, None)
        .await
        .map_err(build_exit)
}

/// A failed build's exit: 2 for a configuration to change, else 1.
pub fn build_exit(e: BuildError) -> Exit {
    match e {
        BuildError::Config(_) => Exit::config(e),
        other => Exit::from(other),
    }
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
    // millisecond, more on a VM); done beside the runtime's assembly instead
    // of before serving.
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
    let addr = bind_addr(&bind)?;

    // Before the store: a second server must not recover the first one's runs.
    let _home_lock =
        crate::home_lock::lock(&home).map_err(|e| Exit::from(anyhow::Error::new(e)))?;
    let server = config.server.clone();
    let durability = config.store.durability;
    let runtime = Runtime::builder(&home, config)
        .listening_on(addr)
        .surface(Box::new(hearth_channels::ChannelsFactory))
        .config_source(config_source(g, &home))
        // SIGHUP reloads the whole configuration (skills included) below.
        .reload_on_sighup(false)
        .build()
        .await
        .map_err(build_exit)?;
    let metrics = metrics.await.unwrap_or_else(|e| {
        warn!(error = %e, "metrics are disabled");
        None
    });
    let state = AppState {
        runtime: runtime.clone(),
        auth: Arc::new(Auth::new(runtime.clone(), addr.ip().is_loopback())),
        metrics,
    };
    let hosts = hearth_server::AllowedHosts::new(Some(addr.ip()), &server.allowed_hosts);
    let app = hearth_server::with_state(
        routes
            .with_allowed_hosts(hosts)
            .with_ui_session_hours(server.ui_session_hours),
        state,
        server.max_body_bytes,
    );
    let started = async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr().context("reading the bound address")?;
        let recovered = runtime
            .start()
            .await
            .context("recovering unfinished runs")?;
        anyhow::Ok((listener, local, recovered))
    };
    let (listener, local, recovered) = match started.await {
        Ok(s) => s,
        Err(e) => {
            // MCP servers and skills already run: close them before leaving.
            runtime.shutdown(Duration::ZERO).await;
            return Err(e.into());
        }
    };
    info!(
        address = %local,
        home = %home.display(),
        durability = ?durability,
        recovered,
        startup_ms = t0.elapsed().as_millis() as u64,
        "hearth is listening"
    );
    // Machine-readable for scripts and tests that bind port 0.
    println!("hearth listening on http://{local}");

    let grace = Duration::from_secs(server.shutdown_grace_secs);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let limits = hearth_server::ServeLimits {
        header_read_timeout: Duration::from_millis(server.header_read_timeout_ms),
        max_connections: server.max_connections,
    };
    let serving = tokio::spawn(async move {
        hearth_server::serve(listener, app, limits, async move {
            let _ = stop_rx.await;
        })
        .await
    });
    // Under systemd's Type=notify: READY=1 now that /readyz would answer 200.
    crate::service::notify::when_ready(runtime.clone());
    #[cfg(unix)]
    tokio::spawn(reload_on_sighup(runtime.clone()));
    shutdown_signal().await;
    info!(
        grace_secs = grace.as_secs(),
        "shutting down: no new messages, waiting for runs in flight"
    );
    let left = runtime.shutdown(grace).await;
    if left > 0 {
        info!(
            runs = left,
            "runs still in flight are left for recovery at next start"
        );
    }
    let _ = stop_tx.send(());
    // Followers of live event streams would hold graceful shutdown open; give
    // them a moment, then exit anyway.
    let _ = tokio::time::timeout(Duration::from_secs(2), serving).await;
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

/// Where a reload reads the configuration again: the file and
/// environment a start reads (`--config`/`HEARTH_CONFIG`, else
/// `<home>/hearth.toml`, then `HEARTH_*` overrides). A process's
/// environment is its own from its start, so a variable changed outside
/// it is seen after a restart; a sealed secret changed with `hearth
/// secrets set` is seen at the reload.
fn config_source(g: &Global, home: &Path) -> hearth_runtime::ConfigSource {
    let named = g.config.clone();
    let home = home.to_owned();
    Arc::new(move || {
        let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        let config =
            load_named(named.as_deref(), &home, env.clone()).map_err(|e| format!("{e:#}"))?;
        Ok(hearth_runtime::Reread {
            config,
            env,
            home: home.clone(),
        })
    })
}

/// Reloads the configuration on every SIGHUP; the runtime logs what
/// changed, or why the file was refused (the old configuration serves on).
#[cfg(unix)]
async fn reload_on_sighup(runtime: Runtime) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        warn!("cannot listen for SIGHUP; reload the configuration with `hearth config reload`");
        return;
    };
    while hup.recv().await.is_some() {
        info!("SIGHUP: reloading the configuration");
        // The outcome (what changed, or why it was refused) is logged by
        // the runtime, where it is handled.
        let _ = runtime.reload_config().await;
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
