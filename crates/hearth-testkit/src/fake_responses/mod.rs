//! `FakeResponses`: a fake OpenAI Responses API server (`POST /v1/responses`)
//! that streams byte-faithful SSE, logs requests and checks them against the
//! API's rules (streaming, function call/output pairing, stateless reasoning
//! items, tools, the bearer key).
//!
//! Queue `ResponsesReply`s to script answers, errors, cut or hanging streams;
//! with an empty queue it echoes the last user `input_text`.

mod reply;

use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use serde_json::Value;

use crate::server::{
    FakeServer, Shared, Verdict, append_headers, fake_server_common, frames_body, hang_body,
    is_json,
};
use reply::{ReplyKind, echo_body, error_body};
pub use reply::{ResponsesReply, ResponsesUsage};

/// A fake OpenAI Responses API server on 127.0.0.1; stops when dropped.
pub struct FakeResponses {
    inner: FakeServer<ResponsesReply>,
}

fake_server_common!(FakeResponses, "Responses API");

impl FakeResponses {
    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let router = Router::new()
            .route("/v1/responses", post(responses))
            .fallback(not_found);
        let inner = FakeServer::bind("FakeResponses", addr, router).await?;
        Ok(Self { inner })
    }

    /// `http://<addr>/v1`, the base URL for a Responses API client (which
    /// appends `/responses`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr())
    }

    /// Queues a reply for the next request that finds the queue non-empty.
    pub fn push(&self, reply: ResponsesReply) {
        self.inner.push(reply);
    }

    /// Every request body received, in order.
    ///
    /// # Panics
    /// When a body is not JSON, showing it: the client under test is broken.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.requests()
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
    /// `reasoning.effort`, a `Content-Type` that is not JSON. Each such
    /// request was answered with OpenAI's own error (401 or 400), not a
    /// reply. Reading them marks them checked: a fake dropped with
    /// violations never read fails the test.
    pub fn violations(&self) -> Vec<String> {
        self.inner.violations()
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
    if !is_json(headers) {
        bad("Content-Type is not application/json".into());
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

async fn responses(
    State(shared): State<Arc<Shared<ResponsesReply>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| !k.trim().is_empty());
    let verdict = shared.record(
        None,
        headers,
        &body,
        true,
        |index, headers, out| match &parsed {
            Ok(v) => check_request(index, headers, v, out),
            Err(e) => out.push(format!("request {index}: body is not JSON: {e}")),
        },
    );
    let reply = match verdict {
        Verdict::Accepted(reply) => reply,
        Verdict::Rejected(_) if !authorized => {
            return error_response(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "You didn't provide an API key. You need to provide your API key in an \
                 Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            );
        }
        Verdict::Rejected(broken) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &broken.join("; "),
            );
        }
    };

    let (model, last_user) = match &parsed {
        Ok(v) => (str_field(v, "model").to_owned(), last_user_text(v)),
        Err(_) => (String::new(), String::new()),
    };
    match reply {
        Some(reply) => scripted(reply, &model).await,
        None => sse_response(Body::from(echo_body(&model, &last_user))),
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
        ReplyKind::Hang => sse_response(hang_body()),
        ReplyKind::Output { .. }
        | ReplyKind::Incomplete { .. }
        | ReplyKind::Failed { .. }
        | ReplyKind::ErrorEvent { .. } => sse_response(frames_body(frames, reply.chunk_delay)),
    };
    append_headers(&mut resp, &reply.headers);
    resp
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
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
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
