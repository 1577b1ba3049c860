//! What the surfaces administer through the runtime besides runs: the chat
//! channels (behind the [`ChannelAdmin`] and [`Webhook`]s their surface
//! implements), the MCP servers, the skills, and the permission settings.

use std::sync::Arc;

use hearth_agent::policy::PolicyConfig;

use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;
use crate::surfaces::{ChannelAdmin, Webhook};

/// One MCP server (configured, or an executable skill) as `GET
/// /v1/mcp/servers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerStatus {
    /// Its name in `[mcp.servers.<name>]`, or the skill's.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// `starting`, `ready`, `restarting`, `failed` or `disabled`.
    pub state: &'static str,
    /// Why it last failed, if it did.
    pub last_error: Option<String>,
    /// How many tools it offers (as last listed).
    pub tools: usize,
}

/// Why a tool of an MCP server cannot be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpLookupError {
    /// No server has this name.
    #[error("{0}")]
    UnknownServer(String),
    /// The server is down and never listed its tools.
    #[error("{0}")]
    Unavailable(String),
}

/// One skill as `GET /v1/skills` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillStatus {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its SKILL.md (or `hearth-skill.json` when it has no SKILL.md).
    pub path: String,
    /// Where it was found: `workspace`, `workspace_agents`, `user_agents`,
    /// `home` or `extra`.
    pub source: &'static str,
    /// Offered to the model (false: invalid, needs unmet, or refused).
    pub eligible: bool,
    /// Why it is not eligible.
    pub reason: Option<String>,
    /// `None` for SKILL.md skills; for executable skills whether a trusted
    /// key signed it.
    pub signed: Option<bool>,
    /// What is invalid in it, each as `<field>: <what is wrong>` (empty
    /// when it is only unusable here, e.g. a program it needs is missing).
    pub problems: Vec<String>,
}

impl Runtime {
    /// The chat channels' administration, when this runtime has channels.
    pub fn channels(&self) -> Option<Arc<dyn ChannelAdmin>> {
        self.inner.surface.get().map(|s| s.admin())
    }

    /// The push endpoints of the channels in a push mode, for the server
    /// to mount.
    pub fn webhooks(&self) -> Vec<Arc<dyn Webhook>> {
        self.inner
            .surface
            .get()
            .map(|s| s.webhooks())
            .unwrap_or_default()
    }

    /// `/readyz` checks of the enabled channels: `("channel:<name>", "ok" |
    /// "connecting" | "degraded: <reason>")`.
    pub fn channel_readiness(&self) -> Vec<(String, String)> {
        self.channels().map(|c| c.readiness()).unwrap_or_default()
    }

    /// The `[permissions]` settings in force: the default preset and the
    /// admins.
    pub fn permissions(&self) -> PolicyConfig {
        self.inner.live().engine.policy().clone()
    }

    /// Every MCP server and executable skill, by name.
    pub fn mcp_servers(&self) -> Vec<McpServerStatus> {
        self.inner
            .mcp
            .statuses()
            .into_iter()
            .map(|s| McpServerStatus {
                name: s.name,
                transport: s.transport,
                state: s.state.as_str(),
                last_error: s.last_error,
                tools: s.tools,
            })
            .collect()
    }

    /// Restarts MCP server `name` (or an executable skill's): a new
    /// connection at once, its tools listed again.
    pub fn restart_mcp_server(&self, name: &str) -> std::result::Result<(), McpLookupError> {
        self.inner.mcp.restart(name).map_err(|e| match e {
            hearth_mcp::McpError::UnknownServer(_) => McpLookupError::UnknownServer(e.to_string()),
            other => McpLookupError::Unavailable(other.to_string()),
        })
    }

    /// The tool registry's name of `server`'s tool `tool` (the server's own
    /// name for it), as last listed; `Ok(None)` when the server is up and
    /// lists no such tool.
    pub fn mcp_tool_name(
        &self,
        server: &str,
        tool: &str,
    ) -> std::result::Result<Option<String>, McpLookupError> {
        self.inner.mcp.tool_name(server, tool).map_err(|e| match e {
            hearth_mcp::McpError::UnknownServer(_) => McpLookupError::UnknownServer(e.to_string()),
            other => McpLookupError::Unavailable(other.to_string()),
        })
    }

    /// Every skill found, eligible or not.
    pub fn skills(&self) -> Vec<SkillStatus> {
        self.inner
            .skills
            .catalog()
            .skills
            .iter()
            .map(|s| SkillStatus {
                name: s.name.clone(),
                description: s.description.clone(),
                path: s.path.display().to_string(),
                source: s.source.as_str(),
                eligible: s.eligible,
                reason: s.reason.clone(),
                signed: s.signed,
                problems: s
                    .problems
                    .iter()
                    .map(|p| format!("{}: {}", p.field, p.message))
                    .collect(),
            })
            .collect()
    }

    /// Reads every skill folder again (as SIGHUP does); the model sees the
    /// new list from its next call. How many skills are listed now.
    pub async fn reload_skills(&self) -> Result<usize> {
        let skills = self.inner.skills.clone();
        // Reading folders is blocking file I/O.
        tokio::task::spawn_blocking(move || skills.reload().skills.len())
            .await
            .map_err(|e| RuntimeError::Internal(format!("reloading skills failed: {e}")))
    }
}
