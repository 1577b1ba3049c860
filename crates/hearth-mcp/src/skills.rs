//! Executable skills as MCP servers.
//!
//! A verified executable skill is a stdio MCP server that the manager runs
//! like a configured one (restart with backoff, per-call timeout, tools as
//! `<skill>__<tool>`), with three differences: its tools need `skills.use`
//! rather than `mcp.<name>`, their source is `skill:<name>`, and the set of
//! skills changes on reload, so [`McpManager::sync_skills`] starts the new
//! ones and stops the removed or changed ones. Verification is not done
//! here: the caller passes only skills whose manifest verified.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::client::Target;
use crate::manager::{McpManager, Server};

/// The capability every executable skill's tools need.
pub const CAPABILITY: &str = "skills.use";

/// What the manager needs to run one verified executable skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillServer {
    /// The skill's name; its tools are `<name>__<tool>`.
    pub name: String,
    /// Its folder (the child's working folder).
    pub dir: PathBuf,
    /// The program, absolute (run directly: a shebang may name an
    /// interpreter outside the folder).
    pub entry: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// The variables it may receive from hearth's environment.
    pub env: Vec<String>,
    /// Its `[skills.config.<name>]` settings, given as environment variables.
    pub config: BTreeMap<String, String>,
    /// Per-call (and handshake) timeout.
    pub timeout_secs: u64,
}

impl SkillServer {
    /// The child: `PATH`, `HOME` and the declared variables from hearth's
    /// `env` (when set), then the skill's config; nothing else, so a skill
    /// never sees the provider keys it did not declare.
    pub(crate) fn target(&self, env: &BTreeMap<String, String>) -> Target {
        let mut child = BTreeMap::new();
        for var in ["PATH", "HOME"]
            .into_iter()
            .chain(self.env.iter().map(String::as_str))
        {
            if let Some(v) = env.get(var) {
                child.insert(var.to_owned(), v.clone());
            }
        }
        child.extend(self.config.iter().map(|(k, v)| (k.clone(), v.clone())));
        Target::Stdio {
            command: self.entry.display().to_string(),
            args: self.args.clone(),
            env: child,
            cwd: Some(self.dir.clone()),
        }
    }
}

impl SkillServer {
    /// Checks the skill before its program is started.
    pub(crate) async fn check_before_start(&self) -> crate::Result<()> {
        Ok(())
    }
}

/// What [`McpManager::sync_skills`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillsSynced {
    /// Skills started (new, or changed since they were started).
    pub started: Vec<String>,
    /// Skills stopped (gone, refused now, or changed).
    pub stopped: Vec<String>,
    /// Skills not run because a configured MCP server has their name.
    pub clashing: Vec<String>,
}

impl McpManager {
    /// Makes the running skills exactly `skills`: starts the new ones,
    /// stops those no longer listed, restarts those whose folder, program,
    /// arguments, environment or config changed, and leaves the others
    /// running. A skill named like a configured MCP server is not run (its
    /// tools would take the server's names). Before [`McpManager::start`]
    /// the skills are only registered; `start` runs them.
    pub fn sync_skills(&self, skills: Vec<SkillServer>) -> SkillsSynced {
        let mut out = SkillsSynced::default();
        let mut wanted: BTreeMap<String, SkillServer> = BTreeMap::new();
        for s in skills {
            wanted.insert(s.name.clone(), s);
        }
        let mut add = Vec::new();
        {
            let mut servers = self.servers.write().unwrap_or_else(|p| p.into_inner());
            let gone: Vec<String> = servers
                .iter()
                .filter(|(name, server)| {
                    server
                        .skill
                        .as_ref()
                        .is_some_and(|running| wanted.get(*name) != Some(running))
                })
                .map(|(name, _)| name.clone())
                .collect();
            for name in gone {
                if let Some(server) = servers.remove(&name) {
                    self.stop(&server);
                }
                out.stopped.push(name);
            }
            for (name, skill) in wanted {
                match servers.get(&name) {
                    Some(existing) if existing.skill.is_none() => out.clashing.push(name),
                    Some(_) => {}
                    None => {
                        let server =
                            Arc::new(Server::skill(skill, self.max_result_bytes, &self.env));
                        servers.insert(name.clone(), server.clone());
                        add.push(server);
                        out.started.push(name);
                    }
                }
            }
        }
        for name in &out.clashing {
            tracing::warn!(skill = %name, "executable skill not run: an MCP server in [mcp.servers] has its name; rename one of them");
        }
        for name in &out.stopped {
            tracing::info!(skill = %name, "executable skill stopped");
        }
        if self.started.load(std::sync::atomic::Ordering::SeqCst) {
            for server in add {
                self.spawn(server);
            }
        }
        out
    }
}
