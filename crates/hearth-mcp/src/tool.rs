//! One MCP server tool (or executable skill tool) as a hearth [`Tool`].

use std::sync::Weak;
use std::time::Duration;

use hearth_core::ToolSpec;
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError};
use serde_json::{Value, json};

use crate::manager::Server;

/// A tool of an MCP server, named `<server>__<tool>` on the wire.
pub struct McpTool {
    spec: ToolSpec,
    /// The server's own name for it.
    remote: String,
    class: ToolClass,
    /// Weak: the server owns its tools; a tool outliving it answers an error.
    server: Weak<Server>,
    capability: &'static str,
    preset: Option<&'static str>,
    source: String,
    timeout: Duration,
}

impl McpTool {
    /// The hearth tool for `listed` (one entry of `tools/list`).
    pub(crate) fn new(
        server: Weak<Server>,
        wire: String,
        remote: &str,
        listed: &Value,
        read: bool,
    ) -> Self {
        let (capability, preset, source, timeout) = match server.upgrade() {
            Some(s) => (s.capability, s.preset, s.source.clone(), s.timeout()),
            None => ("", Some("admin"), String::new(), Duration::from_secs(60)),
        };
        let description = listed
            .get("description")
            .or_else(|| listed.get("title"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let parameters = match listed.get("inputSchema") {
            Some(schema @ Value::Object(_)) => schema.clone(),
            _ => json!({"type": "object"}),
        };
        Self {
            spec: ToolSpec {
                name: wire,
                description,
                parameters,
            },
            remote: remote.to_owned(),
            class: if read {
                ToolClass::Read
            } else {
                ToolClass::Write
            },
            server,
            capability,
            preset,
            source,
            timeout,
        }
    }
}

impl McpTool {
    /// The server's own name for the tool.
    pub(crate) fn remote(&self) -> &str {
        &self.remote
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        self.class
    }

    fn capability(&self) -> Option<&'static str> {
        Some(self.capability)
    }

    fn capability_preset(&self) -> Option<&'static str> {
        self.preset
    }

    fn untrusted(&self) -> bool {
        true
    }

    fn source(&self) -> String {
        self.source.clone()
    }

    fn available(&self) -> bool {
        self.server.upgrade().is_some_and(|s| s.ready())
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let server = self
            .server
            .upgrade()
            .ok_or_else(|| ToolError("this MCP server is no longer configured".into()))?;
        let client = server.client().map_err(|e| ToolError(e.to_string()))?;
        let args = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let result = client
            .call_tool(&self.remote, args)
            .await
            .map_err(|e| ToolError(format!("MCP server {}: {e}", server.name)))?;
        let (text, is_error) = crate::render::render(&result, server.max_result_bytes);
        if is_error {
            // The server's words are as untrusted in an error as in a result.
            return Err(ToolError(format!(
                "the tool reported an error: {}",
                hearth_tools::untrusted::wrap(&self.spec.name, &text)
            )));
        }
        Ok(json!({ "text": text }))
    }
}
