//! One server restarted on request (the dashboard's Restart, `POST
//! /v1/mcp/servers/{name}/restart`): its connection closed and a new one
//! opened at once, with a fresh tool list and no back-off left from earlier
//! failures. Its configuration is the one in force; a reload of the
//! configuration is what changes it.

use std::sync::Arc;

use super::{McpManager, Server};
use crate::error::{McpError, Result};

impl Server {
    /// A new server like this one, not started: same configuration, target
    /// and skill, a fresh state.
    fn again(&self) -> Server {
        let mut server = Server::with(
            &self.name,
            self.config.clone(),
            self.capability,
            self.preset,
            self.source.clone(),
            self.max_result_bytes,
            self.target.clone(),
        );
        server.skill = self.skill.clone();
        server
    }
}

impl McpManager {
    /// Restarts server `name` (a configured one or an executable skill):
    /// the old supervisor closes its connection in the background while a
    /// new one connects. A disabled server stays disabled.
    pub fn restart(&self, name: &str) -> Result<()> {
        let fresh = {
            let mut servers = self.servers.write().unwrap_or_else(|p| p.into_inner());
            let old = servers
                .get(name)
                .cloned()
                .ok_or_else(|| McpError::UnknownServer(name.to_owned()))?;
            self.stop(&old);
            let fresh = Arc::new(old.again());
            servers.insert(name.to_owned(), fresh.clone());
            fresh
        };
        tracing::info!(server = %name, "MCP server restarting on request");
        if self.started.load(std::sync::atomic::Ordering::SeqCst) {
            self.spawn(fresh);
        }
        Ok(())
    }
}
