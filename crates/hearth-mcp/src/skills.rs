//! Executable skills as MCP servers.
//!
//! A verified executable skill is a stdio MCP server that the manager runs
//! like a configured one (restart with backoff, per-call timeout, tools as
//! `<skill>__<tool>`), with these differences: its tools need `skills.use`
//! rather than `mcp.<name>`, their source is `skill:<name>`, the set of
//! skills changes on reload, so [`McpManager::sync_skills`] starts the new
//! ones and stops the removed or changed ones, and before every start
//! (also a restart after a crash) its folder is checked to be still what
//! was verified: a program edited after the load never runs. The caller
//! passes only skills whose manifest verified.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use hearth_skills::ExecutableSkill;

use crate::client::Target;
use crate::error::{McpError, Result};
use crate::manager::{McpManager, Server};

/// The capability every executable skill's tools need.
pub const CAPABILITY: &str = "skills.use";

/// The variable naming the skill's writable state folder.
pub const STATE_VAR: &str = "HEARTH_SKILL_STATE";

/// What the manager needs to run one verified executable skill. Two of them
/// are equal only when the skill's files, manifest (so its signature) and
/// settings are: a reload restarts a skill whose version changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillServer {
    /// The skill as verified; its tools are `<name>__<tool>`.
    pub skill: ExecutableSkill,
    /// Per-call (and handshake) timeout.
    pub timeout_secs: u64,
    /// Its writable folder (`<home>/skills-state/<name>`), made before it
    /// starts and named by `HEARTH_SKILL_STATE`: its own folder must stay
    /// as verified.
    pub state_dir: PathBuf,
    /// Tools (its own names) that are read-class.
    pub read_tools: Vec<String>,
    /// Whether its `readOnlyHint` makes a tool read-class.
    pub trust_annotations: bool,
}

impl SkillServer {
    /// The skill's name.
    pub fn name(&self) -> &str {
        &self.skill.name
    }

    /// The child: `PATH`, `HOME` and the declared variables from hearth's
    /// `env` (when set), then the skill's config and `HEARTH_SKILL_STATE`;
    /// nothing else, so a skill never sees the provider keys it did not
    /// declare. It runs in its own folder (the program is run directly: a
    /// shebang may name an interpreter outside the folder).
    pub(crate) fn target(&self, env: &BTreeMap<String, String>) -> Target {
        let mut child = BTreeMap::new();
        for var in ["PATH", "HOME"]
            .into_iter()
            .chain(self.skill.env.iter().map(String::as_str))
        {
            if let Some(v) = env.get(var) {
                child.insert(var.to_owned(), v.clone());
            }
        }
        child.extend(
            self.skill
                .config
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        child.insert(STATE_VAR.to_owned(), self.state_dir.display().to_string());
        Target::Stdio {
            command: self.skill.entry.display().to_string(),
            args: self.skill.args.clone(),
            env: child,
            cwd: Some(self.skill.dir.clone()),
        }
    }

    /// Before each start: the folder is still what was verified (hashes of
    /// every file and of the manifest), and the state folder exists.
    pub(crate) async fn check_before_start(&self) -> Result<()> {
        let skill = self.skill.clone();
        let state = self.state_dir.clone();
        let checked = tokio::task::spawn_blocking(move || {
            skill
                .check_unchanged()
                .map_err(|e| format!("refused: {e}"))?;
            let mut dir = std::fs::DirBuilder::new();
            dir.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
            dir.create(&state)
                .map_err(|e| format!("cannot create its state folder {}: {e}", state.display()))
        })
        .await;
        match checked {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(McpError::Start(why)),
            Err(e) => Err(McpError::Start(format!(
                "the check before start failed: {e}"
            ))),
        }
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
    /// stops those no longer listed, restarts those whose files, manifest
    /// (a new version or signature), program, arguments, environment or
    /// settings changed, and leaves the others running. A skill named like a configured MCP server is not run (its
    /// tools would take the server's names). Before [`McpManager::start`]
    /// the skills are only registered; `start` runs them.
    pub fn sync_skills(&self, skills: Vec<SkillServer>) -> SkillsSynced {
        let mut out = SkillsSynced::default();
        let mut wanted: BTreeMap<String, SkillServer> = BTreeMap::new();
        for s in skills {
            wanted.insert(s.name().to_owned(), s);
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
