//! The error taxonomy shared by every adapter.

use std::time::Duration;

/// What kind of failure a provider call had; retry and telemetry decide on this,
/// never on message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 401/403: the key is missing, wrong or not allowed.
    Auth,
    /// 404: unknown model or endpoint.
    NotFound,
    /// 429.
    RateLimited,
    /// 5xx.
    Server,
    /// The provider is overloaded (Anthropic 529, `overloaded_error`; 503 with that meaning).
    Overloaded,
    /// The prompt does not fit the model's context window.
    ContextLength,
    /// The provider refused or filtered the content.
    ContentFilter,
    /// The model or server takes no tool definitions (Ollama "does not
    /// support tools", vLLM without a tool parser, OpenRouter "no endpoints
    /// found that support tool use"): the call may be repeated without tools.
    ToolsUnsupported,
    /// Other 4xx: the request itself was refused.
    InvalidRequest,
    /// No answer, or no chunk, in time.
    Timeout,
    /// Could not connect or the connection broke.
    Network,
    /// The answer did not follow the wire format.
    MalformedResponse,
}

impl ErrorKind {
    /// The snake_case name used in run errors and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::NotFound => "not_found",
            Self::RateLimited => "rate_limited",
            Self::Server => "server",
            Self::Overloaded => "overloaded",
            Self::ContextLength => "context_length",
            Self::ContentFilter => "content_filter",
            Self::ToolsUnsupported => "tools_unsupported",
            Self::InvalidRequest => "invalid_request",
            Self::Timeout => "timeout",
            Self::Network => "network",
            Self::MalformedResponse => "malformed_response",
        }
    }
}

/// A failed provider call. The message never holds the API key or prompt text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{provider}: {kind_name}: {message}", kind_name = .kind.as_str())]
pub struct LlmError {
    /// The provider's configured name.
    pub provider: String,
    /// The failure class.
    pub kind: ErrorKind,
    /// What happened, for people (includes the HTTP status and the provider's
    /// own error message where there is one).
    pub message: String,
    /// The server's `retry-after`, when it sent one.
    pub retry_after: Option<Duration>,
}

impl LlmError {
    /// A new error of `kind` for `provider`.
    pub fn new(provider: impl Into<String>, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// Appends which URL the call went to and which key it used (and, for
    /// a refused key, what to check) to the message.
    pub(crate) fn at(mut self, context: &crate::transport::CallContext) -> Self {
        self.message.push_str(&context.suffix(self.kind));
        self
    }

    /// True for failures worth retrying (rate limits, 5xx, timeouts, network).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::RateLimited
                | ErrorKind::Overloaded
                | ErrorKind::Server
                | ErrorKind::Timeout
                | ErrorKind::Network
        )
    }
}
