//! Our MCP client interface, and its one implementation on rmcp.
//!
//! Nothing outside this module names an rmcp type: the rest of the crate
//! sees [`McpClient`], [`Connection`] and plain JSON in the MCP wire shapes
//! (a tool is `{name, description, inputSchema, annotations}`, a call result
//! `{content, structuredContent, isError}`), which the spec fixes and the SDK
//! does not. Replacing rmcp means rewriting this file only.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;

use crate::error::{McpError, Result};

/// How long a failed start waits for the child's stderr to end.
const STDERR_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// A connected MCP server, as hearth uses it.
#[async_trait::async_trait]
pub trait McpClient: Send + Sync + 'static {
    /// Every tool the server offers (all pages), each in the MCP wire shape.
    async fn list_tools(&self) -> Result<Vec<Value>>;
    /// Calls `name` with `args`; the result in the MCP wire shape.
    async fn call_tool(&self, name: &str, args: Map<String, Value>) -> Result<Value>;
}

/// How to reach one server.
#[derive(Debug, Clone)]
pub enum Target {
    /// A child process speaking MCP over stdio.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its whole environment (nothing else is inherited).
        env: BTreeMap<String, String>,
        /// Its working folder (hearth's own when `None`).
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
        /// Our shared HTTP client (one TLS stack, our timeouts).
        client: reqwest::Client,
    },
}

/// A live connection.
pub struct Connection {
    /// The client to call.
    pub client: Arc<dyn McpClient>,
    /// Woken on each `notifications/tools/list_changed`.
    pub tools_changed: Arc<Notify>,
    /// Resolves with a reason once the connection has ended (the child
    /// exited, the transport closed).
    pub closed: Pin<Box<dyn Future<Output = String> + Send>>,
}

/// Our rmcp client handler: it only listens for tool-list changes.
struct Handler {
    tools_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // notify_one keeps a permit, so a change that lands while the manager
        // is busy listing is not lost.
        self.tools_changed.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        // The newest version negotiated with `initialize` (the lifecycle we
        // use); servers of the 2025 specs answer it or their own.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("hearth", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

struct Rmcp {
    peer: rmcp::Peer<RoleClient>,
}

#[async_trait::async_trait]
impl McpClient for Rmcp {
    async fn list_tools(&self) -> Result<Vec<Value>> {
        let tools = self.peer.list_all_tools().await.map_err(protocol)?;
        tools
            .iter()
            .map(|t| serde_json::to_value(t).map_err(|e| McpError::Protocol(e.to_string())))
            .collect()
    }

    async fn call_tool(&self, name: &str, args: Map<String, Value>) -> Result<Value> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
        let result = self.peer.call_tool(params).await.map_err(protocol)?;
        serde_json::to_value(&result).map_err(|e| McpError::Protocol(e.to_string()))
    }
}

fn protocol(e: rmcp::ServiceError) -> McpError {
    match e {
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => {
            McpError::Closed(e.to_string())
        }
        rmcp::ServiceError::McpError(data) => McpError::Server(data.message.to_string()),
        other => McpError::Protocol(other.to_string()),
    }
}

/// Starts (stdio) or opens (HTTP) a connection and completes the MCP
/// handshake. `label` names the server in logs.
///
/// A `notifications/tools/list_changed` sent before the initialize result
/// (as server-everything does) is dropped by the SDK; the manager lists the
/// tools right after the handshake, so that list already has the change.
pub async fn connect(label: &str, target: &Target) -> Result<Connection> {
    let tools_changed = Arc::new(Notify::new());
    let handler = Handler {
        tools_changed: tools_changed.clone(),
    };
    let service = match target {
        Target::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).env_clear().envs(env);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| McpError::Start(format!("cannot run {command:?}: {e}")))?;
            let last_line = Arc::new(Mutex::new(String::new()));
            let reader = stderr.map(|stderr| {
                tokio::spawn(log_stderr(label.to_owned(), stderr, last_line.clone()))
            });
            let service = match handler.serve(transport).await {
                Ok(service) => service,
                Err(e) => {
                    // The child is gone or going: its stderr ends soon, and
                    // its last line usually says why. Bounded, for a child
                    // that lingers.
                    if let Some(reader) = reader {
                        let _ = tokio::time::timeout(STDERR_GRACE, reader).await;
                    }
                    let said = last_line.lock().map(|l| l.clone()).unwrap_or_default();
                    return Err(McpError::Start(if said.is_empty() {
                        format!("handshake failed: {e}")
                    } else {
                        format!("handshake failed: {e} (its last stderr line: {said})")
                    }));
                }
            };
            return Ok(wrap(service, tools_changed, Some(last_line)));
        }
        Target::Http {
            url,
            headers,
            client,
        } => {
            let mut custom = std::collections::HashMap::new();
            for (k, v) in headers {
                let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| McpError::Start(format!("header {k}: {e}")))?;
                let value = reqwest::header::HeaderValue::from_str(v)
                    .map_err(|_| McpError::Start(format!("header {k}: the value is not valid")))?;
                custom.insert(name, value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
            handler
                .serve(transport)
                .await
                .map_err(|e| McpError::Start(format!("handshake with {url} failed: {e}")))?
        }
    };
    Ok(wrap(service, tools_changed, None))
}

fn wrap(
    service: RunningService<RoleClient, Handler>,
    tools_changed: Arc<Notify>,
    last_line: Option<Arc<Mutex<String>>>,
) -> Connection {
    let client = Arc::new(Rmcp {
        peer: service.peer().clone(),
    });
    let closed = Box::pin(async move {
        let reason = match service.waiting().await {
            Ok(reason) => format!("connection ended ({reason:?})"),
            Err(e) => format!("connection task failed: {e}"),
        };
        let said = last_line
            .and_then(|l| l.lock().ok().map(|l| l.clone()))
            .unwrap_or_default();
        if said.is_empty() {
            reason
        } else {
            format!("{reason}; its last stderr line: {said}")
        }
    });
    Connection {
        client,
        tools_changed,
        closed,
    }
}

/// Logs a child's stderr line by line and keeps the last line, which usually
/// says why a server would not start.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr, last: Arc<Mutex<String>>) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, line = %line, "MCP server stderr");
        if !line.trim().is_empty()
            && let Ok(mut l) = last.lock()
        {
            let mut line = line;
            line.truncate(line.floor_char_boundary(300));
            *l = line;
        }
    }
}
