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
use rmcp::service::{
    NotificationContext, RoleClient, RunningService, RunningServiceCancellationToken,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value};
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
    /// The server's name, for logs.
    label: String,
    /// Resolves with a reason once the session has ended (the child exited,
    /// the transport closed); `None` once it has.
    ended: Option<Pin<Box<dyn Future<Output = String> + Send>>>,
    /// Ends the session (its transport closes: a child's stdin).
    cancel: Option<RunningServiceCancellationToken>,
    /// A stdio server's process, closed by the stdio shutdown sequence.
    child: Option<tokio::process::Child>,
}

impl Connection {
    /// Waits until the connection ends by itself; why it did. Cancel-safe,
    /// so it can sit in a `select!`; pending for ever once it has answered.
    pub async fn ended(&mut self) -> String {
        let Some(ended) = self.ended.as_mut() else {
            return std::future::pending().await;
        };
        let reason = ended.await;
        self.ended = None;
        reason
    }

    /// Closes the connection: the session ends (a child's stdin closes),
    /// then a child is closed by the stdio shutdown sequence (2 s to exit,
    /// SIGTERM to its process group, 2 s, SIGKILL). Bounded: at most about
    /// [`SESSION_GRACE`] plus 6 s.
    pub async fn close(mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(ended) = self.ended.take()
            && tokio::time::timeout(SESSION_GRACE, ended).await.is_err()
        {
            tracing::warn!(server = %self.label, "the MCP session did not end in time");
        }
        if let Some(mut child) = self.child.take() {
            crate::child::close(&self.label, &mut child).await;
        }
    }
}

/// How long the session has to end once cancelled (it answers what is in
/// flight, then closes its transport).
pub const SESSION_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

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
    // rmcp's messages carry its transport's type name and its causes' debug
    // forms: shown as words, causes after colons.
    match e {
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => {
            McpError::Closed(hearth_core::error_text(&e))
        }
        rmcp::ServiceError::McpError(data) => McpError::Server(data.message.to_string()),
        other => McpError::Protocol(hearth_core::error_text(&other)),
    }
}

/// Starts (stdio) or opens (HTTP) a connection and completes the MCP
/// handshake. `label` names the server in logs.
///
/// A `notifications/tools/list_changed` sent before the initialize result
/// (as server-everything does) is dropped by the SDK; the manager lists the
/// tools right after the handshake, so that list already has the change.
pub async fn connect(label: &str, target: &Target) -> Result<Connection> {
    // A day: bounded by the transport alone (an HTTP client's timeouts).
    let far = std::time::Duration::from_secs(24 * 3600);
    connect_within(label, target, far, std::future::pending()).await
}

/// As [`connect`], giving up when the handshake takes longer than `within`
/// or `stop` resolves first; a child started for it is then closed.
pub(crate) async fn connect_within(
    label: &str,
    target: &Target,
    within: std::time::Duration,
    stop: impl Future<Output = ()>,
) -> Result<Connection> {
    let tools_changed = Arc::new(Notify::new());
    let handler = Handler {
        tools_changed: tools_changed.clone(),
    };
    match target {
        Target::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let crate::child::Spawned {
                mut child,
                stdin,
                stdout,
                stderr,
            } = crate::child::spawn(command, args, env, cwd.as_ref())?;
            let last_line = Arc::new(Mutex::new(String::new()));
            let reader = tokio::spawn(crate::child::log_stderr(
                label.to_owned(),
                stderr,
                last_line.clone(),
            ));
            match bounded(handler.serve((stdout, stdin)), within, stop).await {
                Ok(service) => Ok(wrap(
                    label,
                    service,
                    tools_changed,
                    Some(last_line),
                    Some(child),
                )),
                Err(why) => {
                    // The transport is gone, so the child's stdin is closed:
                    // it exits, or is made to. Its stderr then ends, and its
                    // last line usually says why (bounded: a process it
                    // started may hold the pipe).
                    crate::child::close(label, &mut child).await;
                    let _ = tokio::time::timeout(STDERR_GRACE, reader).await;
                    let said = last_line.lock().map(|l| l.clone()).unwrap_or_default();
                    Err(McpError::Start(if said.is_empty() {
                        why
                    } else {
                        format!("{why} (its last stderr line: {said})")
                    }))
                }
            }
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
            let service = bounded(handler.serve(transport), within, stop)
                .await
                .map_err(|why| McpError::Start(format!("{url}: {why}")))?;
            Ok(wrap(label, service, tools_changed, None, None))
        }
    }
}

/// The handshake, given up after `within` or when `stop` resolves first.
async fn bounded<T, E: std::error::Error + 'static>(
    handshake: impl Future<Output = std::result::Result<T, E>>,
    within: std::time::Duration,
    stop: impl Future<Output = ()>,
) -> std::result::Result<T, String> {
    tokio::select! {
        r = tokio::time::timeout(within, handshake) => match r {
            Ok(r) => r.map_err(|e| format!("handshake failed: {}", hearth_core::error_text(&e))),
            Err(_) => Err(format!("no handshake within {} s", within.as_secs())),
        },
        () = stop => Err("hearth is stopping".to_owned()),
    }
}

fn wrap(
    label: &str,
    service: RunningService<RoleClient, Handler>,
    tools_changed: Arc<Notify>,
    last_line: Option<Arc<Mutex<String>>>,
    child: Option<tokio::process::Child>,
) -> Connection {
    let client = Arc::new(Rmcp {
        peer: service.peer().clone(),
    });
    let cancel = service.cancellation_token();
    let ended = Box::pin(async move {
        let reason = match service.waiting().await {
            Ok(rmcp::service::QuitReason::Cancelled) => "connection ended (cancelled)".to_owned(),
            Ok(rmcp::service::QuitReason::Closed) => "connection ended (closed)".to_owned(),
            Ok(rmcp::service::QuitReason::JoinError(e)) => {
                format!("connection ended: {}", hearth_core::error_text(&e))
            }
            Ok(other) => format!(
                "connection ended ({})",
                hearth_core::error_text::plain(&format!("{other:?}"))
            ),
            Err(e) => format!("connection task failed: {}", hearth_core::error_text(&e)),
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
        label: label.to_owned(),
        ended: Some(ended),
        cancel: Some(cancel),
        child,
    }
}
