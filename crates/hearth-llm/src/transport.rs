//! The HTTP plumbing under [`crate::http::HttpProvider`]: building the
//! header map, sending the request, reading an error body, checking the
//! content type, driving a decoder from the response body with an idle
//! timeout, and naming the URL and key source in every error of a call.
//! The wire format stays in the vendor module; error classification is
//! shared (`classify`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use hearth_core::StreamEvent;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{StatusCode, Url};

use crate::decoder::{EventDecoder, EventFormat};
use crate::{ErrorKind, EventStream, LlmError};

/// How much of an error response body is read to find the provider's message.
pub(crate) const ERROR_BODY_CAP: usize = 64 * 1024;
/// Longest provider-supplied text copied into an error message.
pub(crate) const MESSAGE_CAP: usize = 500;

/// Posts a JSON `body` asking for an event stream, waiting at most
/// `request_timeout` for the response headers; the status is not checked.
pub(crate) async fn send(
    provider: &str,
    client: &reqwest::Client,
    url: Url,
    headers: &HeaderMap,
    body: Vec<u8>,
    request_timeout: Duration,
    started: Instant,
) -> Result<reqwest::Response, LlmError> {
    send_accepting(
        provider,
        client,
        url,
        headers,
        body,
        request_timeout,
        started,
        "text/event-stream",
    )
    .await
}

/// [`send`] asking for `accept` (JSON for calls that do not stream).
#[expect(
    clippy::too_many_arguments,
    reason = "one call's parts, passed straight through from send"
)]
pub(crate) async fn send_accepting(
    provider: &str,
    client: &reqwest::Client,
    url: Url,
    headers: &HeaderMap,
    body: Vec<u8>,
    request_timeout: Duration,
    started: Instant,
    accept: &'static str,
) -> Result<reqwest::Response, LlmError> {
    let request_bytes = body.len();
    let send = client
        .post(url)
        .headers(headers.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, accept)
        .body(body)
        .send();
    let resp = match tokio::time::timeout(request_timeout, send).await {
        Err(_) => {
            return Err(LlmError::new(
                provider,
                ErrorKind::Timeout,
                format!("no response within {request_timeout:?}"),
            ));
        }
        Ok(Err(e)) => return Err(from_reqwest(provider, e)),
        Ok(Ok(resp)) => resp,
    };
    tracing::debug!(
        provider = %provider,
        status = resp.status().as_u16(),
        request_bytes,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "response headers received"
    );
    Ok(resp)
}

/// Refuses a successful response that is not `text/event-stream`.
pub(crate) fn check_event_stream(provider: &str, resp: &reqwest::Response) -> Result<(), LlmError> {
    let content_type = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type
        .get(..17)
        .is_some_and(|p| p.eq_ignore_ascii_case("text/event-stream"))
    {
        return Err(LlmError::new(
            provider,
            ErrorKind::MalformedResponse,
            format!(
                "expected a text/event-stream response, got content type {:?}",
                cap(content_type, 100)
            ),
        ));
    }
    Ok(())
}

/// What a non-2xx response said: its status, `retry-after`, and at most
/// 64 KiB of body.
pub(crate) struct ErrorBody {
    pub(crate) status: StatusCode,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) body: Vec<u8>,
}

impl ErrorBody {
    /// Reads the error response, giving the whole body one `deadline`.
    pub(crate) async fn read(resp: reqwest::Response, deadline: Duration) -> Self {
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
        let _ = tokio::time::timeout(deadline, read).await;
        Self {
            status,
            retry_after,
            body,
        }
    }

    /// The body as JSON, if it is.
    pub(crate) fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice::<serde_json::Value>(&self.body).ok()
    }

    /// Logs the error status and builds the error, with `retry-after`.
    pub(crate) fn error(&self, provider: &str, kind: ErrorKind, message: String) -> LlmError {
        tracing::debug!(provider = %provider, status = self.status.as_u16(), body_bytes = self.body.len(), "provider returned an error status");
        let mut err = LlmError::new(provider, kind, message);
        err.retry_after = self.retry_after;
        err
    }
}

/// Drives `decoder` from `body`: the stream of its events, ending after the
/// answer or with an error item (a transport failure, an idle gap longer
/// than `idle_timeout`, or the decoder's own error).
pub(crate) fn event_stream<F: EventFormat>(
    decoder: EventDecoder<F>,
    body: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    idle_timeout: Duration,
    started: Instant,
    context: Arc<CallContext>,
) -> EventStream {
    let state = StreamState {
        decoder,
        context,
        body: Box::pin(body),
        ended: false,
        failed: false,
        idle_timeout,
        bytes: 0,
        started,
    };
    Box::pin(futures_util::stream::unfold(state, next_item))
}

type ByteStream = std::pin::Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Everything one streamed answer needs between two polls.
struct StreamState<F> {
    decoder: EventDecoder<F>,
    /// Appended to every error: the URL called and the key used.
    context: Arc<CallContext>,
    body: ByteStream,
    /// The end of the answer was logged; only events already decoded remain.
    ended: bool,
    /// The transport failed and its error was handed out: nothing follows.
    failed: bool,
    idle_timeout: Duration,
    bytes: u64,
    started: Instant,
}

impl<F: EventFormat> StreamState<F> {
    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&**self.decoder.provider(), kind, message).at(&self.context)
    }

    fn end(&mut self, outcome: &str) {
        self.ended = true;
        tracing::debug!(
            provider = %self.decoder.provider(),
            bytes = self.bytes,
            elapsed_ms = self.started.elapsed().as_millis() as u64,
            outcome,
            "stream ended"
        );
    }
}

/// One step of the event stream: the next event, a final error, or the end.
async fn next_item<F: EventFormat>(
    mut st: StreamState<F>,
) -> Option<(Result<StreamEvent, LlmError>, StreamState<F>)> {
    if st.failed {
        return None;
    }
    loop {
        let item = st.decoder.next_event();
        if !st.ended
            && let Some(outcome) = st.decoder.outcome()
        {
            st.end(outcome);
        }
        match item {
            Ok(Some(ev)) => return Some((Ok(ev), st)),
            Err(e) => {
                let e = e.at(&st.context);
                return Some((Err(e), st));
            }
            Ok(None) if st.decoder.is_done() => return None,
            Ok(None) => {}
        }
        match tokio::time::timeout(st.idle_timeout, st.body.next()).await {
            Ok(Some(Ok(bytes))) => {
                st.bytes += bytes.len() as u64;
                st.decoder.push(&bytes);
            }
            Ok(Some(Err(e))) => {
                let err = from_reqwest(st.decoder.provider(), e).at(&st.context);
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

/// Classifies a transport error; the URL is stripped (the caller appends
/// it without credentials) and the cause chain kept. reqwest reports a body
/// that breaks off (a reset, a close mid-chunk) as a "decode" error: with no
/// content decoding enabled that is always the connection, so `Network`;
/// a body that does not follow the wire format is the decoders' finding,
/// `MalformedResponse`, never reqwest's.
pub(crate) fn from_reqwest(provider: &str, e: reqwest::Error) -> LlmError {
    let e = e.without_url();
    let kind = if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_builder() {
        ErrorKind::InvalidRequest
    } else {
        ErrorKind::Network
    };
    // Each cause after a colon, in words (no type names or debug forms).
    LlmError::new(provider, kind, hearth_core::error_text(&e))
}

/// Which URL a call went to and where its key came from, for its errors.
#[derive(Debug)]
pub(crate) struct CallContext {
    /// `POST <url>`, the URL without credentials.
    target: String,
    key: KeySource,
}

#[derive(Debug, Clone)]
enum KeySource {
    /// The variable (or `secret <name>`) the key came from.
    Named(String),
    /// A key was given, with no word of where from.
    Unnamed,
    None,
}

impl CallContext {
    /// The context of calls to `url` with or without a key, from `key_env`.
    pub(crate) fn new(url: &Url, has_key: bool, key_env: Option<&str>) -> Self {
        let key = match (has_key, key_env) {
            (_, Some(var)) => KeySource::Named(var.to_owned()),
            (true, None) => KeySource::Unnamed,
            (false, None) => KeySource::None,
        };
        Self {
            target: Self::target(url),
            key,
        }
    }

    /// The same key source for calls to another `url` of the provider.
    pub(crate) fn with_url(&self, url: &Url) -> Self {
        Self {
            target: Self::target(url),
            key: self.key.clone(),
        }
    }

    /// `POST <url>`, without the credentials a URL's userinfo may hold.
    fn target(url: &Url) -> String {
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        format!("POST {shown}")
    }

    /// What an error of `kind` ends with, e.g. ` (POST https://host/v1/messages,
    /// key from ANTHROPIC_API_KEY)`; a refused key also says what to check.
    /// Never the key itself.
    pub(crate) fn suffix(&self, kind: ErrorKind) -> String {
        let auth = kind == ErrorKind::Auth;
        match &self.key {
            KeySource::Named(var) if auth => format!(
                " ({}, key from {var}: check that {var} holds a valid key for this provider)",
                self.target
            ),
            KeySource::Named(var) => format!(" ({}, key from {var})", self.target),
            KeySource::Unnamed if auth => format!(
                " ({}: the provider refused its API key; check it)",
                self.target
            ),
            KeySource::Unnamed => format!(" ({})", self.target),
            KeySource::None if auth => format!(
                " ({}, no API key: set api_key_env or api_key_secret for this provider)",
                self.target
            ),
            KeySource::None => format!(" ({}, no API key)", self.target),
        }
    }
}

/// `retry-after` as delta-seconds (integer or decimal); HTTP dates are ignored.
pub(crate) fn parse_retry_after(value: &HeaderValue) -> Option<Duration> {
    parse_seconds(value.to_str().ok()?)
}

/// Seconds, integer or decimal, surrounding whitespace allowed; not negative.
pub(crate) fn parse_seconds(s: &str) -> Option<Duration> {
    let s = s.trim();
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
pub(crate) fn cap(s: &str, max: usize) -> String {
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
    fn call_context_names_url_and_key_source_never_credentials() {
        let url = Url::parse("https://user:hunter2@proxy.example/v1/chat/completions").unwrap();
        let named = CallContext::new(&url, true, Some("PROXY_KEY"));
        let s = named.suffix(ErrorKind::Server);
        assert_eq!(
            s,
            " (POST https://proxy.example/v1/chat/completions, key from PROXY_KEY)"
        );
        assert!(
            named
                .suffix(ErrorKind::Auth)
                .contains("check that PROXY_KEY holds a valid key")
        );
        let unnamed = CallContext::new(&url, true, None).suffix(ErrorKind::Auth);
        assert!(unnamed.contains("refused its API key"), "{unnamed}");
        let none = CallContext::new(&url, false, None).suffix(ErrorKind::Auth);
        assert!(none.contains("no API key: set api_key_env"), "{none}");
        for s in [unnamed, none] {
            assert!(!s.contains("hunter2") && !s.contains("user@"), "{s}");
        }
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
