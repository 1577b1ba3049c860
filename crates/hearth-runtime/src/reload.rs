//! Live configuration reload (`SIGHUP`, `POST /v1/config/reload`, `hearth
//! config reload`): `hearth.toml` and the environment are read again, the
//! whole new configuration is checked and everything it builds is built
//! first (an invalid one changes nothing and the old one keeps serving),
//! then what can change live is put in force for the next runs; runs in
//! flight finish with the configuration they started with (see `live.rs`).
//!
//! Live sections: `llm` (providers, models, keys, prices, fallback, retry,
//! `daily_spend_alert_usd`, `incognito_local_only`), `permissions`,
//! `tools` (profiles and confirmations; not `web_search`), `agent`
//! (limits, compaction, output cap), `budget` (pools, rebuilt from the
//! stored usage), `router` (arms and strategy, keeping what runs taught),
//! `mcp` (servers added, removed and changed; the others keep running),
//! `skills` (folders, trusted keys, settings; executable skills whose
//! verification or settings changed restart), `channels` and `alerts`
//! (settings, tokens and rules: the chat surface is built again from the
//! new configuration and replaces the old one, see
//! `Runtime::swap_surface`; a channel whose own section and tokens did not
//! change is taken over connected, the others reconnect). The skill
//! files are read again on every reload.
//!
//! Reported under `needs_restart` when they changed, and not applied:
//! `server.bind` and every other `server.*` key, `store`, `home`, `log`,
//! and `tools.web_search` (the tool is registered at start). A reload that
//! changes them still applies the rest.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hearth_agent::{ConfirmPolicy, EngineSettings, Limits, RetryPolicy};
use hearth_config::Config;
use serde_json::Value;
use tracing::{info, warn};

use crate::builder::BuildError;
use crate::catalog::Catalog;
use crate::config_view::{detected_key_vars, fingerprint};
use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;

/// A configuration read again, with the environment it was read with.
pub struct Reread {
    /// The whole configuration, checked by the loader.
    pub config: Config,
    /// The environment (key and token variables, MCP children's variables).
    pub env: BTreeMap<String, String>,
    /// The home it names (a different one needs a restart).
    pub home: PathBuf,
}

/// Reads `hearth.toml` and the environment again: the binary's loader, so a
/// reload reads exactly what a start reads. `Err` is the loader's message
/// (file, key, fix).
pub type ConfigSource = Arc<dyn Fn() -> std::result::Result<Reread, String> + Send + Sync>;

/// What a runtime needs to reload its configuration.
pub struct Reloader {
    pub(crate) home: PathBuf,
    pub(crate) http: reqwest::Client,
    pub(crate) source: Option<ConfigSource>,
    /// The executable skills' settings, when skills are looked for (the
    /// skill files are read again at every reload).
    pub(crate) exec_settings: Option<crate::builder::skills::SharedExecSettings>,
    /// What builds the chat surface, kept to build it again when
    /// `[channels]` or `[alerts]` change.
    pub(crate) surface_factory: Option<Arc<dyn crate::surfaces::ChatSurfaceFactory>>,
    /// One reload at a time: two would race to install their snapshots.
    pub(crate) lock: tokio::sync::Mutex<()>,
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// Sections changed and in force for the next runs.
    pub changed: Vec<String>,
    /// Sections or keys changed that need a restart; not applied.
    pub needs_restart: Vec<String>,
    /// When the configuration now in force was read (ms since the epoch).
    pub loaded_at: i64,
}

/// The configuration in force, as `GET /v1/config` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigView {
    /// The configuration with secrets replaced by `"<set>"`/`"<unset>"`.
    pub config: Value,
    /// When it was read (ms since the epoch).
    pub loaded_at: i64,
}

/// Sections that a reload applies.
const LIVE: [&str; 11] = [
    "llm",
    "permissions",
    "tools",
    "agent",
    "budget",
    "router",
    "mcp",
    "skills",
    "channels",
    "alerts",
    "apps",
];
/// Keys of live sections that are fixed at start.
const FIXED_KEYS: [(&str, &str); 1] = [("tools", "web_search")];
/// Sections whose keys are reported one by one (`server.bind`).
const BY_KEY: [&str; 1] = ["server"];

/// The sections of `config` as JSON, by name.
fn sections(config: &Config) -> BTreeMap<String, Value> {
    match serde_json::to_value(config) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

/// A configuration with what it read: the environment and the sealed
/// secrets' hashes.
struct Seen<'a> {
    config: &'a Config,
    env: &'a BTreeMap<String, String>,
    secrets: &'a BTreeMap<String, String>,
}

/// Compares two configurations: (live sections changed, what needs a restart).
fn diff(old: &Seen<'_>, new: &Seen<'_>) -> (Vec<String>, Vec<String>) {
    let (before, after) = (sections(old.config), sections(new.config));
    let mut changed = Vec::new();
    let mut restart = Vec::new();
    for (name, a) in &after {
        let Some(b) = before.get(name) else { continue };
        let (mut b, mut a) = (b.clone(), a.clone());
        for (section, key) in FIXED_KEYS {
            if section == name {
                let (x, y) = (take(&mut b, key), take(&mut a, key));
                if x != y {
                    restart.push(format!("{name}.{key}"));
                }
            }
        }
        let mut fb = fingerprint(&b, old.env, old.secrets);
        let mut fa = fingerprint(&a, new.env, new.secrets);
        if name == "llm" && new.config.llm.providers.is_empty() {
            // Providers detected from the environment.
            for var in detected_key_vars() {
                fb.1.push(old.env.get(*var).cloned());
                fa.1.push(new.env.get(*var).cloned());
            }
        }
        if fb == fa {
            continue;
        }
        if LIVE.contains(&name.as_str()) {
            changed.push(name.clone());
        } else if BY_KEY.contains(&name.as_str()) {
            for (key, v) in a.as_object().into_iter().flatten() {
                if b.get(key) != Some(v) {
                    restart.push(format!("{name}.{key}"));
                }
            }
        } else {
            restart.push(name.clone());
        }
    }
    (changed, restart)
}

fn take(section: &mut Value, key: &str) -> Option<Value> {
    section.as_object_mut().and_then(|m| m.remove(key))
}

/// The engine settings of `config`.
fn engine_settings(
    config: &Config,
    tools: hearth_tools::ToolRegistry,
    limits: Limits,
    budget: Option<Arc<hearth_agent::budget::Budget>>,
) -> EngineSettings {
    let retry = &config.llm.retry;
    EngineSettings {
        tools,
        limits,
        policy: crate::builder::policy_config(config),
        confirm: ConfirmPolicy {
            confirm_writes: config.tools.confirm_writes,
            exempt: config.tools.no_confirm.clone(),
            edit_tools: config.permissions.edit_tools.clone(),
            always_ask: config.permissions.always_ask.clone(),
            ..Default::default()
        },
        compaction: hearth_agent::CompactionConfig {
            enabled: config.agent.compaction,
            fraction: config.agent.context_fraction,
            default_context_tokens: config.agent.default_context_tokens,
        },
        retry: RetryPolicy {
            max_attempts: retry.max_attempts.max(1),
            initial_backoff: Duration::from_millis(retry.initial_backoff_ms),
            max_backoff: Duration::from_millis(retry.max_backoff_ms),
            max_total_wait: Duration::from_secs(retry.max_total_wait_secs),
        },
        budget,
        max_output_tokens: Some(config.agent.max_output_tokens),
    }
}

/// `[agent]`'s limits.
pub(crate) fn limits_of(config: &Config) -> Limits {
    Limits {
        max_steps: config.agent.max_steps,
        max_tool_calls: config.agent.max_tool_calls,
        max_llm_calls: config.agent.max_llm_calls,
        max_wall: Duration::from_secs(config.agent.max_wall_secs),
        tool_timeout: Duration::from_secs(config.agent.tool_timeout_secs),
        history_messages: config.agent.history_messages,
    }
}

fn invalid(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::InvalidConfig(e.to_string())
}

fn build_invalid(e: BuildError) -> RuntimeError {
    match e {
        BuildError::Config(m) => RuntimeError::InvalidConfig(m),
        BuildError::Store(s) => RuntimeError::Store(s),
        other => RuntimeError::InvalidConfig(other.to_string()),
    }
}

impl Runtime {
    /// The configuration in force, secrets replaced (`GET /v1/config`).
    pub fn config_view(&self) -> ConfigView {
        let live = self.inner.live();
        ConfigView {
            config: crate::config_view::redacted(&live.config, &live.env),
            loaded_at: live.loaded_at,
        }
    }

    /// Reads `hearth.toml` and the environment again and applies them (see
    /// the module documentation). `InvalidConfig` when the new
    /// configuration cannot be served, and then nothing changed.
    pub async fn reload_config(&self) -> Result<ReloadReport> {
        let Some(source) = self.inner.reload.source.clone() else {
            return Err(RuntimeError::InvalidInput(
                "this hearth was started without a configuration file to read again".into(),
            ));
        };
        let _one = self.inner.reload.lock.lock().await;
        let reread = tokio::task::spawn_blocking(move || source())
            .await
            .map_err(|e| RuntimeError::Internal(format!("reading the configuration failed: {e}")))?
            .map_err(RuntimeError::InvalidConfig);
        let reread = match reread {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, "configuration reload refused; the configuration in force is unchanged");
                return Err(e);
            }
        };
        match self.apply_config(reread).await {
            Ok(report) => {
                info!(
                    changed = ?report.changed,
                    needs_restart = ?report.needs_restart,
                    "configuration reloaded"
                );
                Ok(report)
            }
            Err(e) => {
                warn!(error = %e, "configuration reload refused; the configuration in force is unchanged");
                Err(e)
            }
        }
    }

    /// Checks and builds everything of `reread` first, then swaps it in.
    async fn apply_config(&self, reread: Reread) -> Result<ReloadReport> {
        let Reread { config, env, home } = reread;
        let inner = &self.inner;
        let old = inner.live();
        // Opened first: a secret that cannot be opened refuses the reload,
        // and one set again counts as a change of its section.
        let secrets = crate::builder::open_secrets(&config, &env, inner.store.as_ref())
            .await
            .map_err(build_invalid)?;
        let hashes = crate::config_view::secret_hashes(&secrets);
        let (changed, mut needs_restart) = diff(
            &Seen {
                config: &old.config,
                env: &old.env,
                secrets: &old.secrets,
            },
            &Seen {
                config: &config,
                env: &env,
                secrets: &hashes,
            },
        );
        if home != inner.reload.home {
            needs_restart.push("home".into());
        }
        let has = |s: &str| changed.iter().any(|c| c == s);

        // Everything that can fail, before anything changes.
        let catalog = if has("llm") {
            Arc::new(
                Catalog::from_config(&config, &env, &secrets, inner.reload.http.clone())
                    .map_err(invalid)?,
            )
        } else {
            old.catalog.clone()
        };
        let new_budget = has("budget") || has("llm");
        let budget = if new_budget {
            let budget = crate::budget::from_config(&config, &catalog.prices);
            // Shared before any call can reserve from it.
            if let Some(b) = &budget {
                self.share_budget(b);
            }
            budget
        } else {
            old.engine.budget().cloned()
        };
        let router = match &old.router {
            Some(_) if has("router") || has("llm") || has("budget") => {
                let router = crate::routing::build_router(&config.router, &catalog, budget.clone())
                    .map_err(invalid)?;
                self.load_router(&router).await?;
                Some(Arc::new(router))
            }
            kept => kept.clone(),
        };

        let skill_options = match &inner.reload.exec_settings {
            Some(_) if has("skills") => Some(
                crate::builder::skills::options(&config, &inner.reload.home)
                    .map_err(build_invalid)?,
            ),
            _ => None,
        };

        // The chat surface of the new configuration, built (not started)
        // before anything changes: a channel or alert rule that cannot be
        // served refuses the reload.
        let new_surface = match &inner.reload.surface_factory {
            Some(factory) if has("channels") || has("alerts") => {
                let previous = inner.surface.get();
                Some(
                    factory
                        .build(crate::surfaces::SurfaceContext {
                            config: &config,
                            env: &env,
                            secrets: &secrets,
                            http: inner.reload.http.clone(),
                            outbox: inner.store.clone(),
                            access: inner.store.clone(),
                            notices: inner.notices.clone(),
                            previous: previous.as_deref(),
                        })
                        .map_err(build_invalid)?,
                )
            }
            _ => None,
        };

        // From here on nothing fails: the new snapshot goes in whole.
        let engine = if ["llm", "permissions", "tools", "agent", "budget"]
            .iter()
            .any(|s| has(s))
        {
            let limits = if has("agent") {
                limits_of(&config)
            } else {
                *old.engine.limits()
            };
            let tools = old
                .engine
                .tools()
                .clone()
                .with_profiles(crate::builder::tool_profiles(&config));
            Arc::new(old.engine.reconfigured(engine_settings(
                &config,
                tools,
                limits,
                budget.clone(),
            )))
        } else {
            old.engine.clone()
        };
        if has("llm") {
            info!(default_model = %catalog.default_model(), "provider selected");
        }
        let loaded_at = hearth_core::now_ms();
        inner.live.update(|live| {
            live.config = Arc::new(config.clone());
            live.env = Arc::new(env.clone());
            live.secrets = Arc::new(hashes);
            live.catalog = catalog;
            live.engine = engine;
            live.router = router;
            live.incognito_local_only = config.llm.incognito_local_only;
            live.daily_spend_alert_usd = config.llm.daily_spend_alert_usd;
            live.loaded_at = loaded_at;
        });
        if new_budget && let Some(budget) = budget {
            self.start_budget_of(budget).await?;
        }
        if has("mcp") {
            let synced = inner
                .mcp
                .sync_configured(&config.mcp, &env, &inner.reload.http);
            info!(
                added = ?synced.added,
                removed = ?synced.removed,
                restarted = ?synced.restarted,
                "MCP servers synced with the configuration"
            );
        }
        if let Some(surface) = new_surface {
            self.swap_surface(surface).await;
        }
        if let Some(settings) = &inner.reload.exec_settings {
            let skills = inner.skills.clone();
            let reloaded = match skill_options {
                Some(options) => {
                    *settings
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) =
                        crate::builder::skills::ExecSettings::of(&config);
                    tokio::task::spawn_blocking(move || skills.reload_with(options)).await
                }
                None => tokio::task::spawn_blocking(move || skills.reload()).await,
            };
            match reloaded {
                Ok(c) => info!(skills = c.skills.len(), "skills read again"),
                Err(e) => warn!(error = %e, "reading the skills again failed"),
            }
        }
        Ok(ReloadReport {
            changed,
            needs_restart,
            loaded_at,
        })
    }
}

impl Runtime {
    /// Replaces the chat surface in force with `surface`, built from the
    /// new configuration: the old one stops first (its loops and senders
    /// end, the deliveries under way finish; what is pending stays in the
    /// outbox; channels the new one took over unchanged keep running),
    /// then the new one is put in force, takes over the progress
    /// messages of the runs in flight and starts its alerts (`restore`),
    /// and starts its loops and senders, which deliver whatever the old
    /// one left queued. Only the surface's own work runs again: recovery
    /// (leases, the sweep, budgets) belongs to the start and is not
    /// repeated.
    async fn swap_surface(&self, surface: Arc<dyn crate::surfaces::ChatSurface>) {
        if self.is_shutting_down() {
            // The process is stopping: the old surface is being stopped
            // too, and so is what the new one took over from it.
            surface.shutdown().await;
            return;
        }
        if let Some(old) = self.inner.surface.get() {
            old.shutdown().await;
        }
        self.inner.surface.set(Some(surface.clone()));
        surface.restore(self).await;
        surface.start(self.clone());
        info!("chat channels and alerts restarted with the new configuration");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen<'a>(
        config: &'a Config,
        env: &'a BTreeMap<String, String>,
        secrets: &'a BTreeMap<String, String>,
    ) -> Seen<'a> {
        Seen {
            config,
            env,
            secrets,
        }
    }

    fn load(toml: &str) -> Config {
        hearth_config::load_str(toml, "t.toml", Vec::new()).unwrap()
    }

    #[test]
    fn the_diff_names_live_sections_and_what_needs_a_restart() {
        let old = load("[agent]\nmax_steps = 5\n");
        let new = load(
            "[agent]\nmax_steps = 6\n[server]\nbind = \"127.0.0.1:9\"\n[store]\ndurability = \"strict\"\n[tools.web_search]\nbackend = \"searxng\"\nbase_url = \"http://127.0.0.1:1\"\n",
        );
        let env = BTreeMap::new();
        let none = BTreeMap::new();
        let (changed, restart) = diff(&seen(&old, &env, &none), &seen(&new, &env, &none));
        assert_eq!(changed, vec!["agent".to_owned()]);
        assert_eq!(
            restart,
            vec![
                "server.bind".to_owned(),
                "store".to_owned(),
                "tools.web_search".to_owned()
            ]
        );
    }

    #[test]
    fn channels_and_alerts_are_live_and_a_token_variable_changes_them() {
        let c = load(
            "[channels.telegram]\nenabled = true\ntoken_env = \"TG\"\n[alerts]\nwebhook_secret_env = \"AK\"\n",
        );
        let one = BTreeMap::from([("TG".to_owned(), "a".to_owned())]);
        let two = BTreeMap::from([
            ("TG".to_owned(), "b".to_owned()),
            ("AK".to_owned(), "k".to_owned()),
        ]);
        let none = BTreeMap::new();
        assert_eq!(
            diff(&seen(&c, &one, &none), &seen(&c, &two, &none)),
            (vec!["alerts".to_owned(), "channels".to_owned()], Vec::new())
        );
    }

    #[test]
    fn a_key_changed_in_the_environment_changes_its_section() {
        let c = load(
            "[llm.providers.p]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key_env = \"P_KEY\"\n",
        );
        let one = BTreeMap::from([("P_KEY".to_owned(), "a".to_owned())]);
        let two = BTreeMap::from([("P_KEY".to_owned(), "b".to_owned())]);
        let none = BTreeMap::new();
        assert_eq!(
            diff(&seen(&c, &one, &none), &seen(&c, &two, &none)).0,
            vec!["llm".to_owned()]
        );
        assert!(
            diff(&seen(&c, &one, &none), &seen(&c, &one, &none))
                .0
                .is_empty()
        );
    }
}
