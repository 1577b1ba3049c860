//! `FakeOpenAi`: the fake Chat Completions server, its request log and checks.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

#[cfg(doc)]
use crate::fake_embeddings::hashed_words;
use crate::fake_embeddings::{EmbedState, embeddings};
use crate::reply::{Reply, ReplyKind, echo_body};
use crate::server::{
    FakeServer, Shared, Verdict, append_headers, fake_server_common, frames_body, gated_body,
    hang_body, is_json, stalled_body,
};

/// A fake OpenAI-compatible server on 127.0.0.1; stops when dropped.
pub struct FakeOpenAi {
    inner: FakeServer<Reply>,
    /// What `GET /v1/models` lists.
    models: Arc<Mutex<Vec<String>>>,
    /// `POST /v1/embeddings`: its log and the test's vectors.
    embeds: Arc<EmbedState>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        // Like the chat route: a broken embeddings request nobody looked at
        // fails the test, as hearth may have swallowed the error it got.
        if std::thread::panicking() {
            return;
        }
        let unchecked = self.embeds.unchecked();
        assert!(
            unchecked.is_empty(),
            "FakeOpenAi dropped with unread embeddings violations: {unchecked:?}"
        );
    }
}

/// What `GET /v1/models` lists until [`FakeOpenAi::set_models`].
pub const FAKE_MODELS: [&str; 2] = ["fake-model", "other-model"];

fake_server_common!(FakeOpenAi, "OpenAI");

impl FakeOpenAi {
    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let models = Arc::new(Mutex::new(
            FAKE_MODELS.iter().map(|m| (*m).to_owned()).collect(),
        ));
        let listed = models.clone();
        let embeds = EmbedState::new();
        let embed_state = embeds.clone();
        let router = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route(
                "/v1/models",
                get(move |headers: HeaderMap| list_models(listed.clone(), headers)),
            )
            .route(
                "/v1/embeddings",
                post(move |headers: HeaderMap, body: Bytes| {
                    embeddings(State(embed_state.clone()), headers, body)
                }),
            )
            .fallback(not_found);
        let inner = FakeServer::bind("FakeOpenAi", addr, router).await?;
        Ok(Self {
            inner,
            models,
            embeds,
        })
    }

    /// Sets what `GET /v1/models` lists (by default [`FAKE_MODELS`]).
    pub fn set_models(&self, models: &[&str]) {
        *self.models.lock().unwrap_or_else(PoisonError::into_inner) =
            models.iter().map(|m| (*m).to_owned()).collect();
    }

    /// `http://<addr>/v1`, the base URL for an OpenAI-compatible client.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr())
    }

    /// Queues a reply for the next request that finds the queue non-empty.
    pub fn push(&self, reply: Reply) {
        self.inner.push(reply);
    }

    /// Answers requests the queue has no reply for with `f(body)` when it
    /// returns one (a scripted summarizer, say), else with the default echo.
    pub fn respond_with(
        &self,
        f: impl Fn(&serde_json::Value) -> Option<Reply> + Send + Sync + 'static,
    ) {
        self.inner.set_responder(Arc::new(f));
    }

    /// Delays the first byte of default (unscripted) replies.
    pub fn set_default_delay(&self, delay: Duration) {
        self.inner.set_default_delay(delay);
    }

    /// Makes `POST /v1/embeddings` answer `f(input)` for each input text
    /// (by default [`hashed_words`]).
    pub fn embed_with(&self, f: impl Fn(&str) -> Vec<f32> + Send + Sync + 'static) {
        self.embeds.set_embedder(Arc::new(f));
    }

    /// Every `POST /v1/embeddings` body received, in order (kept apart from
    /// [`Self::requests`], which are chat requests).
    pub fn embedding_requests(&self) -> Vec<serde_json::Value> {
        self.embeds.requests()
    }

    /// Every request body received, in order.
    ///
    /// # Panics
    /// When a body is not JSON, showing it: the client under test is broken.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        self.inner.requests()
    }

    /// Broken rules seen so far, one sentence each: no `Authorization:
    /// Bearer <key>`, a `Content-Type` that is not JSON, a body that is not a
    /// chat request, no `model`, no `messages`, or a `tool` message whose
    /// `tool_call_id` answers no tool call of an earlier assistant message in
    /// the same request. Each such request was answered with OpenAI's own
    /// error (401 or 400), not a reply. Reading them marks them checked: a
    /// fake dropped with violations never read fails the test.
    ///
    /// Embeddings requests are checked too (bearer key, JSON, `model`, an
    /// `input` that is a non-empty string or array of non-empty strings) and
    /// their broken rules are listed here after the chat ones.
    pub fn violations(&self) -> Vec<String> {
        let mut all = self.inner.violations();
        all.extend(self.embeds.violations());
        all
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

/// Whether the request carries `Authorization: Bearer <non-empty key>`.
fn has_bearer(headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| !k.trim().is_empty())
}

/// Checks one request against the API's rules, appending what it breaks.
fn check_request(
    index: usize,
    headers: &HeaderMap,
    parsed: &Result<RequestView<'_>, serde_json::Error>,
    out: &mut Vec<String>,
) {
    if !has_bearer(headers) {
        out.push(format!(
            "request {index}: Authorization: Bearer <key> is missing"
        ));
    }
    if !is_json(headers) {
        out.push(format!(
            "request {index}: Content-Type is not application/json"
        ));
    }
    let req = match parsed {
        Ok(req) => req,
        Err(e) => {
            out.push(format!("request {index}: body is not a chat request: {e}"));
            return;
        }
    };
    if req.model.is_empty() {
        out.push(format!("request {index}: model is missing"));
    }
    if req.messages.is_empty() {
        out.push(format!("request {index}: messages is missing or empty"));
    }
    check_tool_results(index, req, out);
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

async fn chat(
    State(shared): State<Arc<Shared<Reply>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<RequestView<'_>>(&body);
    let authorized = has_bearer(&headers);
    let verdict = shared.record(None, headers, &body, true, |index, headers, out| {
        check_request(index, headers, &parsed, out);
    });
    let reply = match verdict {
        Verdict::Accepted(reply) => reply,
        Verdict::Rejected(_) if !authorized => {
            return error_response(
                StatusCode::UNAUTHORIZED,
                "You didn't provide an API key. You need to provide your API key in an \
                 Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            );
        }
        Verdict::Rejected(broken) => {
            return error_response(StatusCode::BAD_REQUEST, &broken.join("; "));
        }
    };

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
            let body = echo_body(model, last_user);
            shared.default_delay().await;
            sse_response(Body::from(body), None)
        }
    }
}

async fn scripted(reply: Reply, model: &str) -> Response {
    let frames = reply.frames(model);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let content_type = reply.content_type.as_deref();
    let mut resp = match reply.kind {
        ReplyKind::HttpError { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(body)).into_response()
        }
        ReplyKind::RawSse(raw) => sse_response(Body::from(raw), content_type),
        ReplyKind::Hang => sse_response(hang_body(), content_type),
        ReplyKind::Text(_) | ReplyKind::ToolCalls(_) => match (reply.stall_after, reply.pause) {
            (Some(n), _) => sse_response(stalled_body(frames, n), content_type),
            (None, Some((n, gate))) => sse_response(gated_body(frames, n, gate), content_type),
            (None, None) => sse_response(frames_body(frames, reply.chunk_delay), content_type),
        },
    };
    append_headers(&mut resp, &reply.headers);
    resp
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
    let body = serde_json::json!({"error": {
        "message": message, "type": "invalid_request_error", "param": null, "code": null,
    }});
    (status, axum::Json(body)).into_response()
}

/// `GET /v1/models`: OpenAI's list, refused (401, as OpenAI does) without a
/// bearer key. Not recorded as a request: `requests()` are chat requests.
async fn list_models(models: Arc<Mutex<Vec<String>>>, headers: HeaderMap) -> Response {
    if !has_bearer(&headers) {
        return error_response(
            StatusCode::UNAUTHORIZED,
            "You didn't provide an API key. You need to provide your API key in an \
             Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        );
    }
    let data: Vec<serde_json::Value> = models
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(
            |id| serde_json::json!({"id": id, "object": "model", "created": 0, "owned_by": "fake"}),
        )
        .collect();
    axum::Json(serde_json::json!({"object": "list", "data": data})).into_response()
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
