//! The MCP client's errors.

/// What can go wrong talking to an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server could not be started or the handshake failed.
    #[error("could not start: {0}")]
    Start(String),
    /// The connection is gone (the child exited, the transport closed).
    #[error("the connection is closed: {0}")]
    Closed(String),
    /// The server answered a request with an error.
    #[error("the server answered with an error: {0}")]
    Server(String),
    /// The server's answer broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// No configured server has this name.
    #[error("no MCP server is named {0:?}")]
    UnknownServer(String),
    /// The server is configured but not connected now.
    #[error("MCP server {server} is not available ({state}){}", last_error.as_ref().map(|e| format!(": {e}")).unwrap_or_default())]
    Unavailable {
        server: String,
        /// Its state, e.g. `restarting`.
        state: &'static str,
        /// Why it is down, when known.
        last_error: Option<String>,
    },
    /// A call took longer than the server's `timeout_secs`.
    #[error("the call timed out after {0} s")]
    Timeout(u64),
}

impl McpError {
    /// True when trying again later may work (the server may come back).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Start(_) | Self::Closed(_) | Self::Unavailable { .. } | Self::Timeout(_) => true,
            Self::Server(_) | Self::Protocol(_) | Self::UnknownServer(_) => false,
        }
    }
}

/// The MCP client's result type.
pub type Result<T> = std::result::Result<T, McpError>;
