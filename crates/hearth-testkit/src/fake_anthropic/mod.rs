//! `FakeAnthropic`: a fake Anthropic Messages API server (`POST /v1/messages`)
//! that streams byte-faithful SSE, logs requests and checks them against the
//! API's rules (role alternation, tool_use/tool_result pairing, headers).
//!
//! Queue `AnthropicReply`s to script answers, errors, cut or hanging streams;
//! with an empty queue it echoes the last user text block.

mod reply;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
pub use reply::{AnthropicReply, AnthropicUsage};
use reply::{ReplyKind, echo_body, error_body};

/// A fake Anthropic Messages API server on 127.0.0.1; stops when dropped.
pub struct FakeAnthropic {
    inner: FakeServer<AnthropicReply>,
}

fake_server_common!(FakeAnthropic, "Anthropic");

impl FakeAnthropic {
    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let router = Router::new()
            .route("/v1/messages", post(messages))
            .fallback(not_found);
        let inner = FakeServer::bind("FakeAnthropic", addr, router).await?;
        Ok(Self { inner })
    }

    /// `http://<addr>`, the base URL for an Anthropic client (no `/v1`:
    /// the client appends `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// Queues a reply for the next request that finds the queue non-empty.
    pub fn push(&self, reply: AnthropicReply) {
        self.inner.push(reply);
    }

    /// Delays the first byte of default (unscripted) replies.
    pub fn set_default_delay(&self, delay: Duration) {
        self.inner.set_default_delay(delay);
    }

    /// Every request body received, in order.
    ///
    /// # Panics
    /// When a body is not JSON, showing it: the client under test is broken.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.requests()
    }

    /// Broken API rules seen so far, one sentence each, prefixed with the
    /// request number: missing `x-api-key`/`anthropic-version` headers, a
    /// body that is not a streaming Messages request, roles that do not
    /// alternate user/assistant starting with user, empty content or text,
    /// a `tool_result` that answers no `tool_use` of the message right
    /// before it, a `tool_use` left unanswered by the next message, results
    /// after other blocks, unsigned thinking, a thinking budget not below
    /// `max_tokens`, thinking enabled for a continued tool-use turn whose
    /// assistant message does not start with a thinking block. Each such
    /// request was answered with Anthropic's own error (401 or 400), not a
    /// reply. Reading them marks them checked: a fake dropped with
    /// violations never read fails the test.
    pub fn violations(&self) -> Vec<String> {
        self.inner.violations()
    }
}

/// The content blocks of a message; a string content counts as one text block.
fn blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Checks one request against the API's rules, appending what it breaks.
fn check_request(index: usize, headers: &HeaderMap, body: &Value, out: &mut Vec<String>) {
    let mut bad = |msg: String| out.push(format!("request {index}: {msg}"));
    for h in ["x-api-key", "anthropic-version"] {
        if !headers.contains_key(h) {
            bad(format!("header {h} is missing"));
        }
    }
    if !is_json(headers) {
        bad("Content-Type is not application/json".into());
    }
    let Some(obj) = body.as_object() else {
        bad("body is not a JSON object".into());
        return;
    };
    if !obj.get("model").is_some_and(Value::is_string) {
        bad("model is missing".into());
    }
    let max_tokens = obj.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    if max_tokens == 0 {
        bad("max_tokens is missing or not a positive integer".into());
    }
    if obj.get("stream") != Some(&Value::Bool(true)) {
        bad("stream is not true".into());
    }
    if let Some(thinking) = obj.get("thinking") {
        let budget = thinking
            .get("budget_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if thinking.get("type").and_then(Value::as_str) == Some("enabled")
            && (budget < 1024 || budget >= max_tokens)
        {
            bad(format!(
                "thinking.budget_tokens {budget} must be at least 1024 and below max_tokens {max_tokens}"
            ));
        }
    }
    let Some(messages) = obj.get("messages").and_then(Value::as_array) else {
        bad("messages is missing".into());
        return;
    };
    if messages.is_empty() {
        bad("messages is empty".into());
    }
    let all: Vec<Vec<Value>> = messages.iter().map(blocks).collect();
    let thinking_on = obj
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled");
    if thinking_on
        && let [.., assistant, user] = all.as_slice()
        && messages.len() % 2 == 1
        && user.iter().any(|b| block_type(b) == "tool_result")
        && !assistant
            .first()
            .is_some_and(|b| matches!(block_type(b), "thinking" | "redacted_thinking"))
    {
        bad(format!(
            "message {}: with thinking enabled, the assistant message of a continued tool-use turn must start with a thinking block",
            messages.len() - 2
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            bad(format!(
                "message {i} has role {role:?} where {expected:?} is due (roles must alternate, starting with user)"
            ));
        }
        let content = &all[i];
        if content.is_empty() {
            bad(format!("message {i} has no content"));
        }
        let mut seen_other = false;
        for (j, b) in content.iter().enumerate() {
            match block_type(b) {
                "text" => {
                    if b.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .is_empty()
                    {
                        bad(format!("message {i} block {j} is an empty text block"));
                    }
                    seen_other = true;
                }
                "redacted_thinking" => seen_other = true,
                "thinking" => {
                    if role != "assistant" {
                        bad(format!(
                            "message {i} block {j}: thinking outside an assistant message"
                        ));
                    }
                    if b.get("signature")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .is_empty()
                    {
                        bad(format!(
                            "message {i} block {j}: thinking without a signature"
                        ));
                    }
                    seen_other = true;
                }
                "tool_use" => {
                    if role != "assistant" {
                        bad(format!(
                            "message {i} block {j}: tool_use outside an assistant message"
                        ));
                    }
                    if !b.get("input").is_some_and(Value::is_object) {
                        bad(format!(
                            "message {i} block {j}: tool_use input is not an object"
                        ));
                    }
                    seen_other = true;
                }
                "tool_result" => {
                    if role != "user" {
                        bad(format!(
                            "message {i} block {j}: tool_result outside a user message"
                        ));
                    }
                    if seen_other {
                        bad(format!(
                            "message {i} block {j}: tool_result after other blocks (results must come first)"
                        ));
                    }
                    let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                    let called = i > 0
                        && all[i - 1].iter().any(|p| {
                            block_type(p) == "tool_use"
                                && p.get("id").and_then(Value::as_str) == Some(id)
                        });
                    if !called {
                        bad(format!(
                            "message {i} block {j}: tool_result for {id:?} answers no tool_use of the message before it"
                        ));
                    }
                }
                other => {
                    bad(format!(
                        "message {i} block {j} has unexpected type {other:?}"
                    ));
                    seen_other = true;
                }
            }
        }
        if role == "assistant" && i + 1 < messages.len() {
            for b in content.iter().filter(|b| block_type(b) == "tool_use") {
                let id = b.get("id").and_then(Value::as_str).unwrap_or("");
                let answered = all[i + 1].iter().any(|r| {
                    block_type(r) == "tool_result"
                        && r.get("tool_use_id").and_then(Value::as_str) == Some(id)
                });
                if !answered {
                    bad(format!(
                        "message {i}: tool_use {id:?} has no tool_result in the next message"
                    ));
                }
            }
        }
    }
}

/// The last text block of the last user message that has one.
fn last_user_text(body: &Value) -> String {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return String::new();
    };
    messages
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|m| {
            blocks(m).iter().rev().find_map(|b| {
                (block_type(b) == "text")
                    .then(|| b.get("text").and_then(Value::as_str).map(str::to_owned))
                    .flatten()
            })
        })
        .unwrap_or_default()
}

async fn messages(
    State(shared): State<Arc<Shared<AnthropicReply>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let authorized = headers.contains_key("x-api-key");
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
                "authentication_error",
                "x-api-key header is required",
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
        Ok(v) => (
            v.get("model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            last_user_text(v),
        ),
        Err(_) => (String::new(), String::new()),
    };
    match reply {
        Some(reply) => scripted(reply, &model).await,
        None => {
            let body = echo_body(&model, &last_user);
            shared.default_delay().await;
            sse_response(Body::from(body))
        }
    }
}

async fn scripted(reply: AnthropicReply, model: &str) -> Response {
    let frames = reply.frames(model);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = match &reply.kind {
        ReplyKind::HttpError { status, body } => {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = (status, axum::Json(body.clone())).into_response();
            resp.headers_mut()
                .insert("request-id", HeaderValue::from_static("req_fake"));
            resp
        }
        ReplyKind::RawSse(raw) => sse_response(Body::from(raw.clone())),
        ReplyKind::Hang => sse_response(hang_body()),
        ReplyKind::Blocks { .. } | ReplyKind::StreamError { .. } => {
            sse_response(frames_body(frames, reply.chunk_delay))
        }
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
    h.insert("request-id", HeaderValue::from_static("req_fake"));
    resp
}

fn error_response(status: StatusCode, error_type: &str, message: &str) -> Response {
    (status, axum::Json(error_body(error_type, message))).into_response()
}

async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "no such route on the fake Anthropic server",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("k"));
        h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h
    }

    #[test]
    fn valid_history_has_no_violations() {
        let body = json!({
            "model": "m", "max_tokens": 10, "stream": true,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "{}"},
                    {"type": "text", "text": "more"}]}
            ]
        });
        let mut out = Vec::new();
        check_request(0, &headers(), &body, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(last_user_text(&body), "more");
    }

    #[test]
    fn flags_tool_turn_without_thinking_when_thinking_is_on() {
        let body = json!({
            "model": "m", "max_tokens": 4096, "stream": true,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "{}"}]}
            ]
        });
        let mut out = Vec::new();
        check_request(0, &headers(), &body, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains("must start with a thinking block"));
    }

    #[test]
    fn flags_broken_rules() {
        let body = json!({
            "model": "m", "max_tokens": 10, "stream": true,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "t"},
                    {"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "x"},
                    {"type": "tool_result", "tool_use_id": "zzz", "content": "{}"}]},
                {"role": "user", "content": []}
            ]
        });
        let mut out = Vec::new();
        check_request(3, &HeaderMap::new(), &body, &mut out);
        let all = out.join("\n");
        for needle in [
            "x-api-key",
            "anthropic-version",
            "budget_tokens",
            "without a signature",
            "\"a\" has no tool_result",
            "results must come first",
            "\"zzz\" answers no tool_use",
            "message 3 has role \"user\"",
            "message 3 has no content",
        ] {
            assert!(all.contains(needle), "{needle}: {all}");
        }
        assert!(out.iter().all(|v| v.starts_with("request 3: ")));
    }
}
