//! `GeminiProvider`: the native Gemini API adapter. Requests go to
//! `POST {base_url}/models/{model}:streamGenerateContent?alt=sse` with the key
//! in the `x-goog-api-key` header; the answer is an SSE stream of
//! `GenerateContentResponse` objects, one per `data:` line.
//!
//! Gemini sends whole function calls (never argument fragments) and no call
//! ids, so calls get ids `call_<n>` in the order they arrive in one answer.
//! Thought signatures are reported as signature-only `ThinkingDelta`s and go
//! back, on the next turn, only to the provider that produced them.

mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName};

use crate::classify::ErrorFacts;
use crate::sse::SseDecoder;
#[cfg(test)]
use crate::transport::parse_retry_after;
use crate::transport::{self, CallContext, ErrorBody, cap, impl_stream_decoder};
use crate::{Capabilities, ErrorKind, EventStream, LlmError, Provider};

/// The public Gemini API base URL.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The API key header.
const API_KEY_HEADER: &str = "x-goog-api-key";

/// Settings of one Gemini API endpoint.
#[derive(Clone)]
pub struct GeminiConfig {
    /// The provider's configured name, used in errors and to decide whose
    /// thought signatures may be sent back.
    pub name: String,
    /// Base URL such as [`DEFAULT_BASE_URL`]; requests go to
    /// `{base_url}/models/{model}:streamGenerateContent?alt=sse` (a trailing
    /// slash is tolerated).
    pub base_url: String,
    /// Sent as the `x-goog-api-key` header when set, never in the URL.
    pub api_key: Option<String>,
    /// Where the key came from (the environment variable named by
    /// `api_key_env`, or `secret <name>`), named in errors so a failed call
    /// says which key it used; never the key itself.
    pub api_key_env: Option<String>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Longest wait from sending the request to the response headers.
    pub request_timeout: Duration,
    /// Longest gap between two chunks of a streamed answer.
    pub idle_timeout: Duration,
}

impl GeminiConfig {
    /// A config without key or headers, with 60 s request and idle timeouts.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            api_key_env: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

// Hand-written so the key and header values (often secrets too) never reach logs.
impl fmt::Debug for GeminiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("GeminiConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("headers", &header_names)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// A `Provider` speaking the Gemini API's `streamGenerateContent`.
#[derive(Clone)]
pub struct GeminiProvider {
    name: Arc<str>,
    /// The validated base URL without trailing slash.
    base: String,
    headers: HeaderMap,
    client: reqwest::Client,
    request_timeout: Duration,
    idle_timeout: Duration,
    /// Whether a key is sent, and where it came from, for errors.
    has_key: bool,
    key_env: Option<String>,
}

impl fmt::Debug for GeminiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiProvider")
            .field("name", &self.name)
            .field("base_url", &self.base)
            .finish_non_exhaustive()
    }
}

impl GeminiProvider {
    /// Validates `config` (an http(s) base URL without query, well-formed
    /// header names and values) and builds the provider on `client`.
    pub fn new(config: GeminiConfig, client: reqwest::Client) -> Result<Self, LlmError> {
        let name = config.name;
        let invalid = |msg: String| LlmError::new(name.as_str(), ErrorKind::InvalidRequest, msg);
        let url = transport::parse_endpoint(
            config.base_url.trim_end_matches('/'),
            &config.base_url,
            invalid,
        )?;
        if url.query().is_some() || url.fragment().is_some() {
            // A `?key=` here would put the key in the URL, and the method is appended.
            return Err(invalid(
                "base_url must not have a query or fragment".to_owned(),
            ));
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            transport::insert_key(
                &mut headers,
                HeaderName::from_static(API_KEY_HEADER),
                "",
                key,
                invalid,
            )?;
        }
        transport::append_headers(&mut headers, &config.headers, invalid)?;
        Ok(Self {
            name: Arc::from(name),
            base: url.as_str().trim_end_matches('/').to_owned(),
            headers,
            client,
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
            has_key: config.api_key.is_some(),
            key_env: config.api_key_env,
        })
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.name, kind, message)
    }

    /// The streaming endpoint for `model`. A leading `models/` is accepted;
    /// names with characters outside `[A-Za-z0-9._-/]` or empty, `.` or `..`
    /// segments are refused rather than turned into a surprising URL.
    fn endpoint(&self, model: &str) -> Result<Url, LlmError> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        let bad_char = model
            .bytes()
            .any(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/')));
        let bad_segment = model.split('/').any(|s| matches!(s, "" | "." | ".."));
        if bad_char || bad_segment {
            return Err(self.error(
                ErrorKind::InvalidRequest,
                format!(
                    "model name {:?} is not a valid Gemini model name",
                    cap(model, 100)
                ),
            ));
        }
        let endpoint = format!("{}/models/{model}:streamGenerateContent?alt=sse", self.base);
        Url::parse(&endpoint).map_err(|e| {
            self.error(
                ErrorKind::InvalidRequest,
                format!("cannot build the request URL: {e}"),
            )
        })
    }

    /// Turns a non-2xx response into an error, reading at most 64 KiB of body
    /// for the provider's own status and message.
    async fn status_error(&self, resp: reqwest::Response) -> LlmError {
        let body = ErrorBody::read(resp, self.idle_timeout).await;
        let parsed = body.json();
        let facts = parsed
            .as_ref()
            .map(ErrorFacts::from_json)
            .unwrap_or_default()
            .with_status(body.status.as_u16());
        let mut message = format!("HTTP {}", body.status);
        facts.describe(&mut message);
        let mut err = body.error(&self.name, facts.kind(), message);
        err.retry_after = err
            .retry_after
            .or_else(|| facts.retry_delay.and_then(parse_retry_delay));
        err
    }
}

#[async_trait::async_trait]
impl Provider for GeminiProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError> {
        let url = self.endpoint(&request.model)?;
        let ctx = Arc::new(CallContext::new(
            &url,
            self.has_key,
            self.key_env.as_deref(),
        ));
        let wire_request = wire::WireRequest::from_request(request, &self.name)
            .map_err(|m| self.error(ErrorKind::InvalidRequest, m))?;
        let body = serde_json::to_vec(&wire_request).map_err(|e| {
            self.error(
                ErrorKind::InvalidRequest,
                format!("cannot encode request: {e}"),
            )
        })?;
        drop(wire_request);
        let started = Instant::now();
        let resp = transport::send(
            &self.name,
            &self.client,
            url,
            &self.headers,
            body,
            self.request_timeout,
            started,
        )
        .await
        .map_err(|e| e.at(&ctx))?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp).await.at(&ctx));
        }
        transport::check_event_stream(&self.name, &resp).map_err(|e| e.at(&ctx))?;
        Ok(transport::event_stream(
            GeminiDecoder::new(Arc::clone(&self.name)),
            resp.bytes_stream(),
            self.idle_timeout,
            started,
            ctx,
        ))
    }
}

/// A call-id prefix unique across streams and restarts: time plus a counter.
fn call_prefix() -> String {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("call_{ms:x}{n:x}")
}

/// The stream parser of this adapter, without I/O: `push` body bytes as they
/// arrive, take events with `next_event` until it returns `Ok(None)`, and call
/// `end_of_body` when the body ends. `GeminiProvider::stream` runs on it; it
/// is public so benchmarks and tests can feed it bytes directly.
#[derive(Debug)]
pub struct GeminiDecoder {
    provider: Arc<str>,
    decoder: SseDecoder,
    /// Events parsed from a chunk but not yet handed out.
    pending: VecDeque<StreamEvent>,
    /// The last `finishReason` seen, as sent; mapped at the end, when it is
    /// known whether the answer called tools.
    finish: Option<String>,
    /// Usage merged field by field over all chunks, sent once before `Finish`.
    usage: Option<Usage>,
    /// Function calls seen so far: the next call's index.
    calls: u32,
    /// Gemini sends no call ids; ours must stay unique across a thread's
    /// history, since other providers pair results to calls by id after a
    /// model switch.
    call_prefix: String,
    /// The body has ended; only buffered events remain.
    eof: bool,
    /// Why the answer is over (`eof`, `cut` or `error`), once it is; only
    /// pending events follow.
    outcome: Option<&'static str>,
}

impl_stream_decoder!(GeminiDecoder);

impl GeminiDecoder {
    /// A decoder whose errors name `provider`, with a fresh call-id prefix.
    pub fn new(provider: impl Into<Arc<str>>) -> Self {
        Self {
            provider: provider.into(),
            decoder: SseDecoder::new(),
            pending: VecDeque::new(),
            finish: None,
            usage: None,
            calls: 0,
            call_prefix: call_prefix(),
            eof: false,
            outcome: None,
        }
    }

    /// Appends received body bytes; they may split events anywhere.
    pub fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    /// Marks the end of the body. Gemini has no end sentinel: a last event
    /// without its blank line still counts, and the answer is complete when a
    /// `finishReason` came, cut (an error) when none did.
    pub fn end_of_body(&mut self) {
        if self.eof {
            return;
        }
        self.eof = true;
        if self.decoder.has_pending() {
            self.decoder.push(b"\n\n");
        }
    }

    /// True once the answer is over, completely or by an error, and all its
    /// events have been taken.
    pub fn is_done(&self) -> bool {
        self.outcome.is_some() && self.pending.is_empty()
    }

    /// The next event; `Ok(None)` when more bytes are needed or the answer is
    /// over. An error ends the answer: nothing follows it.
    pub fn next_event(&mut self) -> Result<Option<StreamEvent>, LlmError> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Ok(Some(ev));
            }
            if self.outcome.is_some() {
                return Ok(None);
            }
            match self.decoder.next_event() {
                Ok(Some(ev)) => {
                    let handled = self.handle(&ev.data);
                    self.decoder.recycle(ev);
                    if let Err(e) = handled {
                        self.pending.clear();
                        self.outcome = Some("error");
                        return Err(e);
                    }
                }
                Ok(None) if self.eof => {
                    // A finishReason followed by the end of the body is a
                    // complete answer; no finishReason means a cut.
                    if let Some(reason) = self.finish.take() {
                        self.close(&reason);
                        self.outcome = Some("eof");
                        continue;
                    }
                    self.outcome = Some("cut");
                    return Err(self.error(
                        ErrorKind::MalformedResponse,
                        "stream ended without a finishReason",
                    ));
                }
                Ok(None) => return Ok(None),
                Err(e) => {
                    self.outcome = Some("error");
                    return Err(self.error(
                        ErrorKind::MalformedResponse,
                        format!("bad event stream: {e}"),
                    ));
                }
            }
        }
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.provider, kind, message)
    }
    /// Parses one SSE `data` payload into pending events.
    fn handle(&mut self, data: &str) -> Result<(), LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let chunk: wire::Chunk = serde_json::from_str(data).map_err(|e| {
            // serde_json's own message can quote the payload, i.e. model output.
            self.error(
                ErrorKind::MalformedResponse,
                format!(
                    "stream chunk is not valid JSON ({:?} error at line {} column {})",
                    e.classify(),
                    e.line(),
                    e.column()
                ),
            )
        })?;
        if let Some(err) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            let facts = ErrorFacts::from_json(err);
            let mut msg = String::from("provider error mid-stream");
            facts.describe(&mut msg);
            let mut e = self.error(facts.kind(), msg);
            e.retry_after = facts.retry_delay.and_then(parse_retry_delay);
            return Err(e);
        }
        if let Some(reason) = chunk
            .prompt_feedback
            .and_then(|f| f.block_reason)
            .filter(|r| !r.is_empty())
        {
            return Err(self.error(
                ErrorKind::ContentFilter,
                format!("prompt blocked by the provider: {}", cap(&reason, 64)),
            ));
        }
        if let Some(candidate) = chunk.candidates.and_then(|c| c.into_iter().next()) {
            let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
            for part in parts {
                self.handle_part(part);
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(reason);
            }
        }
        if let Some(u) = chunk.usage_metadata {
            let usage = self.usage.get_or_insert_with(Usage::default);
            let merge = |old: &mut Option<u64>, new: Option<u64>| {
                if new.is_some() {
                    *old = new;
                }
            };
            merge(&mut usage.input_tokens, u.prompt_token_count);
            merge(&mut usage.output_tokens, u.candidates_token_count);
            merge(&mut usage.cached_tokens, u.cached_content_token_count);
            merge(&mut usage.reasoning_tokens, u.thoughts_token_count);
        }
        Ok(())
    }

    fn handle_part(&mut self, part: wire::Part) {
        let signature = part.thought_signature.filter(|s| !s.is_empty());
        if part.thought == Some(true) {
            let text = part.text.unwrap_or_default();
            if !text.is_empty() || signature.is_some() {
                self.pending
                    .push_back(StreamEvent::ThinkingDelta { text, signature });
            }
            return;
        }
        if let Some(text) = part.text.filter(|t| !t.is_empty()) {
            self.pending.push_back(StreamEvent::TextDelta(text));
        }
        if let Some(call) = part.function_call {
            let index = self.calls;
            self.calls = self.calls.saturating_add(1);
            let arguments = match call.args {
                Some(args @ serde_json::Value::Object(_)) => args.to_string(),
                _ => String::from("{}"),
            };
            self.pending.push_back(StreamEvent::ToolCallDelta {
                index,
                id: Some(format!("{}_{index}", self.call_prefix)),
                name: call.name.filter(|n| !n.is_empty()),
                arguments,
            });
        }
        if let Some(sig) = signature {
            self.pending.push_back(StreamEvent::ThinkingDelta {
                text: String::new(),
                signature: Some(sig),
            });
        }
    }

    /// The events closing a complete answer: usage, then `Finish`.
    fn close(&mut self, reason: &str) {
        if let Some(u) = self.usage.take() {
            self.pending.push_back(StreamEvent::Usage(u));
        }
        let reason = match reason {
            "STOP" if self.calls > 0 => FinishReason::ToolCalls,
            "STOP" => FinishReason::Stop,
            "MAX_TOKENS" => FinishReason::Length,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_ascii_lowercase()),
        };
        self.pending.push_back(StreamEvent::Finish(reason));
    }
}

/// A `google.rpc.RetryInfo` `retryDelay` such as `"37s"` or `"1.5s"`.
fn parse_retry_delay(delay: &str) -> Option<Duration> {
    transport::parse_seconds(delay.trim().strip_suffix('s')?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(base: &str) -> Result<GeminiProvider, LlmError> {
        GeminiProvider::new(GeminiConfig::new("g", base), reqwest::Client::new())
    }

    #[test]
    fn rejects_bad_config() {
        assert!(provider("ftp://x/v1beta").is_err());
        assert!(provider("not a url").is_err());
        assert!(provider("http://h/v1beta?key=abc").is_err());
        let p = provider("http://127.0.0.1:1/v1beta/").unwrap();
        assert_eq!(p.base, "http://127.0.0.1:1/v1beta");
        let mut cfg = GeminiConfig::new("g", DEFAULT_BASE_URL);
        cfg.api_key = Some("AIza-secret\n".into());
        let err = GeminiProvider::new(cfg.clone(), reqwest::Client::new()).unwrap_err();
        assert!(!err.message.contains("AIza-secret"));
        assert!(!format!("{cfg:?}").contains("AIza-secret"));
        cfg.api_key = Some("AIza-secret".into());
        cfg.headers = vec![("x-ok".into(), "line\nbreak".into())];
        let err = GeminiProvider::new(cfg, reqwest::Client::new()).unwrap_err();
        assert!(!err.message.contains("break"));
    }

    #[test]
    fn builds_endpoints_and_rejects_odd_model_names() {
        let p = provider("http://127.0.0.1:1/v1beta").unwrap();
        assert_eq!(
            p.endpoint("gemini-2.5-flash").unwrap().as_str(),
            "http://127.0.0.1:1/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            p.endpoint("models/gemini-2.5-pro").unwrap().as_str(),
            "http://127.0.0.1:1/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        assert!(p.endpoint("tuned/my_model.v1").is_ok());
        for bad in [
            "",
            "a b",
            "x:generateContent",
            "x?key=1",
            "../../etc",
            "a//b",
            "a/",
            "ü",
            "x#y",
            "x%2e",
        ] {
            let err = p.endpoint(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidRequest, "{bad:?}");
        }
    }

    #[test]
    fn parses_retry_delays() {
        assert_eq!(parse_retry_delay("37s"), Some(Duration::from_secs(37)));
        assert_eq!(parse_retry_delay("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_delay("37"), None);
        let h = |s: &str| parse_retry_after(&reqwest::header::HeaderValue::from_str(s).unwrap());
        assert_eq!(h("7"), Some(Duration::from_secs(7)));
        assert_eq!(h("-1"), None);
    }
}
