//! The manager as the registry's [`ToolSource`]: every server's tools as
//! they were last listed, and for a tool whose server is not up (as after a
//! restart, when a recovered run's pending call comes before its server is
//! ready) a wait for it, or the server's own error.

use std::sync::Arc;

use hearth_tools::{Tool, ToolSource, ToolWait};

use crate::manager::{McpManager, Server, ServerState};

impl McpManager {
    /// The server that offers `wire`, or would once up: the one listing it,
    /// else the one whose name prefixes it (the longest, should two do).
    fn server_of(&self, wire: &str) -> Option<Arc<Server>> {
        let servers = self.servers();
        servers
            .values()
            .find(|s| s.read().tools.contains_key(wire))
            .or_else(|| {
                servers
                    .values()
                    .filter(|s| crate::names::may_be_of(&s.name, wire))
                    .max_by_key(|s| s.name.len())
            })
            .cloned()
    }
}

impl ToolSource for McpManager {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers()
            .values()
            .flat_map(|s| {
                let tools = s.read().tools.clone();
                tools
                    .values()
                    .map(|t| t.clone() as Arc<dyn Tool>)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.servers()
            .values()
            .find_map(|s| s.read().tools.get(name).cloned())
            .map(|t| t as Arc<dyn Tool>)
    }

    /// A wait for a tool of a server that is starting or restarting, up to
    /// the server's start timeout (`timeout_secs`); none for a disabled one.
    fn pending(&self, name: &str) -> Option<ToolWait> {
        let server = self.server_of(name)?;
        if matches!(server.read().state, ServerState::Disabled) {
            return None;
        }
        Some(Box::pin(server.wait_offering(name.to_owned())))
    }

    /// The server's own error, for a tool of a server that is not up.
    fn unavailable(&self, name: &str) -> Option<String> {
        let server = self.server_of(name)?;
        let live = server.read();
        (live.state != ServerState::Ready).then(|| server.unavailable(&live).to_string())
    }

    /// Every configured server's `mcp.<name>` (disabled and failed ones
    /// too, so a grant can be made before the server comes up); skills need
    /// `skills.use`, which is not extra.
    fn capabilities(&self) -> Vec<(String, &'static str)> {
        self.servers()
            .values()
            .filter_map(|s| Some((s.capability.to_owned(), s.preset?)))
            .collect()
    }
}
