//! A configuration reload's `[mcp]`: the configured servers made exactly
//! those of the new configuration. New ones start, removed ones stop, and
//! one whose entry, environment (`env_pass`, `headers_env`) or
//! `max_result_bytes` changed restarts; the others keep running untouched, and executable skills are
//! left to [`McpManager::sync_skills`].

use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_config::{McpConfig, McpServerConfig};

use super::{McpManager, Server};

/// What [`McpManager::sync_configured`] did, by server name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServersSynced {
    /// Servers new in the configuration, started.
    pub added: Vec<String>,
    /// Servers no longer in the configuration, stopped.
    pub removed: Vec<String>,
    /// Servers whose entry or environment changed, restarted.
    pub restarted: Vec<String>,
}

impl ServersSynced {
    /// True when no server was touched.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty()
    }
}

/// Each variable a server's entry reads, with its value.
pub(crate) type EnvSeen = Vec<(String, Option<String>)>;

/// The values of the variables a server's entry reads from hearth's
/// environment: when one changes, the server must restart to see it.
pub(super) fn env_seen(sc: &McpServerConfig, env: &BTreeMap<String, String>) -> EnvSeen {
    let vars = ["PATH", "HOME"]
        .into_iter()
        .map(str::to_owned)
        .chain(sc.env_pass.iter().cloned())
        .chain(sc.headers_env.values().cloned());
    vars.map(|v| {
        let value = env.get(&v).cloned();
        (v, value)
    })
    .collect()
}

impl McpManager {
    /// Makes the configured servers exactly those of `config`, read with
    /// `env` (see the module documentation). A skill whose name a new
    /// server takes keeps running, and the server is not added (as at
    /// start, where the configured server would win, the clash is logged).
    pub fn sync_configured(
        &self,
        config: &McpConfig,
        env: &BTreeMap<String, String>,
        http: &reqwest::Client,
    ) -> ServersSynced {
        let mut out = ServersSynced::default();
        let mut start = Vec::new();
        {
            let mut servers = self.servers.write().unwrap_or_else(|p| p.into_inner());
            let mut seen = self.env_seen.lock().unwrap_or_else(|p| p.into_inner());
            let configured: Vec<String> = servers
                .iter()
                .filter(|(_, s)| s.skill.is_none())
                .map(|(n, _)| n.clone())
                .collect();
            for name in configured {
                let keep = config.servers.get(&name).is_some_and(|sc| {
                    servers.get(&name).is_some_and(|s| {
                        &s.config == sc && s.max_result_bytes == config.max_result_bytes
                    }) && seen.get(&name) == Some(&env_seen(sc, env))
                });
                if keep {
                    continue;
                }
                if let Some(old) = servers.remove(&name) {
                    self.stop(&old);
                }
                seen.remove(&name);
                if config.servers.contains_key(&name) {
                    out.restarted.push(name);
                } else {
                    out.removed.push(name);
                }
            }
            for (name, sc) in &config.servers {
                if let Some(existing) = servers.get(name) {
                    if existing.skill.is_some() {
                        tracing::warn!(server = %name, "MCP server not added: an executable skill runs under its name; rename one of them");
                    }
                    continue;
                }
                let server = Arc::new(Server::configured(
                    name,
                    sc,
                    config.max_result_bytes,
                    env,
                    http,
                ));
                servers.insert(name.clone(), server.clone());
                seen.insert(name.clone(), env_seen(sc, env));
                if !out.restarted.contains(name) {
                    out.added.push(name.clone());
                }
                start.push(server);
            }
        }
        for name in &out.removed {
            tracing::info!(server = %name, "MCP server stopped: removed from the configuration");
        }
        for name in &out.restarted {
            tracing::info!(server = %name, "MCP server restarting: its configuration changed");
        }
        if self.started.load(std::sync::atomic::Ordering::SeqCst) {
            for server in start {
                self.spawn(server);
            }
        }
        out
    }
}
