//! One error classification for every adapter. Providers and the proxies in
//! front of them (LiteLLM, OpenRouter, vLLM, Ollama, llama.cpp) answer in a
//! handful of body shapes, and an adapter cannot know which server it talks
//! to: an OpenAI-compatible endpoint may be LiteLLM relaying Anthropic. So
//! every adapter reads the body with [`ErrorFacts::from_json`] and takes the
//! kind from [`ErrorFacts::kind`]; only where the facts come from differs.

use std::time::Duration;

use serde_json::Value;

use crate::ErrorKind;
use crate::transport::{MESSAGE_CAP, cap, parse_seconds};

/// What an error response or an error event says, in any of the shapes
/// servers use: Anthropic `{"type":"error","error":{"type","message"}}`,
/// OpenAI `{"error":{"message","type","param","code"}}`, Google
/// `{"error":{"code","message","status","details"}}`, vLLM's flat
/// `{"object":"error","message","type","code"}`, Ollama's `{"error":"..."}`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ErrorFacts<'a> {
    /// The HTTP status; `None` for an error sent inside a stream.
    pub(crate) status: Option<u16>,
    /// A textual `code` (`context_length_exceeded`, `rate_limit_exceeded`).
    pub(crate) code: Option<&'a str>,
    /// A numeric `code`, or one written as digits: an HTTP status by
    /// convention (vLLM, OpenRouter, LiteLLM, Google).
    pub(crate) numeric_code: Option<u16>,
    /// The error `type` (`overloaded_error`, `invalid_request_error`).
    pub(crate) err_type: Option<&'a str>,
    /// Google's canonical status (`RESOURCE_EXHAUSTED`, `UNAVAILABLE`).
    pub(crate) grpc_status: Option<&'a str>,
    /// The human message.
    pub(crate) message: Option<&'a str>,
    /// Google's `details[].reason` said `API_KEY_INVALID`.
    pub(crate) key_invalid: bool,
    /// Google's `details[]` `RetryInfo.retryDelay`, e.g. `"37s"`.
    pub(crate) retry_delay: Option<&'a str>,
}

impl<'a> ErrorFacts<'a> {
    /// Reads an error body or event payload, leniently: missing or odd fields
    /// are left out, never an error.
    pub(crate) fn from_json(value: &'a Value) -> Self {
        let err = value.get("error").filter(|e| !e.is_null()).unwrap_or(value);
        if let Some(s) = err.as_str() {
            return Self {
                message: Some(s),
                ..Self::default()
            };
        }
        let str_field = |name: &str| err.get(name).and_then(Value::as_str);
        let (code, numeric_code) = match err.get("code") {
            Some(Value::String(s)) => match s.parse::<u16>() {
                Ok(n) => (None, Some(n)),
                Err(_) => (Some(s.as_str()), None),
            },
            Some(Value::Number(n)) => (None, n.as_u64().and_then(|n| u16::try_from(n).ok())),
            _ => (None, None),
        };
        let details = err.get("details").and_then(Value::as_array);
        let detail_str = |field: &str| {
            details
                .into_iter()
                .flatten()
                .find_map(|d| d.get(field).and_then(Value::as_str))
        };
        // Google's `status` is a name; OpenAI-style bodies may put the HTTP
        // status there as a number, which `numeric_code` already covers.
        let grpc_status = str_field("status");
        Self {
            status: None,
            code,
            numeric_code,
            err_type: str_field("type").filter(|t| *t != "error"),
            grpc_status,
            message: str_field("message"),
            key_invalid: detail_str("reason") == Some("API_KEY_INVALID"),
            retry_delay: detail_str("retryDelay"),
        }
    }

    /// The same facts with the HTTP status the response carried.
    pub(crate) fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// True when any machine-readable field equals one of `names`
    /// (case-insensitively).
    fn said(&self, names: &[&str]) -> bool {
        [self.code, self.err_type, self.grpc_status]
            .into_iter()
            .flatten()
            .any(|v| names.iter().any(|n| v.eq_ignore_ascii_case(n)))
    }

    /// The failure class. The HTTP status decides where it is unambiguous;
    /// the body's codes and wording refine a 4xx (context window, tools) and
    /// decide for errors sent inside a stream, which have no status.
    pub(crate) fn kind(&self) -> ErrorKind {
        let status = self.status.or(self.numeric_code);
        let request_side = status.is_none_or(|s| (400..500).contains(&s));
        if self.key_invalid {
            return ErrorKind::Auth;
        }
        if matches!(status, Some(529 | 503))
            || self.said(&[
                "overloaded_error",
                "server_is_overloaded",
                "slow_down",
                "UNAVAILABLE",
            ])
        {
            return ErrorKind::Overloaded;
        }
        if matches!(status, Some(401 | 403))
            || self.said(&[
                "authentication_error",
                "permission_error",
                "invalid_api_key",
                "UNAUTHENTICATED",
                "PERMISSION_DENIED",
            ])
        {
            return ErrorKind::Auth;
        }
        if status == Some(429)
            || self.said(&[
                "rate_limit_error",
                "rate_limit_exceeded",
                "RESOURCE_EXHAUSTED",
            ])
        {
            return ErrorKind::RateLimited;
        }
        // A server that gave up waiting for us: worth a retry.
        if status == Some(408) || self.said(&["DEADLINE_EXCEEDED", "timeout_error"]) {
            return ErrorKind::Timeout;
        }
        if request_side && self.is_context_length() {
            return ErrorKind::ContextLength;
        }
        // Before `NotFound`: OpenRouter answers 404 when no endpoint of the
        // model takes tools.
        if request_side && self.is_tools_unsupported() {
            return ErrorKind::ToolsUnsupported;
        }
        if status == Some(404) || self.said(&["not_found_error", "model_not_found", "NOT_FOUND"]) {
            return ErrorKind::NotFound;
        }
        if request_side && self.said(&["content_filter", "content_policy_violation"]) {
            return ErrorKind::ContentFilter;
        }
        match status {
            Some(400..=499) => ErrorKind::InvalidRequest,
            None if self.said(&[
                "invalid_request_error",
                "INVALID_ARGUMENT",
                "FAILED_PRECONDITION",
                "OUT_OF_RANGE",
            ]) =>
            {
                ErrorKind::InvalidRequest
            }
            // A provider failing mid-stream with nothing more specific.
            None | Some(500..=599) => ErrorKind::Server,
            Some(_) => ErrorKind::MalformedResponse,
        }
    }

    /// The prompt does not fit the model's context window, in the words of
    /// OpenAI ("maximum context length", `context_length_exceeded`),
    /// Anthropic ("prompt is too long", "exceed context limit"), Gemini
    /// ("input token count ... exceeds the maximum number of tokens"),
    /// LiteLLM (`ContextWindowExceededError`), llama.cpp
    /// (`exceed_context_size_error`), sglang ("longer than the model's
    /// context length") and Azure ("input tokens exceed the configured limit").
    fn is_context_length(&self) -> bool {
        if self.said(&["context_length_exceeded", "exceed_context_size_error"]) {
            return true;
        }
        let Some(m) = self.message.map(str::to_ascii_lowercase) else {
            return false;
        };
        [
            "contextwindowexceedederror",
            "context_length_exceeded",
            "context length",
            "context window",
            "context limit",
            "context size",
            "prompt is too long",
            "input is too long",
            "exceeds the maximum number of tokens",
            "input tokens exceed",
        ]
        .iter()
        .any(|p| m.contains(p))
            || (m.contains("token count") && m.contains("exceeds"))
    }

    /// The model or server takes no tool definitions: Ollama ("does not
    /// support tools"), OpenRouter ("No endpoints found that support tool
    /// use"), vLLM without a tool parser ("requires
    /// --enable-auto-tool-choice"), Gemini ("Function calling is not
    /// enabled"), llama.cpp without `--jinja` ("tools param requires
    /// --jinja"), and servers refusing the `tools` field as unknown.
    fn is_tools_unsupported(&self) -> bool {
        let Some(m) = self.message.map(str::to_ascii_lowercase) else {
            return false;
        };
        if m.contains("enable-auto-tool-choice") || m.contains("--jinja") {
            return true;
        }
        let about_tools = m.contains("tool") || m.contains("function");
        about_tools
            && [
                "not support",
                "support tool",
                "unsupported",
                "not enabled",
                "not allowed",
                "unrecognized request argument",
                "unknown field",
                "unknown parameter",
            ]
            .iter()
            .any(|p| m.contains(p))
    }

    /// How long to wait before a retry, from `retry_delay` (`"37s"`, `"1.5s"`).
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        parse_seconds(self.retry_delay?.trim().strip_suffix('s')?)
    }

    /// Appends `: <code or type>: <message>` for people, capped.
    pub(crate) fn describe(&self, out: &mut String) {
        if let Some(c) = self.code.or(self.err_type).or(self.grpc_status) {
            out.push_str(": ");
            out.push_str(&cap(c, 100));
        }
        if let Some(m) = self.message.filter(|m| !m.is_empty()) {
            out.push_str(": ");
            out.push_str(&cap(m, MESSAGE_CAP));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(status: Option<u16>, body: Value) -> ErrorKind {
        let facts = ErrorFacts::from_json(&body);
        match status {
            Some(s) => facts.with_status(s).kind(),
            None => facts.kind(),
        }
    }

    #[test]
    fn reads_every_body_shape() {
        let v = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let f = ErrorFacts::from_json(&v);
        assert_eq!(
            (f.err_type, f.message),
            (Some("overloaded_error"), Some("Overloaded"))
        );
        let v = json!({"object": "error", "message": "m", "type": "BadRequestError", "code": 400});
        let f = ErrorFacts::from_json(&v);
        assert_eq!(
            (f.numeric_code, f.code, f.message),
            (Some(400), None, Some("m"))
        );
        let v = json!({"error": {"code": "400", "message": "x", "type": null}});
        assert_eq!(ErrorFacts::from_json(&v).numeric_code, Some(400));
        let v = json!({"error": "plain"});
        assert_eq!(ErrorFacts::from_json(&v).message, Some("plain"));
        let v = json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}});
        let f = ErrorFacts::from_json(&v);
        assert_eq!(
            (f.grpc_status, f.retry_delay),
            (Some("RESOURCE_EXHAUSTED"), Some("37s"))
        );
        assert!(!f.key_invalid);
    }

    #[test]
    fn parses_retry_delays() {
        let after = |delay| {
            ErrorFacts {
                retry_delay: Some(delay),
                ..ErrorFacts::default()
            }
            .retry_after()
        };
        assert_eq!(after("37s"), Some(Duration::from_secs(37)));
        assert_eq!(after("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(after("37"), None);
        assert_eq!(ErrorFacts::default().retry_after(), None);
    }

    #[test]
    fn status_decides_where_it_is_unambiguous() {
        assert_eq!(kind(Some(529), json!(null)), ErrorKind::Overloaded);
        assert_eq!(kind(Some(503), json!(null)), ErrorKind::Overloaded);
        assert_eq!(kind(Some(502), json!(null)), ErrorKind::Server);
        assert_eq!(kind(Some(403), json!(null)), ErrorKind::Auth);
        assert_eq!(kind(Some(408), json!(null)), ErrorKind::Timeout);
        assert_eq!(kind(Some(413), json!(null)), ErrorKind::InvalidRequest);
        assert_eq!(kind(Some(302), json!(null)), ErrorKind::MalformedResponse);
        // A 500 whose message mentions the context window is still the
        // server's failure, not the prompt's.
        let v = json!({"error": {"message": "context window manager crashed"}});
        assert_eq!(kind(Some(500), v), ErrorKind::Server);
    }

    #[test]
    fn stream_errors_without_status_use_codes() {
        let k = |v| kind(None, v);
        assert_eq!(
            k(json!({"error": {"type": "overloaded_error"}})),
            ErrorKind::Overloaded
        );
        assert_eq!(
            k(json!({"error": {"type": "rate_limit_error"}})),
            ErrorKind::RateLimited
        );
        assert_eq!(
            k(json!({"error": {"type": "invalid_request_error"}})),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            k(json!({"error": {"status": "DEADLINE_EXCEEDED"}})),
            ErrorKind::Timeout
        );
        assert_eq!(
            k(json!({"code": "context_length_exceeded"})),
            ErrorKind::ContextLength
        );
        assert_eq!(k(json!({"error": {"code": 404}})), ErrorKind::NotFound);
        assert_eq!(
            k(json!({"error": {"code": "server_error"}})),
            ErrorKind::Server
        );
        assert_eq!(k(json!({"error": "boom"})), ErrorKind::Server);
    }

    #[test]
    fn ordinary_bad_requests_are_not_mistaken_for_tools_or_context() {
        for m in [
            "max_tokens too large",
            "Invalid schema for function 'x': 'object' is not valid",
            "messages.1: tool_use ids were found without tool_result blocks",
            "Too many tokens per minute",
        ] {
            let v = json!({"error": {"message": m}});
            assert_eq!(kind(Some(400), v), ErrorKind::InvalidRequest, "{m}");
        }
    }

    #[test]
    fn describes_code_and_message() {
        let v = json!({"error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "too long"}});
        let mut out = String::from("HTTP 400");
        ErrorFacts::from_json(&v).describe(&mut out);
        assert_eq!(out, "HTTP 400: context_length_exceeded: too long");
    }
}
