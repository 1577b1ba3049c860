//! The Gemini adapter against the testkit's fake Gemini server.

// Helpers outside #[test] functions fail the test just as an assert would.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::time::{Duration, Instant};

use hearth_core::{
    ChatRequest, Content, FinishReason, Message, Role, StreamEvent, ThinkingLevel, ToolSpec, Usage,
};
use hearth_llm::gemini::{GeminiConfig, GeminiProvider, GeminiWire};
use hearth_llm::{Accumulator, AssistantTurn, ErrorKind, LlmError, Provider};
use hearth_testkit::fake_gemini::{FakeGemini, GeminiReply, GeminiUsage};
use serde_json::json;

use crate::harness::{assert_no_secret, events, request_for, turn_as};

const KEY: &str = "AIza-test-secret-key";
const MODEL: &str = "gemini-2.5-flash";

fn config(fake: &FakeGemini, name: &str) -> GeminiConfig {
    GeminiConfig {
        name: name.into(),
        base_url: fake.base_url(),
        api_key: Some(KEY.into()),
        api_key_env: None,
        headers: vec![("x-extra".into(), "1".into())],
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(10),
        wire: GeminiWire,
    }
}

fn provider(fake: &FakeGemini) -> GeminiProvider {
    GeminiProvider::new(config(fake, "gem"), reqwest::Client::new()).unwrap()
}

fn request(text: &str) -> ChatRequest {
    request_for(MODEL, text)
}

async fn turn(p: &GeminiProvider, req: &ChatRequest) -> Result<AssistantTurn, LlmError> {
    turn_as(p, req, "gem").await
}

fn default_usage() -> Usage {
    let u = GeminiUsage::DEFAULT;
    Usage {
        input_tokens: Some(u.prompt_tokens),
        output_tokens: Some(u.candidates_tokens),
        cached_tokens: Some(u.cached_tokens),
        reasoning_tokens: Some(u.thoughts_tokens),
        cache_write_tokens: None,
    }
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "where"},
                "opts": {"type": "object", "additionalProperties": {"type": "string"},
                         "properties": {"depth": {"type": ["integer", "null"]}}},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
            },
            "required": ["path"]
        }),
    }
}

fn call(id: &str, name: &str, args: &str) -> Content {
    Content::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn result(id: &str, output: &str) -> Content {
    Content::ToolResult {
        call_id: id.into(),
        output: output.into(),
    }
}

#[tokio::test]
async fn plain_text_answer_is_accumulated() {
    let fake = FakeGemini::start().await;
    fake.push(GeminiReply::text("Hello there, wonderful world"));
    let p = provider(&fake);
    let events = events(&p, &request("hi")).await.unwrap();
    let deltas = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
        .count();
    assert!(deltas >= 2, "{events:?}");
    let mut acc = Accumulator::new();
    events.iter().for_each(|e| acc.push(e));
    let turn = acc.finish("gem").unwrap();
    assert_eq!(turn.text(), "Hello there, wonderful world");
    assert_eq!(turn.usage, default_usage());
    assert_eq!(turn.finish_reason, Some(FinishReason::Stop));
    assert_eq!(turn.tool_calls().count(), 0);

    let body = &fake.requests()[0];
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "hi"}]}])
    );
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "be brief"}]})
    );
    assert!(body.get("tools").is_none(), "{body}");
    assert!(body.get("generationConfig").is_none(), "{body}");
    assert!(
        body.get("model").is_none(),
        "the model goes in the URL: {body}"
    );

    assert_eq!(
        fake.request_paths(),
        vec![format!(
            "/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
        )]
    );
    let headers = &fake.request_headers()[0];
    let get = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("x-goog-api-key"), Some(KEY));
    assert_eq!(get("x-extra"), Some("1"));
    assert_eq!(get("authorization"), None);
    assert_eq!(get("content-type"), Some("application/json"));
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn default_reply_echoes_the_last_user_text() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    let t = turn(&p, &request("ping pong")).await.unwrap();
    assert_eq!(t.text(), "echo: ping pong");
    assert_eq!(t.usage, default_usage());
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn one_function_call_gets_a_generated_id() {
    let fake = FakeGemini::start().await;
    fake.push(GeminiReply::function_calls(vec![(
        "read_file",
        json!({"path": "/tmp/x", "n": 2}),
    )]));
    let p = provider(&fake);
    let mut req = request("read it");
    req.tools = vec![tool("read_file")].into();
    let t = turn(&p, &req).await.unwrap();
    let calls: Vec<_> = t.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert!(
        calls[0].0.starts_with("call_") && calls[0].0.ends_with("_0"),
        "{}",
        calls[0].0
    );
    // Ids stay unique across answers, so a thread's history never repeats one.
    fake.push(GeminiReply::function_calls(vec![("read_file", json!({}))]));
    let again = turn(&p, &req).await.unwrap();
    assert_ne!(again.tool_calls().next().unwrap().0, calls[0].0);
    assert_eq!(calls[0].1, "read_file");
    let args: serde_json::Value = serde_json::from_str(calls[0].2).unwrap();
    assert_eq!(args, json!({"path": "/tmp/x", "n": 2}));
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(t.text(), "");
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn two_parallel_calls_keep_their_order() {
    let fake = FakeGemini::start().await;
    fake.push(GeminiReply::function_calls(vec![
        ("read_file", json!({"path": "a"})),
        ("list_dir", json!({})),
    ]));
    let p = provider(&fake);
    let mut req = request("both");
    req.tools = vec![tool("read_file"), tool("list_dir")].into();
    let evs = events(&p, &req).await.unwrap();
    let indices: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(indices, vec![0, 1]);
    let mut acc = Accumulator::new();
    evs.iter().for_each(|e| acc.push(e));
    let t = acc.finish("gem").unwrap();
    let calls: Vec<_> = t
        .tool_calls()
        .map(|(id, n, a)| (id.rsplit('_').next().unwrap().to_owned(), n, a))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("0".to_owned(), "read_file", "{\"path\":\"a\"}"),
            ("1".to_owned(), "list_dir", "{}")
        ]
    );
    let ids: Vec<&str> = t.tool_calls().map(|c| c.0).collect();
    assert_ne!(ids[0], ids[1]);
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn request_shape_tools_schema_and_thinking() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    for (level, budget) in [
        (ThinkingLevel::Low, 1024),
        (ThinkingLevel::Medium, 8192),
        (ThinkingLevel::High, 24576),
    ] {
        let mut req = request("go");
        req.tools = vec![tool("read_file")].into();
        req.thinking = level;
        turn(&p, &req).await.unwrap();
        let body = fake.requests().pop().unwrap();
        assert_eq!(
            body["generationConfig"],
            json!({"thinkingConfig": {"thinkingBudget": budget, "includeThoughts": true}})
        );
        assert_eq!(
            body["tools"],
            json!([{"functionDeclarations": [{
                "name": "read_file",
                "description": "the read_file tool",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "where"},
                        "opts": {"type": "object",
                                 "properties": {"depth": {"type": "integer", "nullable": true}}},
                        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
                    },
                    "required": ["path"]
                }
            }]}])
        );
        let text = body.to_string();
        assert!(!text.contains("additionalProperties"), "{text}");
        assert!(!text.contains("$schema"), "{text}");
        assert!(!text.contains("parallel_tool_calls"), "{text}");
        assert!(!text.contains("parallelToolCalls"), "{text}");
    }
    // A tool without arguments gets no parameters (Gemini refuses empty objects).
    let mut req = request("go");
    req.tools = vec![ToolSpec {
        name: "now".into(),
        description: "time".into(),
        parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
    }]
    .into();
    turn(&p, &req).await.unwrap();
    let body = fake.requests().pop().unwrap();
    assert_eq!(
        body["tools"],
        json!([{"functionDeclarations": [{"name": "now", "description": "time"}]}])
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

fn thinking_history(provider: &str, first_text: &str) -> ChatRequest {
    let mut req = request(first_text);
    req.tools = vec![tool("read_file")].into();
    req.messages.push(Message {
        role: Role::Assistant,
        content: vec![
            Content::Thinking {
                text: "I should read it".into(),
                signature: Some("c2lnLTE=".into()),
                provider: Some(provider.into()),
            },
            Content::Text {
                text: "Reading.".into(),
            },
            call("call_0", "read_file", "{\"path\":\"a\"}"),
            call("call_1", "read_file", "not json"),
        ],
    });
    req.messages.push(Message {
        role: Role::Tool,
        content: vec![
            result("call_0", "{\"content\":\"A\"}"),
            result("call_1", "plain text output"),
        ],
    });
    req
}

#[tokio::test]
async fn thought_and_signature_accumulate_and_go_back_to_the_same_provider_only() {
    let fake = FakeGemini::start().await;
    fake.push(
        GeminiReply::function_calls(vec![("read_file", json!({"path": "a"}))])
            .with_thought("Let me think about it")
            .with_thought_signature("c2lnLTE="),
    );
    let p = provider(&fake);
    let mut req = request("read a");
    req.tools = vec![tool("read_file")].into();
    req.thinking = ThinkingLevel::Medium;
    let evs = events(&p, &req).await.unwrap();
    assert!(
        evs.iter().any(|e| matches!(e, StreamEvent::ThinkingDelta { text, signature: None } if !text.is_empty())),
        "{evs:?}"
    );
    assert!(evs.contains(&StreamEvent::ThinkingDelta {
        text: String::new(),
        signature: Some("c2lnLTE=".into()),
    }));
    let mut acc = Accumulator::new();
    evs.iter().for_each(|e| acc.push(e));
    let t = acc.finish("gem").unwrap();
    assert_eq!(
        t.message.content[0],
        Content::Thinking {
            text: "Let me think about it".into(),
            signature: Some("c2lnLTE=".into()),
            provider: Some("gem".into()),
        }
    );

    // Next turn: the accumulated message goes back with its signature.
    let first_call_id = t.tool_calls().next().unwrap().0.to_owned();
    req.messages.push(t.message.clone());
    req.messages.push(Message {
        role: Role::Tool,
        content: vec![result(&first_call_id, "{\"content\":\"A\"}")],
    });
    turn(&p, &req).await.unwrap();
    let body = fake.requests().pop().unwrap();
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"functionCall": {"name": "read_file", "args": {"path": "a"}},
             "thoughtSignature": "c2lnLTE="}
        ]})
    );
    assert!(
        !body.to_string().contains("Let me think"),
        "thought text sent back"
    );

    // A text part before the call: the signature still goes on the call.
    turn(&p, &thinking_history("gem", "again")).await.unwrap();
    let body = fake.requests().pop().unwrap();
    let parts = body["contents"][1]["parts"].as_array().unwrap().clone();
    assert_eq!(parts[0], json!({"text": "Reading."}));
    assert_eq!(parts[1]["thoughtSignature"], "c2lnLTE=");
    assert!(parts[2].get("thoughtSignature").is_none());
    assert!(!body.to_string().contains("I should read it"));

    // Another provider's signature is dropped.
    turn(&p, &thinking_history("other-provider", "again"))
        .await
        .unwrap();
    let body = fake.requests().pop().unwrap();
    assert!(!body.to_string().contains("thoughtSignature"), "{body}");
    assert!(!body.to_string().contains("c2lnLTE="), "{body}");

    // A text-only answer's signature goes on its first part.
    let mut req = request("hello");
    req.messages.push(Message {
        role: Role::Assistant,
        content: vec![
            Content::Thinking {
                text: String::new(),
                signature: Some("dGV4dA==".into()),
                provider: Some("gem".into()),
            },
            Content::Text { text: "Hi!".into() },
        ],
    });
    req.messages.push(Message::text(Role::User, "more"));
    turn(&p, &req).await.unwrap();
    let body = fake.requests().pop().unwrap();
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [{"text": "Hi!", "thoughtSignature": "dGV4dA=="}]})
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn history_with_tool_results_uses_function_names() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    let mut req = thinking_history("gem", "first");
    // A second round whose ids restart at call_0, as Gemini ids do.
    req.messages.push(Message {
        role: Role::Assistant,
        content: vec![call("call_0", "list_dir", "{}")],
    });
    req.messages.push(Message {
        role: Role::Tool,
        content: vec![result("call_0", "[1,2]")],
    });
    req.messages.push(Message::text(Role::User, "and now?"));
    req.tools = [req.tools.to_vec(), vec![tool("list_dir")]].concat().into();
    let t = turn(&p, &req).await.unwrap();
    assert_eq!(t.text(), "echo: and now?");
    let body = &fake.requests()[0];
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 5, "{body}");
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "read_file", "response": {"content": "A"}}},
            {"functionResponse": {"name": "read_file", "response": {"result": "plain text output"}}}
        ]})
    );
    assert_eq!(
        contents[1]["parts"][2],
        json!({"functionCall": {"name": "read_file", "args": {}}})
    );
    assert_eq!(
        contents[3],
        json!({"role": "model", "parts": [{"functionCall": {"name": "list_dir", "args": {}}}]})
    );
    // The result and the next user text share one user turn.
    assert_eq!(
        contents[4],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "list_dir", "response": {"result": [1, 2]}}},
            {"text": "and now?"}
        ]})
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());

    // A result answering no call cannot be named: refused before sending.
    let mut bad = request("x");
    bad.messages.push(Message {
        role: Role::Tool,
        content: vec![result("call_9", "{}")],
    });
    let err = p.stream(&bad).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::InvalidRequest);
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn usage_maps_cached_and_thoughts() {
    let fake = FakeGemini::start().await;
    fake.push(GeminiReply::text("ok").with_usage(100, 20, 60, 15));
    let p = provider(&fake);
    let t = turn(&p, &request("hi")).await.unwrap();
    assert_eq!(
        t.usage,
        Usage {
            input_tokens: Some(100),
            output_tokens: Some(20),
            cached_tokens: Some(60),
            reasoning_tokens: Some(15),
            cache_write_tokens: None,
        }
    );
    // Usage is reported once, right before Finish.
    fake.push(GeminiReply::text("a longer answer here").with_usage(5, 6, 0, 0));
    let evs = events(&p, &request("hi")).await.unwrap();
    let usages: Vec<_> = evs
        .iter()
        .filter(|e| matches!(e, StreamEvent::Usage(_)))
        .collect();
    assert_eq!(usages.len(), 1, "{evs:?}");
    assert!(matches!(evs[evs.len() - 2], StreamEvent::Usage(_)));
    fake.push(GeminiReply::text("none").without_usage());
    let t = turn(&p, &request("hi")).await.unwrap();
    assert!(t.usage.is_untracked());
}

#[tokio::test]
async fn finish_reasons_map() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    for (raw, want) in [
        ("SAFETY", FinishReason::ContentFilter),
        ("RECITATION", FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", FinishReason::ContentFilter),
        ("MAX_TOKENS", FinishReason::Length),
        (
            "MALFORMED_FUNCTION_CALL",
            FinishReason::Other("malformed_function_call".into()),
        ),
        ("LANGUAGE", FinishReason::Other("language".into())),
    ] {
        fake.push(GeminiReply::text("partial").with_finish_reason(raw));
        let t = turn(&p, &request("hi")).await.unwrap();
        assert_eq!(t.finish_reason, Some(want), "{raw}");
    }
}

#[tokio::test]
async fn prompt_block_and_stream_errors_are_error_items() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    fake.push(GeminiReply::raw_sse(
        "data: {\"promptFeedback\": {\"blockReason\": \"SAFETY\"}, \"usageMetadata\": {\"promptTokenCount\": 4}}\r\n\r\n",
    ));
    let err = events(&p, &request("hi")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::ContentFilter);
    assert!(err.message.contains("SAFETY"), "{err}");

    fake.push(GeminiReply::raw_sse(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}]}}]}\r\n\r\n\
         data: {\"error\": {\"code\": 503, \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}\r\n\r\n",
    ));
    let err = events(&p, &request("hi")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Overloaded);
    assert!(err.message.contains("The model is overloaded."), "{err}");
    assert_no_secret(&err, KEY);
}

#[tokio::test]
async fn http_errors_map_to_kinds() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    let google = |code: u16, status: &str, msg: &str| json!({"error": {"code": code, "message": msg, "status": status}});
    let cases = [
        (
            GeminiReply::http_error(
                400,
                google(400, "INVALID_ARGUMENT", "Invalid value at 'contents'"),
            ),
            ErrorKind::InvalidRequest,
        ),
        (
            GeminiReply::http_error(
                400,
                google(
                    400,
                    "INVALID_ARGUMENT",
                    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                ),
            ),
            ErrorKind::ContextLength,
        ),
        (
            GeminiReply::http_error(
                400,
                json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}),
            ),
            ErrorKind::Auth,
        ),
        (
            GeminiReply::http_error(401, google(401, "UNAUTHENTICATED", "no creds")),
            ErrorKind::Auth,
        ),
        (
            GeminiReply::http_error(403, google(403, "PERMISSION_DENIED", "denied")),
            ErrorKind::Auth,
        ),
        (
            GeminiReply::http_error(404, google(404, "NOT_FOUND", "models/x is not found")),
            ErrorKind::NotFound,
        ),
        (
            GeminiReply::http_error(503, google(503, "UNAVAILABLE", "The model is overloaded.")),
            ErrorKind::Overloaded,
        ),
        (
            GeminiReply::http_error(500, google(500, "INTERNAL", "oops")),
            ErrorKind::Server,
        ),
    ];
    for (reply, kind) in cases {
        fake.push(reply);
        let err = p.stream(&request("hi")).await.err().unwrap();
        assert_eq!(err.kind, kind, "{err}");
        assert!(err.message.starts_with("HTTP "), "{err}");
        assert_eq!(err.provider, "gem");
        assert_no_secret(&err, KEY);
    }

    fake.push(
        GeminiReply::http_error(429, google(429, "RESOURCE_EXHAUSTED", "Quota exceeded"))
            .with_header("retry-after", "7"),
    );
    let err = p.stream(&request("hi")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::RateLimited);
    assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
    assert!(err.message.contains("429"), "{err}");
    assert!(err.message.contains("RESOURCE_EXHAUSTED"), "{err}");
    assert!(err.message.contains("Quota exceeded"), "{err}");
    assert!(err.is_retryable());

    // Without the header, Gemini's RetryInfo detail gives the delay.
    fake.push(GeminiReply::http_error(
        429,
        json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}),
    ));
    let err = p.stream(&request("hi")).await.err().unwrap();
    assert_eq!(err.retry_after, Some(Duration::from_secs(37)));

    // An unknown route answers the fake's own 404.
    let bad = GeminiProvider::new(
        GeminiConfig {
            base_url: format!("http://{}/v1", fake.addr()),
            ..config(&fake, "gem")
        },
        reqwest::Client::new(),
    )
    .unwrap();
    let err = bad.stream(&request("hi")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::NotFound);
}

#[tokio::test]
async fn malformed_json_is_malformed_response() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    fake.push(GeminiReply::raw_sse(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"secret model output\"}]}}]}\r\n\r\n\
         data: {\"candidates\": [ not json secret model output\r\n\r\n",
    ));
    let err = events(&p, &request("hi")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(!err.message.contains("secret model output"), "{err}");
}

#[tokio::test]
async fn stream_without_finish_reason_is_malformed() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    fake.push(GeminiReply::raw_sse(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"cut\"}], \"role\": \"model\"}}]}\r\n\r\n",
    ));
    let err = events(&p, &request("hi")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(err.message.contains("finishReason"), "{err}");

    // A last event without its blank line still completes the answer.
    fake.push(GeminiReply::raw_sse(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"whole\"}]}, \"finishReason\": \"STOP\"}]}",
    ));
    let t = turn(&p, &request("hi")).await.unwrap();
    assert_eq!(t.text(), "whole");
    assert_eq!(t.finish_reason, Some(FinishReason::Stop));
}

#[tokio::test]
async fn idle_timeout_is_a_timeout() {
    let fake = FakeGemini::start().await;
    let cfg = GeminiConfig {
        idle_timeout: Duration::from_millis(200),
        ..config(&fake, "gem")
    };
    let p = GeminiProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(GeminiReply::hang());
    let started = Instant::now();
    let err = events(&p, &request("hi")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(started.elapsed() < Duration::from_secs(5));

    // Slow but steady chunks are fine.
    fake.push(GeminiReply::text("one two three").with_chunk_delay(Duration::from_millis(50)));
    let t = turn(&p, &request("hi")).await.unwrap();
    assert_eq!(t.text(), "one two three");

    // A request timeout covers the wait for headers.
    let cfg = GeminiConfig {
        request_timeout: Duration::from_millis(200),
        ..config(&fake, "gem")
    };
    let p = GeminiProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(GeminiReply::text("late").with_delay(Duration::from_secs(3)));
    let err = p.stream(&request("hi")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Timeout);
}

/// A real-looking Gemini stream with CRLF framing: thought, signature-bearing
/// text, a call, usage on every chunk.
const CRLF_STREAM: &str = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Plan: héllo 🌍\",\"thought\": true}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"totalTokenCount\": 9},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"r1\"}\r\n\r\n\
data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Answer ü \",\"thoughtSignature\": \"U0lH\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"totalTokenCount\": 9},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"r1\"}\r\n\r\n\
data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"read_file\",\"args\": {\"path\": \"ö\"}}}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 4,\"totalTokenCount\": 20,\"thoughtsTokenCount\": 7},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"r1\"}\r\n\r\n";

/// Generated call ids differ per answer; compare them by their index suffix.
fn normalise_ids(evs: Vec<StreamEvent>) -> Vec<StreamEvent> {
    evs.into_iter()
        .map(|e| match e {
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => StreamEvent::ToolCallDelta {
                index,
                id: id.map(|i| format!("call_{}", i.rsplit('_').next().unwrap())),
                name,
                arguments,
            },
            other => other,
        })
        .collect()
}

#[tokio::test]
async fn crlf_framing_split_at_awkward_bytes() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    let bytes = CRLF_STREAM.as_bytes();
    let expected = {
        fake.push(GeminiReply::raw_sse(CRLF_STREAM));
        normalise_ids(events(&p, &request("hi")).await.unwrap())
    };
    assert_eq!(
        expected,
        vec![
            StreamEvent::ThinkingDelta {
                text: "Plan: héllo 🌍".into(),
                signature: None
            },
            StreamEvent::TextDelta("Answer ü ".into()),
            StreamEvent::ThinkingDelta {
                text: String::new(),
                signature: Some("U0lH".into())
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("call_0".into()),
                name: Some("read_file".into()),
                arguments: "{\"path\":\"ö\"}".into(),
            },
            StreamEvent::Usage(Usage {
                input_tokens: Some(9),
                output_tokens: Some(4),
                cached_tokens: None,
                reasoning_tokens: Some(7),
                cache_write_tokens: None,
            }),
            StreamEvent::Finish(FinishReason::ToolCalls),
        ]
    );
    // Split between every \r and its \n, inside every multi-byte character,
    // and every 7 bytes, the halves sent as separate writes.
    let cuts = (1..bytes.len()).step_by(7).chain(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\r' || **b >= 0x80)
            .map(|(i, _)| i + 1),
    );
    for cut in cuts {
        let (a, b) = bytes.split_at(cut);
        fake.push(
            GeminiReply::raw_chunks(vec![a.to_vec(), b.to_vec()])
                .with_chunk_delay(Duration::from_millis(2)),
        );
        let got = normalise_ids(events(&p, &request("hi")).await.unwrap());
        assert_eq!(got, expected, "split at {cut}");
    }
    // One byte per write.
    fake.push(
        GeminiReply::raw_chunks(bytes.iter().map(|b| vec![*b]).collect())
            .with_chunk_delay(Duration::from_micros(100)),
    );
    assert_eq!(
        normalise_ids(events(&p, &request("hi")).await.unwrap()),
        expected
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn max_output_tokens_goes_in_the_generation_config() {
    let fake = FakeGemini::start().await;
    let p = provider(&fake);
    let mut req = request("hi");
    req.max_output_tokens = Some(321);
    turn(&p, &req).await.unwrap();
    req.thinking = ThinkingLevel::Low;
    turn(&p, &req).await.unwrap();
    let sent = fake.requests();
    assert_eq!(sent[0]["generationConfig"], json!({"maxOutputTokens": 321}));
    assert_eq!(sent[1]["generationConfig"]["maxOutputTokens"], 321);
    assert!(sent[1]["generationConfig"]["thinkingConfig"].is_object());
}
