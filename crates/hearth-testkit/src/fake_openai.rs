//! `FakeOpenAi`: the fake Chat Completions server, its request log and checks.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::reply::{Reply, ReplyKind, echo_body};

/// Largest request body accepted; long agent histories can exceed axum's 2 MB default.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// One received request, kept raw: parsing is deferred to whoever asks, so
/// the hot path only moves buffers it already owns.
struct Recorded {
    body: Bytes,
    headers: HeaderMap,
}

#[derive(Default)]
struct Log {
    queue: VecDeque<Reply>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
}

struct Shared {
    /// One lock for queue and log, so request N gets the reply queued N-th.
    log: Mutex<Log>,
    count: AtomicUsize,
    arrived: Notify,
    default_delay_ns: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Log> {
        // A test that panicked while holding the lock leaves a usable log.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fake OpenAI-compatible server on 127.0.0.1; stops when dropped.
pub struct FakeOpenAi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl fmt::Debug for FakeOpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeOpenAi")
            .field("addr", &self.addr)
            .field("requests", &self.request_count())
            .finish()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    /// Starts on 127.0.0.1 with an OS-chosen port.
    ///
    /// # Panics
    /// When no local port can be bound: the test environment is broken and
    /// no test using the fake can run.
    #[allow(clippy::expect_used)]
    pub async fn start() -> Self {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind the fake OpenAI server on 127.0.0.1:0")
    }

    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            log: Mutex::new(Log::default()),
            count: AtomicUsize::new(0),
            arrived: Notify::new(),
            default_delay_ns: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(Arc::clone(&shared));
        // Streams are many small writes; Nagle would add latency to each.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared, task })
    }

    /// The socket address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>/v1`, the base URL for an OpenAI-compatible client.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a reply for the next request that finds the queue non-empty.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Delays the first byte of default (unscripted) replies.
    pub fn set_default_delay(&self, delay: Duration) {
        let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.shared.default_delay_ns.store(ns, Ordering::Relaxed);
    }

    /// Every request body received, in order (`null` for bodies that were not JSON).
    pub fn requests(&self) -> Vec<serde_json::Value> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null))
            .collect()
    }

    /// Every request's headers, in order: lowercase names, values decoded lossily.
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|r| {
                r.headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().to_owned(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.shared.count.load(Ordering::Acquire)
    }

    /// Broken invariants seen so far, one sentence each: a request body that
    /// is not a chat request, or a `tool` message whose `tool_call_id` answers
    /// no tool call of an earlier assistant message in the same request.
    pub fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// Returns once at least `n` requests have arrived.
    pub async fn wait_for_requests(&self, n: usize) {
        loop {
            let notified = self.shared.arrived.notified();
            let mut notified = std::pin::pin!(notified);
            // Registering before the check means no arrival can slip between.
            notified.as_mut().enable();
            if self.request_count() >= n {
                return;
            }
            notified.await;
        }
    }
}

/// Just the parts of a request the fake looks at, borrowed where possible.
#[derive(Deserialize)]
struct RequestView<'a> {
    #[serde(borrow, default)]
    model: Cow<'a, str>,
    #[serde(borrow, default)]
    messages: Vec<MessageView<'a>>,
}

#[derive(Deserialize)]
struct MessageView<'a> {
    #[serde(borrow, default)]
    role: Cow<'a, str>,
    #[serde(default, deserialize_with = "text_or_skip")]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallView>>,
}

#[derive(Deserialize)]
struct CallView {
    #[serde(default)]
    id: Option<String>,
}

/// A string content as text; arrays of parts and anything else count as none.
fn text_or_skip<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    struct TextOrSkip;
    impl<'de> Visitor<'de> for TextOrSkip {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("message content")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(TextOrSkip)
}

/// Tool messages must answer a call made earlier in the same history.
fn check_tool_results(index: usize, req: &RequestView<'_>, out: &mut Vec<String>) {
    let mut call_ids: Vec<&str> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        match &*m.role {
            "assistant" => {
                call_ids.extend(
                    m.tool_calls
                        .iter()
                        .flatten()
                        .filter_map(|c| c.id.as_deref()),
                );
            }
            "tool" => match m.tool_call_id.as_deref() {
                None => out.push(format!(
                    "request {index}: message {i} has role tool but no tool_call_id"
                )),
                Some(id) if !call_ids.contains(&id) => out.push(format!(
                    "request {index}: message {i} answers tool_call_id {id:?}, \
                     which no earlier assistant message called"
                )),
                Some(_) => {}
            },
            _ => {}
        }
    }
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let parsed = serde_json::from_slice::<RequestView<'_>>(&body);
    let reply = {
        let mut log = shared.lock();
        let index = log.requests.len();
        match &parsed {
            Ok(req) => check_tool_results(index, req, &mut log.violations),
            Err(e) => log
                .violations
                .push(format!("request {index}: body is not a chat request: {e}")),
        }
        log.requests.push(Recorded {
            body: body.clone(),
            headers,
        });
        log.queue.pop_front()
    };
    shared.count.fetch_add(1, Ordering::AcqRel);
    shared.arrived.notify_waiters();

    let (model, last_user) = match &parsed {
        Ok(req) => (
            &*req.model,
            req.messages
                .iter()
                .rev()
                .find(|m| m.role == "user")
                .and_then(|m| m.content.as_deref())
                .unwrap_or(""),
        ),
        Err(_) => ("", ""),
    };
    match reply {
        Some(reply) => scripted(reply, model).await,
        None => {
            if parsed.is_err() {
                return error_response(StatusCode::BAD_REQUEST, "body is not a chat request");
            }
            let delay = shared.default_delay_ns.load(Ordering::Relaxed);
            let body = echo_body(model, last_user);
            if delay > 0 {
                tokio::time::sleep(Duration::from_nanos(delay)).await;
            }
            sse_response(Body::from(body), None)
        }
    }
}

async fn scripted(reply: Reply, model: &str) -> Response {
    let frames = reply.frames(model);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = match reply.kind {
        ReplyKind::HttpError { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(body)).into_response()
        }
        ReplyKind::RawSse(raw) => sse_response(Body::from(raw), reply.content_type.as_deref()),
        ReplyKind::Hang => sse_response(
            Body::from_stream(futures_util::stream::pending::<Result<Bytes, Infallible>>()),
            reply.content_type.as_deref(),
        ),
        ReplyKind::Text(_) | ReplyKind::ToolCalls(_) => {
            let frames = frames.unwrap_or_default();
            let body = if reply.chunk_delay.is_zero() {
                Body::from(frames.concat())
            } else {
                paced(frames, reply.chunk_delay)
            };
            sse_response(body, reply.content_type.as_deref())
        }
    };
    for (k, v) in &reply.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::try_from(k.as_str()),
            HeaderValue::try_from(v.as_str()),
        ) {
            resp.headers_mut().append(k, v);
        }
    }
    resp
}

/// Sends the frames one by one, `gap` apart.
fn paced(frames: Vec<Vec<u8>>, gap: Duration) -> Body {
    let stream = futures_util::stream::unfold(
        (frames.into_iter(), true),
        move |(mut it, first)| async move {
            let frame = it.next()?;
            if !first {
                tokio::time::sleep(gap).await;
            }
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (it, false)))
        },
    );
    Body::from_stream(stream)
}

fn sse_response(body: Body, content_type: Option<&str>) -> Response {
    let ct = content_type
        .and_then(|c| HeaderValue::try_from(c).ok())
        .unwrap_or(HeaderValue::from_static("text/event-stream"));
    let mut resp = Response::new(body);
    resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

fn error_response(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}});
    (status, axum::Json(body)).into_response()
}

async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "no such route on the fake OpenAI server",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_tool_results_without_a_call() {
        let body = serde_json::json!({
            "model": "m",
            "messages": [
                {"role": "tool", "tool_call_id": "early", "content": "{}"},
                {"role": "assistant", "content": null,
                 "tool_calls": [{"id": "a", "type": "function",
                                 "function": {"name": "t", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "{}"},
                {"role": "tool", "content": "{}"},
                {"role": "user", "content": [{"type": "text", "text": "parts"}]}
            ]
        })
        .to_string();
        let req: RequestView<'_> = serde_json::from_str(&body).unwrap();
        let mut out = Vec::new();
        check_tool_results(4, &req, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[0].contains("\"early\""));
        assert!(out[1].contains("no tool_call_id"));
        assert!(req.messages[4].content.is_none());
    }
}
