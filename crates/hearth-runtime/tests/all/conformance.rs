//! Provider conformance: the same scenarios through every LLM adapter
//! (`openai_compat`, `anthropic`, `gemini`, `openai` Responses), end to end
//! through the real runtime: real SQLite store, real engine, a catalog built
//! from a TOML config, and each adapter's fake server from hearth-testkit.
//!
//! Each scenario is a generic async fn over the `Adapter` trait; the
//! `conformance!` macro stamps out one `#[tokio::test]` per adapter and
//! scenario, named `<adapter>_<scenario>`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_agent::RetryPolicy;
use hearth_core::{
    Content, DeliveryMode, Inbound, Role, RunEnvelope, RunEventKind, RunStatus, ThinkingLevel,
};
use hearth_runtime::testing;
use hearth_runtime::{Runtime, UsageReport, WaitOutcome};
use hearth_store::{StepRecord, Store, UsageGroup, UsageQuery};
use hearth_testkit::fake_anthropic::{AnthropicReply, FakeAnthropic};
use hearth_testkit::fake_gemini::{FakeGemini, GeminiReply};
use hearth_testkit::fake_responses::{FakeResponses, ResponsesReply};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::ToolRegistry;
use serde_json::{Value, json};

use crate::common;

// ---------------------------------------------------------------------------
// The adapter abstraction: one fake server plus how its wire looks.
// ---------------------------------------------------------------------------

/// A tool result as found in a request body.
#[derive(Debug, Clone)]
struct WireResult {
    /// What the result answers: the call id, or (Gemini, whose wire has no
    /// call ids) the function name.
    answers: String,
    /// The tool's output, parsed.
    output: Value,
}

/// One provider adapter under test: its fake server, scripted replies in its
/// own wire format, and readers for the requests it received.
trait Adapter: Sized {
    /// The provider `type` in hearth.toml.
    const TYPE: &'static str;
    /// Whether tool results name the call id (false: the function name).
    const RESULTS_BY_ID: bool = true;
    /// `(input, output, cached)` tokens of the fake's default usage.
    const DEFAULT_TOKENS: (u64, u64, u64);

    async fn start() -> Self;
    fn base_url(&self) -> String;
    fn push_text(&self, text: &str);
    /// Tool calls `(id, name, json arguments)` in one answer.
    fn push_tool_calls(&self, calls: &[(&str, &str, &str)]);
    /// A reasoning part (with a signature where the wire has one), then text.
    fn push_thinking_then_text(&self, thought: &str, text: &str);
    /// A reasoning part (signed where the wire signs it), then tool calls.
    fn push_thinking_then_tool_calls(&self, thought: &str, calls: &[(&str, &str, &str)]);
    /// A complete text answer that reports no usage at all.
    fn push_text_without_usage(&self, text: &str);
    fn push_http_error(&self, status: u16, retry_after: Option<&str>);
    /// A stream whose first event is not valid JSON.
    fn push_malformed(&self);
    /// Headers, then nothing.
    fn push_hang(&self);
    fn request_count(&self) -> usize;
    async fn wait_for_requests(&self, n: usize);
    fn violations(&self) -> Vec<String>;
    fn requests(&self) -> Vec<Value>;

    /// The tool results carried by a request, in order.
    fn tool_results(req: &Value) -> Vec<WireResult>;
    /// The user texts of a request, in order.
    fn user_texts(req: &Value) -> Vec<String>;
    /// True when the request asks for reasoning at level `low`.
    fn asks_for_low_thinking(req: &Value) -> bool;
    /// True when the request asks for no reasoning.
    fn thinking_off(req: &Value) -> bool;
    /// The signature of the pushed thinking as the adapter stores it, or
    /// `None` when the wire has no signature.
    fn stored_signature() -> Option<String>;
    /// The thinking signature sent back in a request's history, if any.
    fn signature_sent_back(req: &Value) -> Option<String>;
}

const SIGNATURE: &str = "sig-conformance-1";

fn parse_output(s: &Value) -> Value {
    match s {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    }
}

// --- Chat Completions (openai_compat) ---------------------------------------

impl Adapter for FakeOpenAi {
    const TYPE: &'static str = "openai_compat";
    const DEFAULT_TOKENS: (u64, u64, u64) = (12, 7, 3);

    async fn start() -> Self {
        FakeOpenAi::start().await
    }
    fn base_url(&self) -> String {
        FakeOpenAi::base_url(self)
    }
    fn push_text(&self, text: &str) {
        self.push(Reply::text(text));
    }
    fn push_tool_calls(&self, calls: &[(&str, &str, &str)]) {
        self.push(Reply::tool_calls(
            calls
                .iter()
                .map(|(id, name, args)| ToolCallSpec::new(*id, *name, *args))
                .collect(),
        ));
    }
    fn push_thinking_then_text(&self, thought: &str, text: &str) {
        self.push(Reply::text(text).with_reasoning(thought));
    }
    fn push_thinking_then_tool_calls(&self, thought: &str, calls: &[(&str, &str, &str)]) {
        self.push(
            Reply::tool_calls(
                calls
                    .iter()
                    .map(|(id, name, args)| ToolCallSpec::new(*id, *name, *args))
                    .collect(),
            )
            .with_reasoning(thought),
        );
    }
    fn push_text_without_usage(&self, text: &str) {
        self.push(Reply::text(text).without_usage());
    }
    fn push_http_error(&self, status: u16, retry_after: Option<&str>) {
        let mut r = Reply::http_error(status, json!({"error": {"message": "boom"}}));
        if let Some(v) = retry_after {
            r = r.with_header("retry-after", v);
        }
        self.push(r);
    }
    fn push_malformed(&self) {
        self.push(Reply::raw_sse("data: {this is not json\n\n"));
    }
    fn push_hang(&self) {
        self.push(Reply::hang());
    }
    fn request_count(&self) -> usize {
        FakeOpenAi::request_count(self)
    }
    async fn wait_for_requests(&self, n: usize) {
        FakeOpenAi::wait_for_requests(self, n).await;
    }
    fn violations(&self) -> Vec<String> {
        FakeOpenAi::violations(self)
    }
    fn requests(&self) -> Vec<Value> {
        FakeOpenAi::requests(self)
    }

    fn tool_results(req: &Value) -> Vec<WireResult> {
        req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| WireResult {
                answers: m["tool_call_id"].as_str().unwrap_or("").to_owned(),
                output: parse_output(&m["content"]),
            })
            .collect()
    }
    fn user_texts(req: &Value) -> Vec<String> {
        req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str().map(str::to_owned))
            .collect()
    }
    fn asks_for_low_thinking(req: &Value) -> bool {
        req["reasoning_effort"] == "low"
    }
    fn thinking_off(req: &Value) -> bool {
        req.get("reasoning_effort").is_none_or(Value::is_null)
    }
    fn stored_signature() -> Option<String> {
        None
    }
    fn signature_sent_back(req: &Value) -> Option<String> {
        // Chat Completions has no field to send reasoning back in; anything
        // reasoning-like in an assistant message would be a leak.
        req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .find_map(|m| {
                ["reasoning_content", "reasoning", "thinking"]
                    .iter()
                    .find_map(|k| m.get(*k).map(ToString::to_string))
            })
    }
}

// --- Anthropic Messages -----------------------------------------------------

fn anthropic_blocks(m: &Value) -> Vec<Value> {
    match &m["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        429 => "rate_limit_error",
        400 => "invalid_request_error",
        _ => "api_error",
    }
}

impl Adapter for FakeAnthropic {
    const TYPE: &'static str = "anthropic";
    const DEFAULT_TOKENS: (u64, u64, u64) = (25, 12, 0);

    async fn start() -> Self {
        FakeAnthropic::start().await
    }
    fn base_url(&self) -> String {
        FakeAnthropic::base_url(self)
    }
    fn push_text(&self, text: &str) {
        self.push(AnthropicReply::text(text));
    }
    fn push_tool_calls(&self, calls: &[(&str, &str, &str)]) {
        self.push(AnthropicReply::tool_uses(calls.iter().copied()));
    }
    fn push_thinking_then_text(&self, thought: &str, text: &str) {
        self.push(AnthropicReply::text(text).with_thinking(thought, SIGNATURE));
    }
    fn push_thinking_then_tool_calls(&self, thought: &str, calls: &[(&str, &str, &str)]) {
        self.push(
            AnthropicReply::tool_uses(calls.iter().copied()).with_thinking(thought, SIGNATURE),
        );
    }
    fn push_text_without_usage(&self, text: &str) {
        // The real API always reports usage; the adapter must still cope
        // when a compatible server leaves it out of both events.
        let events = [
            (
                "message_start",
                json!({"type": "message_start", "message": {
                    "id": "msg_nousage", "type": "message", "role": "assistant",
                    "model": "m", "content": [], "stop_reason": null,
                    "stop_sequence": null}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta",
                       "delta": {"stop_reason": "end_turn", "stop_sequence": null}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ];
        let raw: String = events
            .iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
            .collect();
        self.push(AnthropicReply::raw_sse(raw));
    }
    fn push_http_error(&self, status: u16, retry_after: Option<&str>) {
        let mut r = AnthropicReply::api_error(status, anthropic_error_type(status), "boom");
        if let Some(v) = retry_after {
            r = r.with_header("retry-after", v);
        }
        self.push(r);
    }
    fn push_malformed(&self) {
        self.push(AnthropicReply::raw_sse(
            "event: message_start\ndata: {this is not json\n\n",
        ));
    }
    fn push_hang(&self) {
        self.push(AnthropicReply::hang());
    }
    fn request_count(&self) -> usize {
        FakeAnthropic::request_count(self)
    }
    async fn wait_for_requests(&self, n: usize) {
        FakeAnthropic::wait_for_requests(self, n).await;
    }
    fn violations(&self) -> Vec<String> {
        FakeAnthropic::violations(self)
    }
    fn requests(&self) -> Vec<Value> {
        FakeAnthropic::requests(self)
    }

    fn tool_results(req: &Value) -> Vec<WireResult> {
        req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .flat_map(anthropic_blocks)
            .filter(|b| b["type"] == "tool_result")
            .map(|b| WireResult {
                answers: b["tool_use_id"].as_str().unwrap_or("").to_owned(),
                output: parse_output(&b["content"]),
            })
            .collect()
    }
    fn user_texts(req: &Value) -> Vec<String> {
        req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .flat_map(anthropic_blocks)
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str().map(str::to_owned))
            .collect()
    }
    fn asks_for_low_thinking(req: &Value) -> bool {
        req["thinking"]["type"] == "enabled" && req["thinking"]["budget_tokens"] == 1024
    }
    fn thinking_off(req: &Value) -> bool {
        req.get("thinking").is_none_or(Value::is_null)
    }
    fn stored_signature() -> Option<String> {
        Some(SIGNATURE.to_owned())
    }
    fn signature_sent_back(req: &Value) -> Option<String> {
        req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .flat_map(anthropic_blocks)
            .find(|b| b["type"] == "thinking")
            .and_then(|b| b["signature"].as_str().map(str::to_owned))
    }
}

// --- Gemini generateContent -------------------------------------------------

fn gemini_parts(req: &Value, role: &'static str) -> Vec<Value> {
    req["contents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["role"] == role)
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .collect()
}

impl Adapter for FakeGemini {
    const TYPE: &'static str = "gemini";
    const RESULTS_BY_ID: bool = false;
    const DEFAULT_TOKENS: (u64, u64, u64) = (12, 7, 3);

    async fn start() -> Self {
        FakeGemini::start().await
    }
    fn base_url(&self) -> String {
        FakeGemini::base_url(self)
    }
    fn push_text(&self, text: &str) {
        self.push(GeminiReply::text(text));
    }
    fn push_tool_calls(&self, calls: &[(&str, &str, &str)]) {
        // Gemini's wire has no call ids: the adapter makes its own.
        self.push(GeminiReply::function_calls(
            calls
                .iter()
                .map(|(_, name, args)| (*name, serde_json::from_str::<Value>(args).unwrap()))
                .collect(),
        ));
    }
    fn push_thinking_then_text(&self, thought: &str, text: &str) {
        self.push(
            GeminiReply::text(text)
                .with_thought(thought)
                .with_thought_signature(SIGNATURE),
        );
    }
    fn push_thinking_then_tool_calls(&self, thought: &str, calls: &[(&str, &str, &str)]) {
        self.push(
            GeminiReply::function_calls(
                calls
                    .iter()
                    .map(|(_, name, args)| (*name, serde_json::from_str::<Value>(args).unwrap()))
                    .collect(),
            )
            .with_thought(thought)
            .with_thought_signature(SIGNATURE),
        );
    }
    fn push_text_without_usage(&self, text: &str) {
        self.push(GeminiReply::text(text).without_usage());
    }
    fn push_http_error(&self, status: u16, retry_after: Option<&str>) {
        let st = match status {
            429 => "RESOURCE_EXHAUSTED",
            400 => "INVALID_ARGUMENT",
            _ => "INTERNAL",
        };
        let mut r = GeminiReply::http_error(
            status,
            json!({"error": {"code": status, "message": "boom", "status": st}}),
        );
        if let Some(v) = retry_after {
            r = r.with_header("retry-after", v);
        }
        self.push(r);
    }
    fn push_malformed(&self) {
        self.push(GeminiReply::raw_sse("data: {this is not json\r\n\r\n"));
    }
    fn push_hang(&self) {
        self.push(GeminiReply::hang());
    }
    fn request_count(&self) -> usize {
        FakeGemini::request_count(self)
    }
    async fn wait_for_requests(&self, n: usize) {
        FakeGemini::wait_for_requests(self, n).await;
    }
    fn violations(&self) -> Vec<String> {
        FakeGemini::violations(self)
    }
    fn requests(&self) -> Vec<Value> {
        FakeGemini::requests(self)
    }

    fn tool_results(req: &Value) -> Vec<WireResult> {
        gemini_parts(req, "user")
            .iter()
            .filter_map(|p| p.get("functionResponse"))
            .map(|r| WireResult {
                answers: r["name"].as_str().unwrap_or("").to_owned(),
                output: r["response"].clone(),
            })
            .collect()
    }
    fn user_texts(req: &Value) -> Vec<String> {
        gemini_parts(req, "user")
            .iter()
            .filter_map(|p| p["text"].as_str().map(str::to_owned))
            .collect()
    }
    fn asks_for_low_thinking(req: &Value) -> bool {
        let tc = &req["generationConfig"]["thinkingConfig"];
        tc["thinkingBudget"] == 1024 && tc["includeThoughts"] == true
    }
    fn thinking_off(req: &Value) -> bool {
        req["generationConfig"].get("thinkingConfig").is_none()
    }
    fn stored_signature() -> Option<String> {
        Some(SIGNATURE.to_owned())
    }
    fn signature_sent_back(req: &Value) -> Option<String> {
        gemini_parts(req, "model")
            .iter()
            .find_map(|p| p["thoughtSignature"].as_str().map(str::to_owned))
    }
}

// --- OpenAI Responses -------------------------------------------------------

const ENCRYPTED: &str = "enc-conformance-1";

fn responses_input(req: &Value) -> Vec<Value> {
    req["input"].as_array().cloned().unwrap_or_default()
}

impl Adapter for FakeResponses {
    const TYPE: &'static str = "openai";
    const DEFAULT_TOKENS: (u64, u64, u64) = (21, 9, 0);

    async fn start() -> Self {
        FakeResponses::start().await
    }
    fn base_url(&self) -> String {
        FakeResponses::base_url(self)
    }
    fn push_text(&self, text: &str) {
        self.push(ResponsesReply::text(text));
    }
    fn push_tool_calls(&self, calls: &[(&str, &str, &str)]) {
        self.push(ResponsesReply::function_calls(calls.iter().copied()));
    }
    fn push_thinking_then_text(&self, thought: &str, text: &str) {
        self.push(ResponsesReply::text(text).with_reasoning(thought, ENCRYPTED));
    }
    fn push_thinking_then_tool_calls(&self, thought: &str, calls: &[(&str, &str, &str)]) {
        self.push(
            ResponsesReply::function_calls(calls.iter().copied())
                .with_reasoning(thought, ENCRYPTED),
        );
    }
    fn push_text_without_usage(&self, text: &str) {
        // The real API always fills `response.usage` on completion; a
        // compatible server may leave it null.
        let item = json!({"id": "msg_nousage", "type": "message", "status": "completed",
                          "role": "assistant",
                          "content": [{"type": "output_text", "annotations": [], "text": text}]});
        let events = [
            (
                "response.output_item.added",
                json!({"output_index": 0, "item": {"id": "msg_nousage", "type": "message",
                       "status": "in_progress", "role": "assistant", "content": []}}),
            ),
            (
                "response.output_text.delta",
                json!({"item_id": "msg_nousage", "output_index": 0, "content_index": 0,
                       "delta": text}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": item}),
            ),
            (
                "response.completed",
                json!({"response": {"id": "resp_nousage", "object": "response",
                       "status": "completed", "model": "m", "output": [item],
                       "usage": null}}),
            ),
        ];
        let raw: String = events
            .into_iter()
            .enumerate()
            .map(|(seq, (name, mut data))| {
                data["type"] = name.into();
                data["sequence_number"] = seq.into();
                format!("event: {name}\ndata: {data}\n\n")
            })
            .collect();
        self.push(ResponsesReply::raw_sse(raw));
    }
    fn push_http_error(&self, status: u16, retry_after: Option<&str>) {
        let (kind, code) = match status {
            429 => ("requests", Some("rate_limit_exceeded")),
            400 => ("invalid_request_error", None),
            _ => ("server_error", None),
        };
        let mut r = ResponsesReply::api_error(status, kind, code, "boom");
        if let Some(v) = retry_after {
            r = r.with_header("retry-after", v);
        }
        self.push(r);
    }
    fn push_malformed(&self) {
        self.push(ResponsesReply::raw_sse(
            "event: response.created\ndata: {this is not json\n\n",
        ));
    }
    fn push_hang(&self) {
        self.push(ResponsesReply::hang());
    }
    fn request_count(&self) -> usize {
        FakeResponses::request_count(self)
    }
    async fn wait_for_requests(&self, n: usize) {
        FakeResponses::wait_for_requests(self, n).await;
    }
    fn violations(&self) -> Vec<String> {
        FakeResponses::violations(self)
    }
    fn requests(&self) -> Vec<Value> {
        FakeResponses::requests(self)
    }

    fn tool_results(req: &Value) -> Vec<WireResult> {
        responses_input(req)
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| WireResult {
                answers: i["call_id"].as_str().unwrap_or("").to_owned(),
                output: parse_output(&i["output"]),
            })
            .collect()
    }
    fn user_texts(req: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for item in responses_input(req).iter().filter(|i| i["role"] == "user") {
            match &item["content"] {
                Value::String(s) => out.push(s.clone()),
                Value::Array(parts) => out.extend(
                    parts
                        .iter()
                        .filter_map(|p| p["text"].as_str().map(str::to_owned)),
                ),
                _ => {}
            }
        }
        out
    }
    fn asks_for_low_thinking(req: &Value) -> bool {
        req["reasoning"]["effort"] == "low"
    }
    fn thinking_off(req: &Value) -> bool {
        req.get("reasoning").is_none_or(Value::is_null)
    }
    fn stored_signature() -> Option<String> {
        // The adapter keeps the reasoning item's id and encrypted content as
        // compact JSON (see hearth-llm/src/openai/wire.rs).
        Some(format!(
            r#"{{"id":"rs_fake0000","encrypted_content":"{ENCRYPTED}"}}"#
        ))
    }
    fn signature_sent_back(req: &Value) -> Option<String> {
        responses_input(req)
            .iter()
            .find(|i| i["type"] == "reasoning")
            .and_then(|i| i["encrypted_content"].as_str().map(str::to_owned))
    }
}

// ---------------------------------------------------------------------------
// The runtime, set up as in tests/runtime.rs.
// ---------------------------------------------------------------------------

struct Setup<A> {
    rt: Runtime,
    store: Arc<dyn Store>,
    fake: A,
    _dir: tempfile::TempDir,
}

/// A runtime whose default model `p/m` is served by a fresh fake of `A`;
/// with `fallback`, `echo/echo` is the model to fail over to.
async fn setup<A: Adapter>(fallback: bool) -> Setup<A> {
    let dir = tempfile::tempdir().unwrap();
    let fake = A::start().await;
    let store = common::store(dir.path());
    let fallback = if fallback {
        "fallback = [\"echo/echo\"]\n"
    } else {
        ""
    };
    let toml = format!(
        "[llm]\ndefault_model = \"p/m\"\n{fallback}\n[llm.providers.p]\ntype = \"{}\"\nbase_url = \"{}\"\napi_key_env = \"K\"\nmodels = [\"m\"]\n",
        A::TYPE,
        fake.base_url()
    );
    let env: BTreeMap<String, String> = [("K".to_owned(), "test-key".to_owned())].into();
    let retry = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        max_total_wait: Duration::from_secs(5),
    };
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .env(env)
            .tools(ToolRegistry::with_builtins())
            .system_prompt("be brief")
            .engine(move |e| e.with_retry(retry)),
    )
    .await;
    rt.start().await.unwrap();
    Setup {
        rt,
        store,
        fake,
        _dir: dir,
    }
}

fn msg(thread: &str, text: &str) -> Inbound {
    Inbound {
        source: "test".into(),
        thread_key: testing::thread(thread),
        user_key: testing::user("test:user:1"),
        text: text.into(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    }
}

impl<A: Adapter> Setup<A> {
    async fn ingest(&self, thread: &str, text: &str) -> RunEnvelope {
        self.rt.ingest(msg(thread, text)).await.unwrap()
    }

    async fn finished(&self, run_id: &str) -> RunEnvelope {
        match self.rt.wait(run_id, Duration::from_secs(30)).await.unwrap() {
            WaitOutcome::Finished(e) => e,
            WaitOutcome::Pending(e) => panic!("{}: run not finished: {e:?}", A::TYPE),
        }
    }

    /// Sends a message and returns the finished run.
    async fn run(&self, thread: &str, text: &str) -> RunEnvelope {
        let run = self.ingest(thread, text).await;
        self.finished(&run.run_id).await
    }

    async fn trace(&self, run_id: &str) -> Vec<StepRecord> {
        self.rt.trace(run_id).await.unwrap()
    }

    /// The usage report of model `key`, grouped by model.
    async fn usage_of(&self, key: &str) -> UsageReport {
        let all = self
            .rt
            .usage(&UsageQuery {
                since: None,
                until: None,
                group_by: UsageGroup::Model,
            })
            .await
            .unwrap();
        all.into_iter()
            .find(|r| r.key == key)
            .unwrap_or_else(|| panic!("{}: no usage row for {key}", A::TYPE))
    }

    fn assert_no_violations(&self) {
        let v = self.fake.violations();
        assert!(v.is_empty(), "{}: fake saw violations: {v:#?}", A::TYPE);
    }
}

fn succeeded_with(env: &RunEnvelope, text: &str, who: &str) {
    assert_eq!(
        env.status,
        RunStatus::Succeeded,
        "{who}: run did not succeed: {:?}",
        env.error
    );
    assert_eq!(env.output.as_ref().unwrap().text, text, "{who}");
}

/// `(kind, name, status)` of each journal step.
fn trace_shape(steps: &[StepRecord]) -> Vec<(&'static str, String, &'static str)> {
    steps
        .iter()
        .map(|s| (s.kind.as_str(), s.name.clone(), s.status.as_str()))
        .collect()
}

fn step(
    kind: &'static str,
    name: &str,
    status: &'static str,
) -> (&'static str, String, &'static str) {
    (kind, name.to_owned(), status)
}

// ---------------------------------------------------------------------------
// Scenarios.
// ---------------------------------------------------------------------------

/// 1. A plain answer: the run gets the text; usage shows one call with tokens.
async fn plain_answer<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.fake.push_text("Hello from the model.");
    let done = s.run("t:plain", "hi").await;
    succeeded_with(&done, "Hello from the model.", A::TYPE);
    assert_eq!(done.model.as_deref(), Some("p/m"), "{}", A::TYPE);
    assert_eq!(s.fake.request_count(), 1, "{}", A::TYPE);
    assert_eq!(A::user_texts(&s.fake.requests()[0]), ["hi"], "{}", A::TYPE);

    let steps = s.trace(&done.run_id).await;
    assert_eq!(
        trace_shape(&steps),
        [step("llm", "p/m", "succeeded")],
        "{}",
        A::TYPE
    );
    let (input, output, cached) = A::DEFAULT_TOKENS;
    let tokens = steps[0]
        .tokens
        .as_ref()
        .expect("a model step records usage");
    assert_eq!(tokens["input_tokens"], input, "{}: {tokens}", A::TYPE);
    assert_eq!(tokens["output_tokens"], output, "{}: {tokens}", A::TYPE);

    let u = s.usage_of("p/m").await;
    assert_eq!(u.calls, 1, "{}: {u:?}", A::TYPE);
    assert_eq!(u.untracked_calls, 0, "{}: {u:?}", A::TYPE);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cached_tokens),
        (input, output, cached),
        "{}: {u:?}",
        A::TYPE
    );
    s.assert_no_violations();
}

/// 2. One tool call: `current_time` runs, its result goes back in the wire's
///    own format, then the model answers.
async fn one_tool_call<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.fake
        .push_tool_calls(&[("call_utc", "current_time", r#"{"timezone":"UTC"}"#)]);
    s.fake.push_text("It is noon in UTC.");
    let done = s.run("t:tool", "what time is it?").await;
    succeeded_with(&done, "It is noon in UTC.", A::TYPE);

    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2, "{}", A::TYPE);
    assert!(A::tool_results(&reqs[0]).is_empty(), "{}", A::TYPE);
    let results = A::tool_results(&reqs[1]);
    assert_eq!(results.len(), 1, "{}: {results:?}", A::TYPE);
    let expected = if A::RESULTS_BY_ID {
        "call_utc"
    } else {
        "current_time"
    };
    assert_eq!(results[0].answers, expected, "{}", A::TYPE);
    assert_eq!(results[0].output["timezone"], "UTC", "{}", A::TYPE);
    assert!(
        results[0].output["datetime"].is_string(),
        "{}: {results:?}",
        A::TYPE
    );

    let steps = s.trace(&done.run_id).await;
    assert_eq!(
        trace_shape(&steps),
        [
            step("llm", "p/m", "succeeded"),
            step("tool", "current_time", "succeeded"),
            step("llm", "p/m", "succeeded"),
        ],
        "{}",
        A::TYPE
    );
    let args: Value =
        serde_json::from_str(steps[1].payload["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"timezone": "UTC"}), "{}", A::TYPE);
    assert_eq!(s.usage_of("p/m").await.calls, 2, "{}", A::TYPE);
    s.assert_no_violations();
}

/// 3. Two tool calls in one answer: both run, both results go back together.
async fn two_parallel_tool_calls<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.fake.push_tool_calls(&[
        ("call_utc", "current_time", r#"{"timezone":"UTC"}"#),
        ("call_tokyo", "current_time", r#"{"timezone":"Asia/Tokyo"}"#),
    ]);
    s.fake.push_text("Both clocks read.");
    let done = s.run("t:par", "UTC and Tokyo?").await;
    succeeded_with(&done, "Both clocks read.", A::TYPE);

    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2, "{}", A::TYPE);
    let results = A::tool_results(&reqs[1]);
    assert_eq!(results.len(), 2, "{}: {results:?}", A::TYPE);
    let zones: Vec<&str> = results
        .iter()
        .map(|r| r.output["timezone"].as_str().unwrap())
        .collect();
    assert_eq!(zones, ["UTC", "Asia/Tokyo"], "{}", A::TYPE);
    let answers: Vec<&str> = results.iter().map(|r| r.answers.as_str()).collect();
    if A::RESULTS_BY_ID {
        assert_eq!(answers, ["call_utc", "call_tokyo"], "{}", A::TYPE);
    } else {
        assert_eq!(answers, ["current_time", "current_time"], "{}", A::TYPE);
    }

    let steps = s.trace(&done.run_id).await;
    assert_eq!(
        trace_shape(&steps),
        [
            step("llm", "p/m", "succeeded"),
            step("tool", "current_time", "succeeded"),
            step("tool", "current_time", "succeeded"),
            step("llm", "p/m", "succeeded"),
        ],
        "{}",
        A::TYPE
    );
    // Each tool step answers its own call, with its own arguments.
    let call_ids: Vec<&str> = steps[1..3]
        .iter()
        .map(|st| st.payload["call_id"].as_str().unwrap())
        .collect();
    assert_ne!(call_ids[0], call_ids[1], "{}: {call_ids:?}", A::TYPE);
    s.assert_no_violations();
}

/// 4. Thinking on: the request carries the provider's reasoning knob, the
///    reasoning streams as `thinking.delta`, is kept with its signature, and
///    the signature goes back on the next turn where the wire has a place for it.
async fn thinking_on<A: Adapter>() {
    let s = setup::<A>(false).await;
    let th =
        s.rt.set_thinking(&testing::thread("t:think"), ThinkingLevel::Low)
            .await
            .unwrap();
    assert_eq!(
        th.thinking,
        "low",
        "{}: this adapter has reasoning control",
        A::TYPE
    );
    s.fake
        .push_thinking_then_text("Let me weigh this carefully.", "Forty-two.");
    let done = s.run("t:think", "the answer?").await;
    succeeded_with(&done, "Forty-two.", A::TYPE);

    let reqs = s.fake.requests();
    assert!(
        A::asks_for_low_thinking(&reqs[0]),
        "{}: no reasoning knob at level low: {}",
        A::TYPE,
        reqs[0]
    );
    // Followers saw the reasoning as it streamed.
    let hearth_runtime::RunEvents::Live(log) = s.rt.events(&done.run_id).await.unwrap() else {
        panic!("the run's log is in memory");
    };
    let streamed: String = log
        .since(0)
        .iter()
        .filter(|e| e.kind == RunEventKind::ThinkingDelta)
        .map(|e| e.data["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(streamed, "Let me weigh this carefully.", "{}", A::TYPE);
    // The stored answer keeps the reasoning, with signature and provider.
    let history = s.store.thread_history("t:think", 50).await.unwrap();
    let assistant = history
        .iter()
        .find(|m| m.role == Role::Assistant)
        .expect("the answer is stored");
    let (text, signature, provider) = assistant
        .content
        .iter()
        .find_map(|c| match c {
            Content::Thinking {
                text,
                signature,
                provider,
            } => Some((text.clone(), signature.clone(), provider.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{}: no thinking stored: {assistant:?}", A::TYPE));
    assert_eq!(text, "Let me weigh this carefully.", "{}", A::TYPE);
    assert_eq!(signature, A::stored_signature(), "{}", A::TYPE);
    assert_eq!(provider.as_deref(), Some("p"), "{}", A::TYPE);
    assert_eq!(assistant.joined_text(), "Forty-two.", "{}", A::TYPE);

    // The next turn sends the signature back (where the wire can).
    let next = s.run("t:think", "and why?").await;
    assert_eq!(next.status, RunStatus::Succeeded, "{}", A::TYPE);
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2, "{}", A::TYPE);
    assert!(A::asks_for_low_thinking(&reqs[1]), "{}", A::TYPE);
    let expected_back = A::stored_signature().map(|_| match A::TYPE {
        "openai" => ENCRYPTED.to_owned(),
        _ => SIGNATURE.to_owned(),
    });
    assert_eq!(
        A::signature_sent_back(&reqs[1]),
        expected_back,
        "{}: {}",
        A::TYPE,
        reqs[1]
    );
    assert_eq!(
        A::user_texts(&reqs[1]),
        ["the answer?", "and why?"],
        "{}",
        A::TYPE
    );
    // Thinking off again: no knob.
    s.rt.set_thinking(&testing::thread("t:think"), ThinkingLevel::Off)
        .await
        .unwrap();
    let off = s.run("t:think", "thanks").await;
    assert_eq!(off.status, RunStatus::Succeeded, "{}", A::TYPE);
    let reqs = s.fake.requests();
    assert!(A::thinking_off(&reqs[2]), "{}: {}", A::TYPE, reqs[2]);
    s.assert_no_violations();
}

/// 4b. Thinking on, and the reasoning comes with a tool call: the follow-up
///     request of the same run must carry the signed reasoning back (Anthropic
///     refuses a continued tool turn without it when thinking is on).
async fn thinking_with_tool_call<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.rt.set_thinking(&testing::thread("t:think-tool"), ThinkingLevel::Low)
        .await
        .unwrap();
    s.fake.push_thinking_then_tool_calls(
        "I should look at the clock.",
        &[("call_utc", "current_time", r#"{"timezone":"UTC"}"#)],
    );
    s.fake.push_text("Done thinking.");
    let done = s.run("t:think-tool", "time?").await;
    succeeded_with(&done, "Done thinking.", A::TYPE);
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2, "{}", A::TYPE);
    assert!(A::asks_for_low_thinking(&reqs[0]), "{}", A::TYPE);
    assert!(
        A::asks_for_low_thinking(&reqs[1]),
        "{}: the tool turn keeps thinking on: {}",
        A::TYPE,
        reqs[1]
    );
    let expected_back = A::stored_signature().map(|_| match A::TYPE {
        "openai" => ENCRYPTED.to_owned(),
        _ => SIGNATURE.to_owned(),
    });
    assert_eq!(
        A::signature_sent_back(&reqs[1]),
        expected_back,
        "{}: {}",
        A::TYPE,
        reqs[1]
    );
    assert_eq!(A::tool_results(&reqs[1]).len(), 1, "{}", A::TYPE);
    let steps = s.trace(&done.run_id).await;
    assert_eq!(
        trace_shape(&steps),
        [
            step("llm", "p/m", "succeeded"),
            step("tool", "current_time", "succeeded"),
            step("llm", "p/m", "succeeded"),
        ],
        "{}",
        A::TYPE
    );
    s.assert_no_violations();
}

/// 5. No usage reported: the run succeeds; usage counts the call as untracked.
async fn usage_missing<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.fake.push_text_without_usage("No meter here.");
    let done = s.run("t:nousage", "hi").await;
    succeeded_with(&done, "No meter here.", A::TYPE);
    let u = s.usage_of("p/m").await;
    assert_eq!(u.calls, 1, "{}: {u:?}", A::TYPE);
    assert_eq!(u.untracked_calls, 1, "{}: {u:?}", A::TYPE);
    assert_eq!((u.input_tokens, u.output_tokens), (0, 0), "{}", A::TYPE);
    assert_eq!(u.cost_usd, None, "{}", A::TYPE);
    // The next (metered) call is tracked beside it.
    s.fake.push_text("Metered.");
    let done = s.run("t:nousage", "again").await;
    succeeded_with(&done, "Metered.", A::TYPE);
    let u = s.usage_of("p/m").await;
    assert_eq!((u.calls, u.untracked_calls), (2, 1), "{}: {u:?}", A::TYPE);
    assert_eq!(u.input_tokens, A::DEFAULT_TOKENS.0, "{}", A::TYPE);
    s.assert_no_violations();
}

/// 6. A 429 with `retry-after: 0`, then success.
async fn rate_limited_then_success<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.fake.push_http_error(429, Some("0"));
    s.fake.push_text("Made it.");
    let done = s.run("t:429", "hi").await;
    succeeded_with(&done, "Made it.", A::TYPE);
    assert_eq!(s.fake.request_count(), 2, "{}", A::TYPE);
    let steps = s.trace(&done.run_id).await;
    assert_eq!(
        trace_shape(&steps),
        [
            step("llm", "p/m", "failed"),
            step("llm", "p/m", "succeeded")
        ],
        "{}",
        A::TYPE
    );
    assert_eq!(
        steps[0].payload["error"]["kind"],
        "rate_limited",
        "{}",
        A::TYPE
    );
    let u = s.usage_of("p/m").await;
    assert_eq!(u.calls, 2, "{}: failed calls count too: {u:?}", A::TYPE);
    s.assert_no_violations();
}

/// 7. Three 500s exhaust the retries; the run fails over to `echo/echo`.
async fn server_errors_fail_over<A: Adapter>() {
    let s = setup::<A>(true).await;
    for _ in 0..3 {
        s.fake.push_http_error(500, None);
    }
    let done = s.run("t:fo", "rescue me").await;
    succeeded_with(&done, "echo: rescue me", A::TYPE);
    assert_eq!(s.fake.request_count(), 3, "{}", A::TYPE);
    let steps = s.trace(&done.run_id).await;
    assert_eq!(
        trace_shape(&steps),
        [
            step("llm", "p/m", "failed"),
            step("llm", "p/m", "failed"),
            step("llm", "p/m", "failed"),
            step("llm", "echo/echo", "succeeded"),
        ],
        "{}",
        A::TYPE
    );
    for st in &steps[..3] {
        assert_eq!(st.payload["error"]["kind"], "server", "{}", A::TYPE);
    }
    s.assert_no_violations();
}

/// 8. A stream that is not valid JSON fails the run, without retries.
async fn malformed_stream<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.fake.push_malformed();
    let done = s.run("t:bad", "hi").await;
    assert_eq!(done.status, RunStatus::Failed, "{}", A::TYPE);
    let err = done.error.unwrap();
    assert_eq!(
        err.code,
        "provider_malformed_response",
        "{}: {err:?}",
        A::TYPE
    );
    assert_eq!(s.fake.request_count(), 1, "{}: not retried", A::TYPE);
    let steps = s.trace(&done.run_id).await;
    assert_eq!(
        trace_shape(&steps),
        [step("llm", "p/m", "failed")],
        "{}",
        A::TYPE
    );
    // The thread is not stuck.
    let next = s.run("t:bad", "still there?").await;
    succeeded_with(&next, "echo: still there?", A::TYPE);
    s.assert_no_violations();
}

/// 9. Cancelling a run whose stream hangs ends it at once; the thread goes on.
async fn cancel_mid_stream<A: Adapter>() {
    let s = setup::<A>(false).await;
    s.fake.push_hang();
    let run = s.ingest("t:cancel", "hang on").await;
    s.fake.wait_for_requests(1).await;
    let t0 = Instant::now();
    let env = tokio::time::timeout(Duration::from_secs(10), s.rt.cancel(&run.run_id))
        .await
        .unwrap_or_else(|_| panic!("{}: cancel did not return", A::TYPE))
        .unwrap();
    assert_eq!(env.status, RunStatus::Cancelled, "{}", A::TYPE);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "{}: cancel took {:?}",
        A::TYPE,
        t0.elapsed()
    );
    assert_eq!(
        s.finished(&run.run_id).await.status,
        RunStatus::Cancelled,
        "{}",
        A::TYPE
    );
    let next = s.run("t:cancel", "are you back?").await;
    succeeded_with(&next, "echo: are you back?", A::TYPE);
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2, "{}", A::TYPE);
    assert_eq!(
        A::user_texts(&reqs[1]).last().map(String::as_str),
        Some("are you back?"),
        "{}",
        A::TYPE
    );
    s.assert_no_violations();
}

// ---------------------------------------------------------------------------
// One test per adapter and scenario.
// ---------------------------------------------------------------------------

macro_rules! conformance {
    ($adapter:ident: $fake:ty) => {
        mod $adapter {
            use super::*;

            #[tokio::test]
            async fn plain_answer() {
                super::plain_answer::<$fake>().await;
            }
            #[tokio::test]
            async fn one_tool_call() {
                super::one_tool_call::<$fake>().await;
            }
            #[tokio::test]
            async fn two_parallel_tool_calls() {
                super::two_parallel_tool_calls::<$fake>().await;
            }
            #[tokio::test]
            async fn thinking_on() {
                super::thinking_on::<$fake>().await;
            }
            #[tokio::test]
            async fn thinking_with_tool_call() {
                super::thinking_with_tool_call::<$fake>().await;
            }
            #[tokio::test]
            async fn usage_missing() {
                super::usage_missing::<$fake>().await;
            }
            #[tokio::test]
            async fn rate_limited_then_success() {
                super::rate_limited_then_success::<$fake>().await;
            }
            #[tokio::test]
            async fn server_errors_fail_over() {
                super::server_errors_fail_over::<$fake>().await;
            }
            #[tokio::test]
            async fn malformed_stream() {
                super::malformed_stream::<$fake>().await;
            }
            #[tokio::test]
            async fn cancel_mid_stream() {
                super::cancel_mid_stream::<$fake>().await;
            }
        }
    };
}

conformance!(openai_compat: FakeOpenAi);
conformance!(anthropic: FakeAnthropic);
conformance!(gemini: FakeGemini);
conformance!(openai: FakeResponses);
