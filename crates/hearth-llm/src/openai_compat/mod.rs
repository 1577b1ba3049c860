//! `OpenAiCompatProvider`: the streaming Chat Completions adapter for OpenAI and
//! the many servers that speak its format (Ollama, vLLM, llama.cpp, OpenRouter).

mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::classify::ErrorFacts;
use crate::sse::SseDecoder;
use crate::transport::{self, CallContext, ErrorBody, impl_stream_decoder};
use crate::{Capabilities, ErrorKind, EventStream, LlmError, Provider};

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

impl OpenAiCompatConfig {
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
impl fmt::Debug for OpenAiCompatConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OpenAiCompatConfig")
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

/// A `Provider` speaking streaming Chat Completions.
#[derive(Clone)]
pub struct OpenAiCompatProvider {
    name: Arc<str>,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    request_timeout: Duration,
    idle_timeout: Duration,
    /// Appended to the errors of a call: the URL and the key's source.
    call_context: Arc<CallContext>,
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
        let url = transport::parse_endpoint(&endpoint, &config.base_url, invalid)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            transport::insert_key(&mut headers, AUTHORIZATION, "Bearer ", key, invalid)?;
        }
        transport::append_headers(&mut headers, &config.headers, invalid)?;
        let call_context = Arc::new(CallContext::new(
            &url,
            config.api_key.is_some(),
            config.api_key_env.as_deref(),
        ));
        Ok(Self {
            name: Arc::from(name),
            call_context,
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
    /// for the provider's own code and message.
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
        body.error(&self.name, facts.kind(), message)
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiCompatProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities::COMPATIBLE
    }

    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError> {
        let body = serde_json::to_vec(&wire::WireRequest::from_request(request)).map_err(|e| {
            self.error(
                ErrorKind::InvalidRequest,
                format!("cannot encode request: {e}"),
            )
        })?;
        let started = Instant::now();
        let resp = transport::send(
            &self.name,
            &self.client,
            self.url.clone(),
            &self.headers,
            body,
            self.request_timeout,
            started,
        )
        .await
        .map_err(|e| e.at(&self.call_context))?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp).await.at(&self.call_context));
        }
        transport::check_event_stream(&self.name, &resp).map_err(|e| e.at(&self.call_context))?;
        Ok(transport::event_stream(
            OpenAiCompatDecoder::new(Arc::clone(&self.name)),
            resp.bytes_stream(),
            self.idle_timeout,
            started,
            Arc::clone(&self.call_context),
        ))
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

impl_stream_decoder!(OpenAiCompatDecoder);

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
            let facts = ErrorFacts::from_json(err);
            let mut msg = String::from("provider error mid-stream");
            facts.describe(&mut msg);
            return Err(self.error(facts.kind(), msg));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{cap, parse_retry_after};

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
        let p = |s: &str| parse_retry_after(&reqwest::header::HeaderValue::from_str(s).unwrap());
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
