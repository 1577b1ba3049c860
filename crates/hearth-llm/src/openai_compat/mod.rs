//! `OpenAiCompatProvider`: the streaming Chat Completions adapter for OpenAI and
//! the many servers that speak its format (Ollama, vLLM, llama.cpp, OpenRouter).

mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::Url;
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER,
};

use crate::sse::SseDecoder;
use crate::{ErrorKind, EventStream, LlmError, Provider};

/// How much of an error response body is read to find the provider's message.
const ERROR_BODY_CAP: usize = 64 * 1024;
/// Longest provider-supplied text copied into an error message.
const MESSAGE_CAP: usize = 500;

/// Settings of one OpenAI-compatible endpoint.
#[derive(Clone)]
pub struct OpenAiCompatConfig {
    /// The provider's configured name, used in errors.
    pub name: String,
    /// Base URL such as `http://127.0.0.1:11434/v1`; requests go to
    /// `{base_url}/chat/completions` (a trailing slash is tolerated).
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Longest wait from sending the request to the response headers.
    pub request_timeout: Duration,
    /// Longest gap between two chunks of a streamed answer.
    pub idle_timeout: Duration,
}

impl OpenAiCompatConfig {
    /// A config without key or headers, with 60 s request and idle timeouts.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

// Hand-written so the key and header values (often secrets too) never reach logs.
impl fmt::Debug for OpenAiCompatConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OpenAiCompatConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("headers", &header_names)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// A `Provider` speaking streaming Chat Completions.
#[derive(Clone)]
pub struct OpenAiCompatProvider {
    name: Arc<str>,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    request_timeout: Duration,
    idle_timeout: Duration,
}

impl fmt::Debug for OpenAiCompatProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatProvider")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatProvider {
    /// Validates `config` (an http(s) base URL, well-formed header names and
    /// values) and builds the provider on `client`.
    pub fn new(config: OpenAiCompatConfig, client: reqwest::Client) -> Result<Self, LlmError> {
        let name = config.name;
        let invalid = |msg: String| LlmError::new(name.as_str(), ErrorKind::InvalidRequest, msg);
        let endpoint = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let url = Url::parse(&endpoint)
            .map_err(|e| invalid(format!("base_url {:?} is not a URL: {e}", config.base_url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "base_url {:?} must use http or https",
                config.base_url
            )));
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| invalid("api_key holds characters not allowed in a header".into()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (k, v) in &config.headers {
            let hname = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| invalid(format!("invalid header name {k:?}")))?;
            // The value is not echoed: it may be a credential.
            let mut value = HeaderValue::from_str(v)
                .map_err(|_| invalid(format!("invalid value for header {k:?}")))?;
            value.set_sensitive(true);
            headers.append(hname, value);
        }
        Ok(Self {
            name: Arc::from(name),
            url,
            headers,
            client,
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
        })
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.name, kind, message)
    }

    /// Turns a non-2xx response into an error, reading at most 64 KiB of body
    /// for the provider's own message.
    async fn status_error(&self, resp: reqwest::Response) -> LlmError {
        let status = resp.status();
        let retry_after = resp.headers().get(RETRY_AFTER).and_then(parse_retry_after);
        let mut body = Vec::new();
        let mut chunks = resp.bytes_stream();
        // One deadline for the whole body, so a server dribbling bytes cannot
        // stretch the read to 64 KiB times the idle timeout.
        let read = async {
            while body.len() < ERROR_BODY_CAP {
                match chunks.next().await {
                    Some(Ok(b)) => {
                        let take = b.len().min(ERROR_BODY_CAP - body.len());
                        body.extend_from_slice(&b[..take]);
                    }
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(self.idle_timeout, read).await;
        let kind = match status.as_u16() {
            401 | 403 => ErrorKind::Auth,
            404 => ErrorKind::NotFound,
            429 => ErrorKind::RateLimited,
            // A server that gave up waiting for us is a timeout, worth a retry.
            408 => ErrorKind::Timeout,
            400..=499 => ErrorKind::InvalidRequest,
            500..=599 => ErrorKind::Server,
            _ => ErrorKind::MalformedResponse,
        };
        let mut message = format!("HTTP {status}");
        let provider_msg = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| wire::error_message(&v).map(|m| cap(m, MESSAGE_CAP)));
        if let Some(m) = provider_msg {
            message.push_str(": ");
            message.push_str(&m);
        }
        tracing::debug!(provider = %self.name, status = status.as_u16(), body_bytes = body.len(), "provider returned an error status");
        let mut err = self.error(kind, message);
        err.retry_after = retry_after;
        err
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiCompatProvider {
    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError> {
        let body = serde_json::to_vec(&wire::WireRequest::from_request(request)).map_err(|e| {
            self.error(
                ErrorKind::InvalidRequest,
                format!("cannot encode request: {e}"),
            )
        })?;
        let request_bytes = body.len();
        let started = Instant::now();
        let send = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body)
            .send();
        let resp = match tokio::time::timeout(self.request_timeout, send).await {
            Err(_) => {
                return Err(self.error(
                    ErrorKind::Timeout,
                    format!("no response within {:?}", self.request_timeout),
                ));
            }
            Ok(Err(e)) => return Err(from_reqwest(&self.name, e)),
            Ok(Ok(resp)) => resp,
        };
        let status = resp.status();
        tracing::debug!(
            provider = %self.name,
            status = status.as_u16(),
            request_bytes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "response headers received"
        );
        if !status.is_success() {
            return Err(self.status_error(resp).await);
        }
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !content_type
            .get(..17)
            .is_some_and(|p| p.eq_ignore_ascii_case("text/event-stream"))
        {
            return Err(self.error(
                ErrorKind::MalformedResponse,
                format!(
                    "expected a text/event-stream response, got content type {:?}",
                    cap(content_type, 100)
                ),
            ));
        }
        let state = StreamState {
            decoder: OpenAiCompatDecoder::new(Arc::clone(&self.name)),
            body: Box::pin(resp.bytes_stream()),
            ended: false,
            failed: false,
            idle_timeout: self.idle_timeout,
            bytes: 0,
            started,
        };
        Ok(Box::pin(futures_util::stream::unfold(state, next_item)))
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Everything one streamed answer needs between two polls.
struct StreamState {
    decoder: OpenAiCompatDecoder,
    body: ByteStream,
    /// The end of the answer was logged; only events already decoded remain.
    ended: bool,
    /// The transport failed and its error was handed out: nothing follows.
    failed: bool,
    idle_timeout: Duration,
    bytes: u64,
    started: Instant,
}

impl StreamState {
    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.decoder.provider, kind, message)
    }

    fn end(&mut self, outcome: &str) {
        self.ended = true;
        tracing::debug!(
            provider = %self.decoder.provider,
            bytes = self.bytes,
            elapsed_ms = self.started.elapsed().as_millis() as u64,
            outcome,
            "stream ended"
        );
    }
}

/// The stream parser of this adapter, without I/O: `push` body bytes as they
/// arrive, take events with `next_event` until it returns `Ok(None)`, and call
/// `end_of_body` when the body ends. `OpenAiCompatProvider::stream` runs on
/// it; it is public so benchmarks and tests can feed it bytes directly.
#[derive(Debug)]
pub struct OpenAiCompatDecoder {
    provider: Arc<str>,
    decoder: SseDecoder,
    /// Events parsed from a chunk but not yet handed out.
    pending: VecDeque<StreamEvent>,
    /// Held back until `[DONE]` so `Finish` stays the last event even though
    /// the usage chunk comes after the one carrying `finish_reason`.
    finish: Option<FinishReason>,
    saw_tool_calls: bool,
    /// The body has ended.
    eof: bool,
    /// Why the answer is over (`done`, `eof` or `error`), once it is; only
    /// pending events follow.
    outcome: Option<&'static str>,
}

impl OpenAiCompatDecoder {
    /// A decoder whose errors name `provider`.
    pub fn new(provider: impl Into<Arc<str>>) -> Self {
        Self {
            provider: provider.into(),
            decoder: SseDecoder::new(),
            pending: VecDeque::new(),
            finish: None,
            saw_tool_calls: false,
            eof: false,
            outcome: None,
        }
    }

    /// Appends received body bytes; they may split events anywhere.
    pub fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    /// Marks the end of the body: a finish_reason seen without `[DONE]` then
    /// completes the answer; having neither is an error (the stream was cut).
    pub fn end_of_body(&mut self) {
        self.eof = true;
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
                    self.outcome = Some("eof");
                    // A finish_reason without [DONE] is a complete answer from a
                    // lax server; neither means the stream was cut.
                    return match self.finish.take() {
                        Some(reason) => Ok(Some(StreamEvent::Finish(reason))),
                        None => Err(self.error(
                            ErrorKind::MalformedResponse,
                            "stream ended without [DONE] or a finish_reason",
                        )),
                    };
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
        if data == "[DONE]" {
            // No finish_reason at all: tool calls mean the model wants them run.
            let reason = self.finish.take().unwrap_or(if self.saw_tool_calls {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            });
            self.pending.push_back(StreamEvent::Finish(reason));
            self.outcome = Some("done");
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
            let msg = wire::error_message(err).map_or_else(
                || String::from("provider sent an error mid-stream"),
                |m| format!("provider error mid-stream: {}", cap(m, MESSAGE_CAP)),
            );
            return Err(self.error(ErrorKind::Server, msg));
        }
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                // Some servers send both fields with the same text; one is enough.
                let reasoning = delta.reasoning_content.or(match delta.reasoning {
                    Some(serde_json::Value::String(s)) => Some(s),
                    _ => None,
                });
                if let Some(text) = reasoning.filter(|s| !s.is_empty()) {
                    self.pending.push_back(StreamEvent::ThinkingDelta {
                        text,
                        signature: None,
                    });
                }
                if let Some(text) = delta.content.filter(|s| !s.is_empty()) {
                    self.pending.push_back(StreamEvent::TextDelta(text));
                }
                for (pos, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                    self.saw_tool_calls = true;
                    let (name, arguments) = match call.function {
                        Some(f) => (f.name, f.arguments),
                        None => (None, None),
                    };
                    self.pending.push_back(StreamEvent::ToolCallDelta {
                        // Servers that omit the index send one call per chunk.
                        index: call.index.unwrap_or(u32::try_from(pos).unwrap_or(u32::MAX)),
                        id: call.id.filter(|s| !s.is_empty()),
                        name: name.filter(|s| !s.is_empty()),
                        arguments: arguments.unwrap_or_default(),
                    });
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(match reason.as_str() {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Other(reason),
                });
            }
        }
        if let Some(u) = chunk.usage {
            self.pending.push_back(StreamEvent::Usage(Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
                cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
                reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
                cache_write_tokens: None,
            }));
        }
        Ok(())
    }
}

/// One step of the event stream: the next event, a final error, or the end.
async fn next_item(mut st: StreamState) -> Option<(Result<StreamEvent, LlmError>, StreamState)> {
    if st.failed {
        return None;
    }
    loop {
        let item = st.decoder.next_event();
        if !st.ended
            && let Some(outcome) = st.decoder.outcome
        {
            st.end(outcome);
        }
        match item {
            Ok(Some(ev)) => return Some((Ok(ev), st)),
            Err(e) => return Some((Err(e), st)),
            Ok(None) if st.decoder.is_done() => return None,
            Ok(None) => {}
        }
        match tokio::time::timeout(st.idle_timeout, st.body.next()).await {
            Ok(Some(Ok(bytes))) => {
                st.bytes += bytes.len() as u64;
                st.decoder.push(&bytes);
            }
            Ok(Some(Err(e))) => {
                let err = from_reqwest(&st.decoder.provider, e);
                st.failed = true;
                st.end("error");
                return Some((Err(err), st));
            }
            Ok(None) => st.decoder.end_of_body(),
            Err(_) => {
                let err = st.error(
                    ErrorKind::Timeout,
                    format!("no stream data for {:?}", st.idle_timeout),
                );
                st.failed = true;
                st.end("idle timeout");
                return Some((Err(err), st));
            }
        }
    }
}

/// Classifies a transport error; the URL is stripped and the cause chain kept.
fn from_reqwest(provider: &str, e: reqwest::Error) -> LlmError {
    let e = e.without_url();
    let kind = if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_builder() {
        ErrorKind::InvalidRequest
    } else if e.is_decode() {
        ErrorKind::MalformedResponse
    } else {
        ErrorKind::Network
    };
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    LlmError::new(provider, kind, message)
}

/// `retry-after` as delta-seconds (integer or decimal); HTTP dates are ignored.
fn parse_retry_after(value: &HeaderValue) -> Option<Duration> {
    let s = value.to_str().ok()?.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let secs = s.parse::<f64>().ok()?;
    if secs < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(secs).ok()
}

/// At most `max` bytes of `s`, cut at a char boundary.
fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_config() {
        let client = reqwest::Client::new();
        let mut cfg = OpenAiCompatConfig::new("p", "ftp://x/v1");
        assert_eq!(
            OpenAiCompatProvider::new(cfg.clone(), client.clone())
                .unwrap_err()
                .kind,
            ErrorKind::InvalidRequest
        );
        cfg.base_url = "not a url".into();
        assert!(OpenAiCompatProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.base_url = "http://127.0.0.1:1/v1/".into();
        let p = OpenAiCompatProvider::new(cfg.clone(), client.clone()).unwrap();
        assert_eq!(p.url.as_str(), "http://127.0.0.1:1/v1/chat/completions");
        cfg.headers = vec![("bad name".into(), "v".into())];
        assert!(OpenAiCompatProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.headers = vec![("x-ok".into(), "line\nbreak".into())];
        let err = OpenAiCompatProvider::new(cfg.clone(), client.clone()).unwrap_err();
        assert!(!err.message.contains("break"));
        cfg.headers.clear();
        cfg.api_key = Some("sk-secret\n".into());
        let err = OpenAiCompatProvider::new(cfg.clone(), client).unwrap_err();
        assert!(!err.message.contains("sk-secret"));
        assert!(!format!("{cfg:?}").contains("sk-secret"));
    }

    #[test]
    fn parses_retry_after() {
        let p = |s: &str| parse_retry_after(&HeaderValue::from_str(s).unwrap());
        assert_eq!(p("7"), Some(Duration::from_secs(7)));
        assert_eq!(p(" 1.5 "), Some(Duration::from_millis(1500)));
        assert_eq!(p("-1"), None);
        assert_eq!(p("1e300"), None);
        assert_eq!(p("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn caps_at_char_boundary() {
        assert_eq!(cap("héllo", 2), "h…");
        assert_eq!(cap("abc", 5), "abc");
    }
}
