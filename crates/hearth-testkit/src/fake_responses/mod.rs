//! `FakeResponses`: a fake OpenAI Responses API server (`POST /v1/responses`)
//! that streams byte-faithful SSE, logs requests and checks them against the
//! API's rules (streaming, function call/output pairing, stateless reasoning
//! items, tools, the bearer key).
//!
//! Queue `ResponsesReply`s to script answers, errors, cut or hanging streams;
//! with an empty queue it echoes the last user `input_text`.

mod reply;

use std::collections::{HashSet, VecDeque};
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
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use bytes::Bytes;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use reply::{ReplyKind, echo_body, error_body};
pub use reply::{ResponsesReply, ResponsesUsage};

/// Largest request body accepted; long agent histories can exceed axum's 2 MB default.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// One received request, kept raw: parsing is deferred to whoever asks.
struct Recorded {
    body: Bytes,
    headers: HeaderMap,
}

#[derive(Default)]
struct Log {
    queue: VecDeque<ResponsesReply>,
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

/// A fake OpenAI Responses API server on 127.0.0.1; stops when dropped.
pub struct FakeResponses {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl fmt::Debug for FakeResponses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeResponses")
            .field("addr", &self.addr)
            .field("requests", &self.request_count())
            .finish()
    }
}

impl Drop for FakeResponses {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeResponses {
    /// Starts on 127.0.0.1 with an OS-chosen port.
    ///
    /// # Panics
    /// When no local port can be bound: the test environment is broken and
    /// no test using the fake can run.
    #[allow(clippy::expect_used)]
    pub async fn start() -> Self {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind the fake Responses API server on 127.0.0.1:0")
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
            .route("/v1/responses", post(responses))
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

    /// `http://<addr>/v1`, the base URL for a Responses API client (which
    /// appends `/responses`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a reply for the next request that finds the queue non-empty.
    pub fn push(&self, reply: ResponsesReply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Every request body received, in order (`null` for bodies that were not JSON).
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
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

    /// Broken API rules seen so far, one sentence each, prefixed with the
    /// request number: no `Authorization: Bearer` key, a body that is not a
    /// streaming Responses request (`model`, `stream: true`, an `input`
    /// array), message items with an unknown role or content part type,
    /// empty text, a `function_call_output` whose `call_id` answers no
    /// earlier `function_call` of the same input, a `function_call` never
    /// answered, a duplicate `call_id`, a `reasoning` item without
    /// `encrypted_content` or `summary`, tools that are not well-formed
    /// function tools, `parallel_tool_calls: true` with no tools, an unknown
    /// `reasoning.effort`.
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

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The type of an input item; items without one are messages.
fn item_type(item: &Value) -> &str {
    match item.get("type").and_then(Value::as_str) {
        Some(t) => t,
        None if item.get("role").is_some() => "message",
        None => "",
    }
}

/// Checks one message item's role and content parts.
fn check_message(i: usize, item: &Value, bad: &mut impl FnMut(String)) {
    let role = str_field(item, "role");
    let allowed: &[&str] = match role {
        "user" | "system" | "developer" => &["input_text", "input_image", "input_file"],
        "assistant" => &["output_text", "refusal"],
        other => {
            bad(format!("input {i}: message has unknown role {other:?}"));
            return;
        }
    };
    match item.get("content") {
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(Value::Array(parts)) if !parts.is_empty() => {
            for (j, p) in parts.iter().enumerate() {
                let kind = str_field(p, "type");
                if !allowed.contains(&kind) {
                    bad(format!(
                        "input {i} part {j}: {kind:?} is not allowed in a {role} message"
                    ));
                } else if kind.ends_with("_text") && str_field(p, "text").is_empty() {
                    bad(format!("input {i} part {j}: empty text"));
                }
            }
        }
        _ => bad(format!("input {i}: message has no content")),
    }
}

/// Checks one request against the API's rules, appending what it breaks.
fn check_request(index: usize, headers: &HeaderMap, body: &Value, out: &mut Vec<String>) {
    let mut bad = |msg: String| out.push(format!("request {index}: {msg}"));
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| !k.trim().is_empty());
    if !bearer {
        bad("Authorization: Bearer <key> is missing".into());
    }
    let Some(obj) = body.as_object() else {
        bad("body is not a JSON object".into());
        return;
    };
    if str_field(body, "model").is_empty() {
        bad("model is missing".into());
    }
    if obj.get("stream") != Some(&Value::Bool(true)) {
        bad("stream is not true".into());
    }
    let tools = obj.get("tools").and_then(Value::as_array);
    let tool_count = tools.map_or(0, Vec::len);
    if obj.get("parallel_tool_calls") == Some(&Value::Bool(true)) && tool_count == 0 {
        bad("parallel_tool_calls is true but no tools are given".into());
    }
    for (i, t) in tools.into_iter().flatten().enumerate() {
        if str_field(t, "type") != "function" {
            bad(format!("tool {i} is not of type \"function\""));
        }
        if str_field(t, "name").is_empty() {
            bad(format!("tool {i} has no name"));
        }
        if !t.get("parameters").is_some_and(Value::is_object) {
            bad(format!("tool {i}: parameters is not an object"));
        }
    }
    if let Some(effort) = obj.get("reasoning").and_then(|r| r.get("effort"))
        && !matches!(
            effort.as_str(),
            Some("minimal" | "low" | "medium" | "high") | None
        )
    {
        bad(format!("reasoning.effort {effort} is not a known effort"));
    }
    let Some(input) = obj.get("input").and_then(Value::as_array) else {
        bad("input is missing or not an array".into());
        return;
    };
    if input.is_empty() {
        bad("input is empty".into());
    }
    let mut called: HashSet<&str> = HashSet::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        match item_type(item) {
            "message" => check_message(i, item, &mut bad),
            "function_call" => {
                let call_id = str_field(item, "call_id");
                if call_id.is_empty() || str_field(item, "name").is_empty() {
                    bad(format!("input {i}: function_call without call_id or name"));
                }
                if !item.get("arguments").is_some_and(Value::is_string) {
                    bad(format!(
                        "input {i}: function_call arguments is not a string"
                    ));
                }
                if !called.insert(call_id) {
                    bad(format!("input {i}: call_id {call_id:?} is used twice"));
                }
            }
            "function_call_output" => {
                let call_id = str_field(item, "call_id");
                if !called.contains(call_id) {
                    bad(format!(
                        "input {i}: function_call_output for {call_id:?} answers no earlier function_call"
                    ));
                }
                if !item.get("output").is_some_and(Value::is_string) {
                    bad(format!(
                        "input {i}: function_call_output output is not a string"
                    ));
                }
                answered.insert(call_id);
            }
            "reasoning" => {
                if str_field(item, "encrypted_content").is_empty() {
                    bad(format!(
                        "input {i}: reasoning item without encrypted_content (store is false)"
                    ));
                }
                if !item.get("summary").is_some_and(Value::is_array) {
                    bad(format!("input {i}: reasoning item without a summary array"));
                }
            }
            other => bad(format!("input {i} has unexpected type {other:?}")),
        }
    }
    let mut unanswered: Vec<&&str> = called.difference(&answered).collect();
    unanswered.sort();
    for id in unanswered {
        bad(format!("function_call {id:?} has no function_call_output"));
    }
}

/// The last `input_text` of the last user message that has one.
fn last_user_text(body: &Value) -> String {
    let Some(input) = body.get("input").and_then(Value::as_array) else {
        return body
            .get("input")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
    };
    input
        .iter()
        .rev()
        .filter(|m| item_type(m) == "message" && str_field(m, "role") == "user")
        .find_map(|m| match m.get("content") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(parts)) => parts.iter().rev().find_map(|p| {
                (str_field(p, "type") == "input_text").then(|| str_field(p, "text").to_owned())
            }),
            _ => None,
        })
        .unwrap_or_default()
}

async fn responses(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let reply = {
        let mut log = shared.lock();
        let index = log.requests.len();
        match &parsed {
            Ok(v) => check_request(index, &headers, v, &mut log.violations),
            Err(e) => log
                .violations
                .push(format!("request {index}: body is not JSON: {e}")),
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
        Ok(v) => (str_field(v, "model").to_owned(), last_user_text(v)),
        Err(_) => (String::new(), String::new()),
    };
    match reply {
        Some(reply) => scripted(reply, &model).await,
        None => {
            if parsed.is_err() {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "We could not parse the JSON body of your request.",
                );
            }
            sse_response(Body::from(echo_body(&model, &last_user)))
        }
    }
}

async fn scripted(reply: ResponsesReply, model: &str) -> Response {
    let frames = reply.frames(model);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = match &reply.kind {
        ReplyKind::HttpError { status, body } => {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = (status, axum::Json(body.clone())).into_response();
            resp.headers_mut()
                .insert("x-request-id", HeaderValue::from_static("req_fake"));
            resp
        }
        ReplyKind::RawSse(raw) => sse_response(Body::from(raw.clone())),
        ReplyKind::Hang => sse_response(Body::from_stream(futures_util::stream::pending::<
            Result<Bytes, Infallible>,
        >())),
        ReplyKind::Output { .. }
        | ReplyKind::Incomplete { .. }
        | ReplyKind::Failed { .. }
        | ReplyKind::ErrorEvent { .. } => {
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
            if !first {
                tokio::time::sleep(gap).await;
            }
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (it, false)))
        },
    );
    Body::from_stream(stream)
}

fn sse_response(body: Body) -> Response {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-request-id", HeaderValue::from_static("req_fake"));
    resp
}

fn error_response(status: StatusCode, error_type: &str, message: &str) -> Response {
    (status, axum::Json(error_body(error_type, None, message))).into_response()
}

async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "no such route on the fake Responses API server",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k"));
        h
    }

    #[test]
    fn valid_history_has_no_violations() {
        let body = json!({
            "model": "m", "stream": true, "store": false,
            "tools": [{"type": "function", "name": "t", "parameters": {"type": "object"}}],
            "parallel_tool_calls": true,
            "reasoning": {"effort": "low", "summary": "auto"},
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "reasoning", "id": "rs_1", "encrypted_content": "E", "summary": []},
                {"type": "function_call", "call_id": "a", "name": "t", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "a", "output": "{}"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "done"}]},
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "more"}]}
            ]
        });
        let mut out = Vec::new();
        check_request(0, &headers(), &body, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(last_user_text(&body), "more");
    }

    #[test]
    fn flags_broken_rules() {
        let body = json!({
            "model": "m", "stream": false, "parallel_tool_calls": true,
            "reasoning": {"effort": "extreme"},
            "input": [
                {"role": "user", "content": [{"type": "output_text", "text": "x"}]},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call_output", "call_id": "zzz", "output": "{}"},
                {"type": "function_call", "call_id": "b", "name": "t", "arguments": "{}"},
                {"role": "tool", "content": "x"}
            ]
        });
        let mut out = Vec::new();
        check_request(2, &HeaderMap::new(), &body, &mut out);
        let all = out.join("\n");
        for needle in [
            "Bearer",
            "stream is not true",
            "parallel_tool_calls",
            "reasoning.effort",
            "\"output_text\" is not allowed in a user message",
            "without encrypted_content",
            "\"zzz\" answers no earlier function_call",
            "\"b\" has no function_call_output",
            "unknown role \"tool\"",
        ] {
            assert!(all.contains(needle), "{needle}: {all}");
        }
        assert!(out.iter().all(|v| v.starts_with("request 2: ")));
    }
}
