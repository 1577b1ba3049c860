//! The Anthropic adapter against the testkit's fake Messages API server.

// Helpers outside #[test] functions fail the test just as an assert would.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::time::{Duration, Instant};

use hearth_core::{
    ChatRequest, Content, FinishReason, Message, Role, StreamEvent, ThinkingLevel, Usage,
};
use hearth_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use hearth_llm::{AssistantTurn, ErrorKind, LlmError, Provider};
use hearth_testkit::fake_anthropic::{AnthropicReply, AnthropicUsage, FakeAnthropic};
use serde_json::json;

use crate::harness::{
    accumulate, assert_no_secret, error_after, events, header, request_for, tool, turn_as,
};

const KEY: &str = "sk-ant-test-secret-key";
const NAME: &str = "claude";

fn config(fake: &FakeAnthropic) -> AnthropicConfig {
    let mut cfg = AnthropicConfig::new(NAME, fake.base_url());
    cfg.api_key = Some(KEY.into());
    cfg.request_timeout = Duration::from_secs(10);
    cfg.idle_timeout = Duration::from_secs(10);
    cfg
}

fn provider(fake: &FakeAnthropic) -> AnthropicProvider {
    AnthropicProvider::new(config(fake), reqwest::Client::new()).unwrap()
}

fn request(text: &str) -> ChatRequest {
    request_for("claude-test", text)
}

async fn turn(p: &AnthropicProvider, req: &ChatRequest) -> Result<AssistantTurn, LlmError> {
    turn_as(p, req, NAME).await
}

fn default_usage() -> Usage {
    let u = AnthropicUsage::DEFAULT;
    Usage {
        input_tokens: Some(u.input_tokens),
        output_tokens: Some(u.output_tokens),
        cached_tokens: Some(u.cache_read_input_tokens),
        reasoning_tokens: None,
        cache_write_tokens: Some(u.cache_creation_input_tokens),
    }
}

#[tokio::test]
async fn plain_text_answer_and_request_shape() {
    let fake = FakeAnthropic::start().await;
    fake.push(AnthropicReply::text("Hello there, wonderful world"));
    let mut cfg = config(&fake);
    cfg.headers = vec![("anthropic-beta".into(), "some-beta-2025".into())];
    assert!(!format!("{cfg:?}").contains(KEY));
    let p = AnthropicProvider::new(cfg, reqwest::Client::new()).unwrap();
    assert!(!format!("{p:?}").contains(KEY));
    let evs = events(&p, &request("hi")).await.unwrap();
    let deltas = evs
        .iter()
        .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
        .count();
    assert!(deltas >= 2, "{evs:?}");
    let t = accumulate(&evs, NAME);
    assert_eq!(t.text(), "Hello there, wonderful world");
    assert_eq!(t.usage, default_usage());
    assert_eq!(t.finish_reason, Some(FinishReason::Stop));
    assert_eq!(t.tool_calls().count(), 0);

    let body = &fake.requests()[0];
    assert_eq!(
        *body,
        json!({
            "model": "claude-test",
            "max_tokens": 8192,
            "stream": true,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
        })
    );
    let headers = &fake.request_headers()[0];
    assert_eq!(header(headers, "x-api-key"), Some(KEY));
    assert_eq!(header(headers, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(headers, "content-type"), Some("application/json"));
    assert_eq!(header(headers, "anthropic-beta"), Some("some-beta-2025"));
    assert!(header(headers, "authorization").is_none());
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn default_reply_echoes_last_user_text() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    let mut req = request("first");
    req.system.clear();
    req.messages.push(Message::text(Role::Assistant, "ok"));
    req.messages
        .push(Message::text(Role::User, "héllo \"there\""));
    let t = turn(&p, &req).await.unwrap();
    assert_eq!(t.text(), "echo: héllo \"there\"");
    assert_eq!(t.usage, default_usage());
    assert!(fake.requests()[0].get("system").is_none());

    fake.set_default_delay(Duration::from_millis(50));
    let started = Instant::now();
    turn(&p, &request("x")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(50));
    fake.wait_for_requests(2).await;
    assert_eq!(fake.request_count(), 2);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn one_tool_call_and_cache_control_on_last_tool() {
    let fake = FakeAnthropic::start().await;
    fake.push(AnthropicReply::tool_uses(vec![(
        "toolu_01abc",
        "read_file",
        r#"{"path":"/tmp/notes.txt"}"#,
    )]));
    let mut req = request("read it");
    req.tools = vec![tool("list_dir"), tool("read_file")].into();
    let t = turn(&provider(&fake), &req).await.unwrap();
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        t.tool_calls().collect::<Vec<_>>(),
        vec![("toolu_01abc", "read_file", r#"{"path":"/tmp/notes.txt"}"#)]
    );
    assert_eq!(t.text(), "");
    let body = &fake.requests()[0];
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    assert_eq!(
        body["tools"],
        json!([
            {"name": "list_dir", "description": "The list_dir tool", "input_schema": schema},
            {"name": "read_file", "description": "The read_file tool", "input_schema": schema,
             "cache_control": {"type": "ephemeral"}}
        ])
    );
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[tokio::test]
async fn parallel_tool_calls_with_split_json_are_numbered_from_zero() {
    let fake = FakeAnthropic::start().await;
    fake.push(
        AnthropicReply::tool_uses(vec![
            (
                "toolu_1",
                "get_weather",
                r#"{"city":"Zürich","unit":"celsius","note":"say \"hi\""}"#,
            ),
            ("toolu_2", "get_time", r#"{"tz":"Europe/Zurich"}"#),
        ])
        .with_text("Let me check both."),
    );
    let evs = events(&provider(&fake), &request("weather and time"))
        .await
        .unwrap();
    let mut indexes = Vec::new();
    let mut fragments = 0;
    for e in &evs {
        if let StreamEvent::ToolCallDelta {
            index, arguments, ..
        } = e
        {
            indexes.push(*index);
            if !arguments.is_empty() {
                fragments += 1;
            }
        }
    }
    // Content blocks 1 and 2 (after the text block) are calls 0 and 1.
    assert!(indexes.iter().all(|i| *i < 2), "{indexes:?}");
    assert!(indexes.contains(&0) && indexes.contains(&1));
    assert!(fragments >= 8, "arguments should arrive split: {evs:?}");
    let t = accumulate(&evs, NAME);
    assert_eq!(t.text(), "Let me check both.");
    assert_eq!(
        t.tool_calls().collect::<Vec<_>>(),
        vec![
            (
                "toolu_1",
                "get_weather",
                r#"{"city":"Zürich","unit":"celsius","note":"say \"hi\""}"#
            ),
            ("toolu_2", "get_time", r#"{"tz":"Europe/Zurich"}"#),
        ]
    );
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn thinking_is_signed_and_returned_only_to_its_provider() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    fake.push(
        AnthropicReply::tool_uses(vec![("toolu_9", "ls", r#"{"path":"/"}"#)])
            .with_thinking("I should list the root directory.", "EqQBsig=="),
    );
    let mut req = request("what is in /?");
    req.tools = vec![tool("ls")].into();
    req.thinking = ThinkingLevel::Medium;
    let evs = events(&p, &req).await.unwrap();
    let thinking_deltas = evs
        .iter()
        .filter(|e| {
            matches!(
                e,
                StreamEvent::ThinkingDelta {
                    signature: None,
                    ..
                }
            )
        })
        .count();
    assert!(thinking_deltas >= 2, "{evs:?}");
    let t = accumulate(&evs, NAME);
    let thinking = Content::Thinking {
        text: "I should list the root directory.".into(),
        signature: Some("EqQBsig==".into()),
        provider: Some(NAME.into()),
    };
    assert_eq!(t.message.content[0], thinking);
    let sent = &fake.requests()[0];
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(sent["max_tokens"], 8192 + 4096);

    // Next turn: the signed block goes back first in the assistant message.
    let mut next = req.clone();
    next.messages.push(t.message.clone());
    next.messages.push(Message {
        role: Role::Tool,
        content: vec![Content::ToolResult {
            call_id: "toolu_9".into(),
            output: r#"{"files":["etc"]}"#.into(),
        }],
    });
    turn(&p, &next).await.unwrap();
    let sent = &fake.requests()[1];
    assert_eq!(
        sent["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should list the root directory.", "signature": "EqQBsig=="},
            {"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {"path": "/"}}
        ]})
    );
    assert_eq!(
        sent["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "{\"files\":[\"etc\"]}"}
        ]})
    );

    // Another configured provider (a model switch) gets no thinking block,
    // and neither does one whose block is unsigned.
    let mut other_cfg = config(&fake);
    other_cfg.name = "claude-backup".into();
    let other = AnthropicProvider::new(other_cfg, reqwest::Client::new()).unwrap();
    turn(&other, &next).await.unwrap();
    let mut unsigned = next.clone();
    unsigned.messages[1].content[0] = Content::Thinking {
        text: "x".into(),
        signature: None,
        provider: Some(NAME.into()),
    };
    turn(&p, &unsigned).await.unwrap();
    assert!(fake.requests()[1]["thinking"].is_object());
    for sent in &fake.requests()[2..] {
        let content = sent["messages"][1]["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "{content:?}");
        assert_eq!(content[0]["type"], "tool_use");
        // Without a block to send back, the API would refuse thinking on
        // this continued tool turn, so it is off for this one request.
        assert!(sent.get("thinking").is_none(), "{sent}");
        assert_eq!(sent["max_tokens"], 8192);
    }
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn cache_usage_fields_are_mapped() {
    let fake = FakeAnthropic::start().await;
    fake.push(AnthropicReply::text("cached").with_usage(1200, 40, 1024, 150));
    let evs = events(&provider(&fake), &request("x")).await.unwrap();
    let usages: Vec<&Usage> = evs
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Usage(u) => Some(u),
            _ => None,
        })
        .collect();
    // message_start reports the input side, message_delta the output count.
    // input_tokens is every prompt token: 1200 uncached + 1024 read + 150 written.
    assert_eq!(usages.len(), 2, "{evs:?}");
    assert_eq!(usages[0].input_tokens, Some(2374));
    assert_eq!(usages[1].output_tokens, Some(40));
    assert_eq!(
        accumulate(&evs, NAME).usage,
        Usage {
            input_tokens: Some(2374),
            output_tokens: Some(40),
            cached_tokens: Some(1024),
            reasoning_tokens: None,
            cache_write_tokens: Some(150),
        }
    );
}

#[tokio::test]
async fn stop_reasons_map_to_finish_reasons() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    for (reason, expected) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
    ] {
        fake.push(AnthropicReply::text("a b").with_stop_reason(reason));
        let t = turn(&p, &request("x")).await.unwrap();
        assert_eq!(t.finish_reason, Some(expected), "{reason}");
    }
}

#[tokio::test]
async fn http_errors_map_to_kinds() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    let cases = [
        (
            401,
            "authentication_error",
            "invalid x-api-key",
            ErrorKind::Auth,
        ),
        (403, "permission_error", "not allowed", ErrorKind::Auth),
        (
            404,
            "not_found_error",
            "model: claude-nope",
            ErrorKind::NotFound,
        ),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            ErrorKind::ContextLength,
        ),
        (
            400,
            "invalid_request_error",
            "messages: roles must alternate",
            ErrorKind::InvalidRequest,
        ),
        (
            413,
            "request_too_large",
            "too big",
            ErrorKind::InvalidRequest,
        ),
        (500, "api_error", "internal", ErrorKind::Server),
        (529, "overloaded_error", "Overloaded", ErrorKind::Overloaded),
        (503, "overloaded_error", "Overloaded", ErrorKind::Overloaded),
    ];
    for (status, kind_name, message, kind) in cases {
        fake.push(AnthropicReply::api_error(status, kind_name, message));
        let err = p.stream(&request("x")).await.err().unwrap();
        assert_eq!(err.kind, kind, "{status} {message}");
        assert_eq!(err.provider, NAME);
        assert!(err.message.contains(&status.to_string()), "{}", err.message);
        assert!(err.message.contains(message), "{}", err.message);
        assert_eq!(err.retry_after, None);
        assert_no_secret(&err, KEY);
    }

    fake.push(
        AnthropicReply::api_error(429, "rate_limit_error", "slow down")
            .with_header("retry-after", "7"),
    );
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::RateLimited);
    assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
    assert!(err.is_retryable());
    assert!(err.message.contains("slow down"));

    // A body that is not Anthropic's shape still yields the status.
    fake.push(AnthropicReply::http_error(502, json!("bad gateway")));
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Server);
    assert!(err.message.contains("502"));
}

#[tokio::test]
async fn mid_stream_error_event_is_the_last_item() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    for (kind_name, kind) in [
        ("overloaded_error", ErrorKind::Overloaded),
        ("rate_limit_error", ErrorKind::RateLimited),
        ("api_error", ErrorKind::Server),
        ("invalid_request_error", ErrorKind::InvalidRequest),
        ("authentication_error", ErrorKind::Auth),
        ("something_new", ErrorKind::Server),
    ] {
        fake.push(AnthropicReply::stream_error(
            kind_name,
            "Overloaded right now",
        ));
        let (evs, err) = error_after(&p, &request("x")).await;
        assert_eq!(err.kind, kind, "{kind_name}");
        assert!(
            err.message.contains("Overloaded right now"),
            "{}",
            err.message
        );
        let text: String = evs
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Partial answer");
        assert!(!evs.iter().any(|e| matches!(e, StreamEvent::Finish(_))));
    }
}

#[tokio::test]
async fn stream_cut_before_message_stop_is_malformed() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    // Even a stop_reason is not enough: only message_stop completes the answer.
    fake.push(AnthropicReply::raw_sse(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"partial\"}}\n\n\
         event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
    ));
    let (evs, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(err.message.contains("message_stop"), "{}", err.message);
    assert!(evs.contains(&StreamEvent::TextDelta("partial".into())));

    // Cut in the middle of an event.
    fake.push(AnthropicReply::raw_sse(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_del",
    ));
    let (_, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
}

#[tokio::test]
async fn malformed_json_is_an_error_item_that_quotes_nothing() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    fake.push(AnthropicReply::raw_sse(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"secret output\"\n\n",
    ));
    let (evs, err) = error_after(&p, &request("x")).await;
    assert!(evs.is_empty(), "{evs:?}");
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(!err.message.contains("secret output"), "{}", err.message);

    // A field of the wrong type is malformed too.
    fake.push(AnthropicReply::raw_sse(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":[\"secret output\"]}}\n\n",
    ));
    let (_, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(!err.message.contains("secret output"), "{}", err.message);

    // Unknown event types and pings are ignored.
    fake.push(AnthropicReply::raw_sse(
        "event: ping\ndata: {\"type\": \"ping\"}\n\n\
         event: brand_new\ndata: {\"type\":\"brand_new\",\"x\":1}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n\
         event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ));
    assert_eq!(
        events(&p, &request("x")).await.unwrap(),
        vec![
            StreamEvent::TextDelta("ok".into()),
            StreamEvent::Finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn non_sse_content_type_is_malformed() {
    let fake = FakeAnthropic::start().await;
    fake.push(AnthropicReply::http_error(200, json!({"type": "message"})));
    let err = provider(&fake).stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(err.message.contains("application/json"), "{}", err.message);
}

#[tokio::test]
async fn idle_timeout_on_a_hanging_stream() {
    let fake = FakeAnthropic::start().await;
    let mut cfg = config(&fake);
    cfg.idle_timeout = Duration::from_millis(200);
    let p = AnthropicProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(AnthropicReply::hang());
    let started = Instant::now();
    let (_, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(started.elapsed() < Duration::from_secs(5));

    // Events arriving within the idle timeout keep the stream alive.
    fake.push(AnthropicReply::text("slow but steady").with_chunk_delay(Duration::from_millis(40)));
    assert_eq!(
        turn(&p, &request("x")).await.unwrap().text(),
        "slow but steady"
    );
}

#[tokio::test]
async fn request_timeout_and_connection_refused() {
    let fake = FakeAnthropic::start().await;
    let mut cfg = config(&fake);
    cfg.request_timeout = Duration::from_millis(100);
    let p = AnthropicProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(AnthropicReply::text("late").with_delay(Duration::from_secs(3)));
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Timeout);

    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut cfg = AnthropicConfig::new("down", format!("http://{addr}"));
    cfg.api_key = Some(KEY.into());
    let p = AnthropicProvider::new(cfg, reqwest::Client::new()).unwrap();
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Network);
    assert_eq!(err.provider, "down");
    assert_no_secret(&err, KEY);
}

#[tokio::test]
async fn history_is_converted_with_alternation_and_merged_results() {
    let fake = FakeAnthropic::start().await;
    let req = ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![
            Message::text(Role::User, "what is in /tmp?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    // From another provider: never sent here.
                    Content::Thinking {
                        text: "I should look".into(),
                        signature: Some("foreign-sig".into()),
                        provider: Some("openai".into()),
                    },
                    Content::Text {
                        text: "Let me check.".into(),
                    },
                    Content::ToolCall {
                        id: "call_1".into(),
                        name: "ls".into(),
                        arguments: r#"{"path":"/tmp"}"#.into(),
                    },
                    Content::ToolCall {
                        id: "call_2".into(),
                        name: "du".into(),
                        arguments: "not json".into(),
                    },
                ],
            },
            Message {
                role: Role::Tool,
                content: vec![
                    Content::ToolResult {
                        call_id: "call_1".into(),
                        output: r#"{"files":["a"]}"#.into(),
                    },
                    Content::ToolResult {
                        call_id: "call_2".into(),
                        output: r#"{"error":"denied"}"#.into(),
                    },
                ],
            },
            // A user message right after the results joins their message.
            Message::text(Role::User, "also, hurry"),
            Message {
                role: Role::Assistant,
                content: vec![Content::ToolCall {
                    id: "call_3".into(),
                    name: "cat".into(),
                    arguments: r#"{"path":"/tmp/a"}"#.into(),
                }],
            },
            Message {
                role: Role::Tool,
                content: vec![Content::ToolResult {
                    call_id: "call_3".into(),
                    output: r#"{"text":"hi"}"#.into(),
                }],
            },
            Message::text(Role::Assistant, "It says hi."),
            Message::text(Role::Assistant, "Anything else?"),
            Message {
                role: Role::User,
                content: vec![
                    Content::Text {
                        text: "thanks, ".into(),
                    },
                    Content::Text { text: "bye".into() },
                ],
            },
        ],
        tools: Default::default(),
        thinking: ThinkingLevel::Off,
        max_output_tokens: None,
    };
    let t = turn(&provider(&fake), &req).await.unwrap();
    assert_eq!(t.text(), "echo: bye");
    let body = &fake.requests()[0];
    assert!(body.get("thinking").is_none());
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "what is in /tmp?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "call_1", "name": "ls", "input": {"path": "/tmp"}},
                {"type": "tool_use", "id": "call_2", "name": "du", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "{\"files\":[\"a\"]}"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "{\"error\":\"denied\"}"},
                {"type": "text", "text": "also, hurry"}
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_3", "name": "cat", "input": {"path": "/tmp/a"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_3", "content": "{\"text\":\"hi\"}"}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "It says hi."},
                {"type": "text", "text": "Anything else?"}
            ]},
            {"role": "user", "content": [
                {"type": "text", "text": "thanks, "},
                {"type": "text", "text": "bye"}
            ]}
        ])
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn fake_flags_broken_requests() {
    let fake = FakeAnthropic::start().await;
    // No key configured: the header is missing.
    let mut cfg = config(&fake);
    cfg.api_key = None;
    let p = AnthropicProvider::new(cfg, reqwest::Client::new()).unwrap();
    let req = ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![
            Message::text(Role::User, "hi"),
            Message {
                role: Role::Tool,
                content: vec![Content::ToolResult {
                    call_id: "nobody_called_me".into(),
                    output: "{}".into(),
                }],
            },
        ],
        tools: Default::default(),
        thinking: ThinkingLevel::Off,
        max_output_tokens: None,
    };
    // Refused as the API refuses it: the missing key first.
    let err = turn(&p, &req).await.unwrap_err();
    assert_eq!(err.kind, hearth_llm::ErrorKind::Auth, "{err:?}");
    let v = fake.violations();
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v.iter().any(|s| s.contains("x-api-key")), "{v:?}");
    assert!(v.iter().any(|s| s.contains("nobody_called_me")), "{v:?}");
}

#[tokio::test]
async fn concurrent_requests_are_all_recorded() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    let waiter = fake.wait_for_requests(6);
    let calls = futures_util::future::join_all((0..6).map(|i| {
        let p = p.clone();
        async move { turn(&p, &request(&format!("n{i}"))).await.unwrap() }
    }));
    let (turns, ()) = tokio::join!(calls, waiter);
    for (i, t) in turns.iter().enumerate() {
        assert_eq!(t.text(), format!("echo: n{i}"));
    }
    assert_eq!(fake.requests().len(), 6);
    assert!(fake.violations().is_empty());
}
