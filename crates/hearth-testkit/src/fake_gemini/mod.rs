//! `FakeGemini`: a fake Gemini API server speaking `streamGenerateContent`
//! with `alt=sse`, byte for byte as Gemini frames it (`data: ...\r\n\r\n`,
//! no end sentinel), with a request log and wire-format checks.
//!
//! Queue `GeminiReply`s to script answers, errors, cut or hanging streams;
//! with an empty queue it answers `echo: <last user text>`.

mod reply;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub use reply::{GeminiReply, GeminiUsage};
use reply::{GeminiReplyKind, echo_body};

/// Largest request body accepted; long agent histories can exceed axum's 2 MB default.
const BODY_LIMIT: usize = 64 * 1024 * 1024;
/// The route prefix; the rest of the path is `<model>:<method>`.
const MODELS_PREFIX: &str = "/v1beta/models/";

/// One received request, kept raw.
struct Recorded {
    path: String,
    body: Bytes,
    headers: HeaderMap,
}

#[derive(Default)]
struct Log {
    queue: VecDeque<GeminiReply>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
}

struct Shared {
    /// One lock for queue and log, so request N gets the reply queued N-th.
    log: Mutex<Log>,
    count: AtomicUsize,
    arrived: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Log> {
        // A test that panicked while holding the lock leaves a usable log.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fake Gemini API server on 127.0.0.1; stops when dropped.
pub struct FakeGemini {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl fmt::Debug for FakeGemini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeGemini")
            .field("addr", &self.addr)
            .field("requests", &self.request_count())
            .finish()
    }
}

impl Drop for FakeGemini {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeGemini {
    /// Starts on 127.0.0.1 with an OS-chosen port.
    ///
    /// # Panics
    /// When no local port can be bound: the test environment is broken and
    /// no test using the fake can run.
    #[allow(clippy::expect_used)]
    pub async fn start() -> Self {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind the fake Gemini server on 127.0.0.1:0")
    }

    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            log: Mutex::new(Log::default()),
            count: AtomicUsize::new(0),
            arrived: Notify::new(),
        });
        let app = Router::new()
            .route("/v1beta/models/{*model_and_method}", post(generate))
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

    /// `http://<addr>/v1beta`, the base URL for a Gemini client.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1beta", self.addr)
    }

    /// Queues a reply for the next well-routed request.
    pub fn push(&self, reply: GeminiReply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Every request body received under `/v1beta/models/`, in order
    /// (`null` for bodies that were not JSON).
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
            .collect()
    }

    /// Every request's path and query, in order, e.g.
    /// `/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`.
    pub fn request_paths(&self) -> Vec<String> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|r| r.path.clone())
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

    /// How many requests arrived under `/v1beta/models/`.
    pub fn request_count(&self) -> usize {
        self.shared.count.load(Ordering::Acquire)
    }

    /// Broken invariants seen so far, one sentence each. Checked on every
    /// request: the path is `<model>:streamGenerateContent?alt=sse`; the
    /// `x-goog-api-key` header is present and no key is in the URL; `contents`
    /// is non-empty, starts with role `user`, has only roles `user`/`model`
    /// and no empty `parts`; no thought text is sent back; every
    /// `functionResponse` names a `functionCall` of the model content right
    /// before it; no `parallel_tool_calls` anywhere; no `additionalProperties`
    /// or `$schema` in function parameters.
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

/// `(model, method)` of a `/v1beta/models/<model>:<method>` path.
fn route_parts(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix(MODELS_PREFIX)?.rsplit_once(':')
}

/// Checks the URL and headers of request `index`.
fn check_transport(index: usize, uri: &Uri, headers: &HeaderMap, out: &mut Vec<String>) {
    match route_parts(uri.path()) {
        Some((model, "streamGenerateContent")) if !model.is_empty() => {}
        _ => out.push(format!(
            "request {index}: path {:?} is not /v1beta/models/<model>:streamGenerateContent",
            uri.path()
        )),
    }
    let query = uri.query().unwrap_or("");
    if !query.split('&').any(|p| p == "alt=sse") {
        out.push(format!("request {index}: query {query:?} lacks alt=sse"));
    }
    if query.split('&').any(|p| p.starts_with("key=")) {
        out.push(format!("request {index}: the API key is in the URL"));
    }
    match headers.get("x-goog-api-key").map(HeaderValue::as_bytes) {
        None | Some(b"") => out.push(format!("request {index}: no x-goog-api-key header")),
        Some(key) => {
            let url = uri.to_string();
            if std::str::from_utf8(key).is_ok_and(|k| url.contains(k)) {
                out.push(format!("request {index}: the API key is in the URL"));
            }
        }
    }
}

/// True when `value` holds a `parallel_tool_calls` key at any depth.
fn has_parallel_tool_calls(value: &Value) -> bool {
    match value {
        Value::Object(m) => m.iter().any(|(k, v)| {
            k == "parallel_tool_calls" || k == "parallelToolCalls" || has_parallel_tool_calls(v)
        }),
        Value::Array(a) => a.iter().any(has_parallel_tool_calls),
        _ => false,
    }
}

/// Schema keywords Gemini refuses, searched in schema positions only (a
/// property may well be named `additionalProperties`).
fn check_schema(index: usize, tool: &str, schema: &Value, out: &mut Vec<String>) {
    let Value::Object(m) = schema else { return };
    for (k, v) in m {
        match k.as_str() {
            "additionalProperties" | "$schema" => out.push(format!(
                "request {index}: function {tool:?} parameters hold {k:?}, which Gemini rejects"
            )),
            "properties" => {
                if let Value::Object(props) = v {
                    props
                        .values()
                        .for_each(|p| check_schema(index, tool, p, out));
                }
            }
            "items" => check_schema(index, tool, v, out),
            "anyOf" => {
                if let Value::Array(opts) = v {
                    opts.iter().for_each(|o| check_schema(index, tool, o, out));
                }
            }
            _ => {}
        }
    }
}

fn parts_of(content: &Value) -> &[Value] {
    content
        .get("parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Checks the body of request `index`.
fn check_body(index: usize, body: &Value, out: &mut Vec<String>) {
    if has_parallel_tool_calls(body) {
        out.push(format!("request {index}: body holds parallel_tool_calls"));
    }
    let Some(contents) = body.get("contents").and_then(Value::as_array) else {
        out.push(format!("request {index}: body has no contents array"));
        return;
    };
    if contents.is_empty() {
        out.push(format!("request {index}: contents is empty"));
    }
    for (i, c) in contents.iter().enumerate() {
        let role = c.get("role").and_then(Value::as_str).unwrap_or("");
        if i == 0 && role != "user" {
            out.push(format!(
                "request {index}: contents start with role {role:?}, not user"
            ));
        }
        if role != "user" && role != "model" {
            out.push(format!(
                "request {index}: content {i} has role {role:?}, not user or model"
            ));
        }
        let parts = parts_of(c);
        if parts.is_empty() {
            out.push(format!("request {index}: content {i} has no parts"));
        }
        for p in parts {
            if p.get("thought").and_then(Value::as_bool) == Some(true) {
                out.push(format!(
                    "request {index}: content {i} sends thought text back"
                ));
            }
            let Some(name) = p
                .get("functionResponse")
                .map(|r| r.get("name").and_then(Value::as_str).unwrap_or(""))
            else {
                continue;
            };
            let called = i.checked_sub(1).map(|j| &contents[j]).is_some_and(|prev| {
                prev.get("role").and_then(Value::as_str) == Some("model")
                    && parts_of(prev).iter().any(|q| {
                        q.get("functionCall")
                            .and_then(|f| f.get("name"))
                            .and_then(Value::as_str)
                            == Some(name)
                    })
            });
            if !called {
                out.push(format!(
                    "request {index}: content {i} answers function {name:?}, \
                     which the model content before it did not call"
                ));
            }
        }
    }
    let decls = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten();
    for d in decls {
        let name = d.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(params) = d.get("parameters") {
            check_schema(index, name, params, out);
        }
    }
}

/// The last text part of any `user` content.
fn last_user_text(body: &Value) -> &str {
    body.get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .rev()
        .filter(|c| c.get("role").and_then(Value::as_str) == Some("user"))
        .flat_map(|c| parts_of(c).iter().rev())
        .find_map(|p| p.get("text").and_then(Value::as_str))
        .unwrap_or("")
}

async fn generate(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let well_routed = matches!(route_parts(uri.path()), Some((m, "streamGenerateContent")) if !m.is_empty())
        && uri.query().unwrap_or("").split('&').any(|p| p == "alt=sse");
    let reply = {
        let mut log = shared.lock();
        let index = log.requests.len();
        check_transport(index, &uri, &headers, &mut log.violations);
        match &parsed {
            Ok(v) => check_body(index, v, &mut log.violations),
            Err(e) => log
                .violations
                .push(format!("request {index}: body is not JSON: {e}")),
        }
        log.requests.push(Recorded {
            path,
            body: body.clone(),
            headers,
        });
        if well_routed {
            log.queue.pop_front()
        } else {
            None
        }
    };
    shared.count.fetch_add(1, Ordering::AcqRel);
    shared.arrived.notify_waiters();

    if !well_routed {
        return error_response(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "the fake Gemini server only serves models/<model>:streamGenerateContent?alt=sse",
        );
    }
    let model = route_parts(uri.path()).map_or("", |(m, _)| m);
    match reply {
        Some(reply) => scripted(reply, model).await,
        None => match &parsed {
            Ok(v) => sse_response(Body::from(echo_body(model, last_user_text(v)))),
            Err(_) => error_response(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                "Invalid JSON payload received.",
            ),
        },
    }
}

async fn scripted(reply: GeminiReply, model: &str) -> Response {
    let frames = reply.frames(model);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = match reply.kind {
        GeminiReplyKind::HttpError { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(body)).into_response()
        }
        GeminiReplyKind::RawSse(raw) => sse_response(Body::from(raw)),
        GeminiReplyKind::RawChunks(chunks) => sse_response(paced(chunks, reply.chunk_delay)),
        GeminiReplyKind::Hang => sse_response(Body::from_stream(futures_util::stream::pending::<
            Result<Bytes, Infallible>,
        >())),
        GeminiReplyKind::Text(_) | GeminiReplyKind::FunctionCalls(_) => {
            let frames = frames.unwrap_or_default();
            let body = if reply.chunk_delay.is_zero() {
                Body::from(frames.concat())
            } else {
                paced(frames, reply.chunk_delay)
            };
            sse_response(body)
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
            if !first && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (it, false)))
        },
    );
    Body::from_stream(stream)
}

fn sse_response(body: Body) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    resp
}

/// A Google API error body: `{"error": {"code", "message", "status"}}`.
fn error_response(status: StatusCode, status_name: &str, message: &str) -> Response {
    let body =
        json!({"error": {"code": status.as_u16(), "message": message, "status": status_name}});
    (status, axum::Json(body)).into_response()
}

async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "no such route on the fake Gemini server",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_bad_histories() {
        let body = json!({
            "contents": [
                {"role": "model", "parts": [{"text": "hi"}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "x", "response": {}}}]},
                {"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}},
                                            {"text": "why", "thought": true}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "t", "response": {}}}]},
                {"role": "system", "parts": []}
            ],
            "tools": [{"functionDeclarations": [{"name": "t", "parameters":
                {"type": "object", "additionalProperties": false,
                 "properties": {"additionalProperties": {"type": "string"}}}}]}],
            "generationConfig": {"parallel_tool_calls": false}
        });
        let mut out = Vec::new();
        check_body(3, &body, &mut out);
        let all = out.join("\n");
        assert!(all.contains("parallel_tool_calls"), "{all}");
        assert!(all.contains("start with role \"model\""), "{all}");
        assert!(all.contains("answers function \"x\""), "{all}");
        assert!(!all.contains("answers function \"t\""), "{all}");
        assert!(all.contains("thought text"), "{all}");
        assert!(all.contains("role \"system\""), "{all}");
        assert!(all.contains("content 4 has no parts"), "{all}");
        assert_eq!(all.matches("additionalProperties").count(), 1, "{all}");
        assert_eq!(out.len(), 7, "{all}");
    }

    #[test]
    fn flags_keys_in_urls() {
        let mut out = Vec::new();
        let uri: Uri = "/v1beta/models/m:streamGenerateContent?alt=sse&key=k1"
            .parse()
            .unwrap();
        check_transport(0, &uri, &HeaderMap::new(), &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        let mut headers = HeaderMap::new();
        headers.insert("x-goog-api-key", HeaderValue::from_static("k1"));
        out.clear();
        let uri: Uri = "/v1beta/models/m:generateContent".parse().unwrap();
        check_transport(0, &uri, &headers, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
    }
}
