//! `FakeGemini`: a fake Gemini API server speaking `streamGenerateContent`
//! with `alt=sse`, byte for byte as Gemini frames it (`data: ...\r\n\r\n`,
//! no end sentinel), with a request log and wire-format checks.
//!
//! Queue `GeminiReply`s to script answers, errors, cut or hanging streams;
//! with an empty queue it answers `echo: <last user text>`.

mod reply;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::fake_embeddings::{EmbedState, gemini_batch_embed};
use crate::server::{
    FakeServer, Shared, Verdict, append_headers, fake_server_common, frames_body, hang_body,
    is_json, paced,
};
pub use reply::{GeminiReply, GeminiUsage};
use reply::{GeminiReplyKind, echo_body};

/// The route prefix; the rest of the path is `<model>:<method>`.
const MODELS_PREFIX: &str = "/v1beta/models/";

/// A fake Gemini API server on 127.0.0.1; stops when dropped.
pub struct FakeGemini {
    inner: FakeServer<GeminiReply>,
    /// `batchEmbedContents`: its log and the test's vectors.
    embeds: Arc<EmbedState>,
}

impl Drop for FakeGemini {
    fn drop(&mut self) {
        // As for generate requests: broken embedding requests nobody read
        // fail the test.
        if std::thread::panicking() {
            return;
        }
        let unchecked = self.embeds.unchecked();
        assert!(
            unchecked.is_empty(),
            "FakeGemini dropped with unread embeddings violations: {unchecked:?}"
        );
    }
}

fake_server_common!(FakeGemini, "Gemini");

impl FakeGemini {
    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let embeds = EmbedState::new();
        let embed_state = embeds.clone();
        let router = Router::new()
            .route(
                "/v1beta/models/{*model_and_method}",
                post(
                    move |state: State<Arc<Shared<GeminiReply>>>,
                          uri: Uri,
                          headers: HeaderMap,
                          body: Bytes| {
                        let embed_state = embed_state.clone();
                        async move {
                            match route_parts(uri.path()) {
                                Some((model, "batchEmbedContents")) => gemini_batch_embed(
                                    &embed_state,
                                    model,
                                    uri.query().unwrap_or(""),
                                    &headers,
                                    &body,
                                ),
                                _ => generate(state, uri, headers, body).await,
                            }
                        }
                    },
                ),
            )
            .fallback(not_found);
        let inner = FakeServer::bind("FakeGemini", addr, router).await?;
        Ok(Self { inner, embeds })
    }

    /// `http://<addr>/v1beta`, the base URL for a Gemini client.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1beta", self.addr())
    }

    /// Queues a reply for the next well-routed request.
    pub fn push(&self, reply: GeminiReply) {
        self.inner.push(reply);
    }

    /// Every request body received under `/v1beta/models/`, in order.
    ///
    /// # Panics
    /// When a body is not JSON, showing it: the client under test is broken.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.requests()
    }

    /// Every request's path and query, in order, e.g.
    /// `/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`.
    pub fn request_paths(&self) -> Vec<String> {
        self.inner.request_paths()
    }

    /// Makes `batchEmbedContents` answer `f(text)` for each request's text
    /// (by default [`crate::fake_embeddings::hashed_words`]).
    pub fn embed_with(&self, f: impl Fn(&str) -> Vec<f32> + Send + Sync + 'static) {
        self.embeds.set_embedder(Arc::new(f));
    }

    /// Every `batchEmbedContents` body received, in order (kept apart from
    /// [`Self::requests`]).
    pub fn embedding_requests(&self) -> Vec<Value> {
        self.embeds.requests()
    }

    /// Broken invariants seen so far, one sentence each (those of
    /// `batchEmbedContents` requests after the rest: the key header, no key
    /// in the URL, JSON, non-empty `requests`, each naming the path's model
    /// and holding text). Checked on every
    /// request: the path is `<model>:streamGenerateContent?alt=sse`; the
    /// `x-goog-api-key` header is present and no key is in the URL; `contents`
    /// is non-empty, starts with role `user`, has only roles `user`/`model`
    /// and no empty `parts`; no thought text is sent back; every
    /// `functionResponse` names a `functionCall` of the model content right
    /// before it; no `parallel_tool_calls` anywhere; no `additionalProperties`
    /// or `$schema` in function parameters; `Content-Type` is JSON. Each such
    /// request was answered with Google's own error (404, 403 or 400), not a
    /// reply. Reading them marks them checked: a fake dropped with
    /// violations never read fails the test.
    pub fn violations(&self) -> Vec<String> {
        let mut all = self.inner.violations();
        all.extend(self.embeds.violations());
        all
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
    if !is_json(headers) {
        out.push(format!(
            "request {index}: Content-Type is not application/json"
        ));
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
    State(shared): State<Arc<Shared<GeminiReply>>>,
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
    let keyed = headers
        .get("x-goog-api-key")
        .is_some_and(|k| !k.as_bytes().is_empty());
    let verdict = shared.record(
        Some(path),
        headers,
        &body,
        well_routed,
        |index, headers, out| {
            check_transport(index, &uri, headers, out);
            match &parsed {
                Ok(v) => check_body(index, v, out),
                Err(e) => out.push(format!("request {index}: body is not JSON: {e}")),
            }
        },
    );

    let reply = match verdict {
        Verdict::Accepted(reply) => reply,
        Verdict::Rejected(_) if !well_routed => {
            return error_response(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "the fake Gemini server only serves models/<model>:streamGenerateContent?alt=sse",
            );
        }
        Verdict::Rejected(_) if !keyed => {
            return error_response(
                StatusCode::FORBIDDEN,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without established \
                 identity). Please use API Key or other form of API consumer identity to call \
                 this API.",
            );
        }
        Verdict::Rejected(broken) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                &broken.join("; "),
            );
        }
    };
    let model = route_parts(uri.path()).map_or("", |(m, _)| m);
    match (reply, &parsed) {
        (Some(reply), _) => scripted(reply, model).await,
        (None, Ok(v)) => sse_response(Body::from(echo_body(model, last_user_text(v)))),
        // Unreachable: a body that is not JSON is a violation, so rejected.
        (None, Err(_)) => error_response(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "Invalid JSON payload received.",
        ),
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
        GeminiReplyKind::Hang => sse_response(hang_body()),
        GeminiReplyKind::Text(_) | GeminiReplyKind::FunctionCalls(_) => {
            sse_response(frames_body(frames, reply.chunk_delay))
        }
    };
    append_headers(&mut resp, &reply.headers);
    resp
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
        // The key in the URL, no key header, no JSON content type.
        assert_eq!(out.len(), 3, "{out:?}");
        let mut headers = HeaderMap::new();
        headers.insert("x-goog-api-key", HeaderValue::from_static("k1"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        out.clear();
        let uri: Uri = "/v1beta/models/m:generateContent".parse().unwrap();
        check_transport(0, &uri, &headers, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
    }
}
