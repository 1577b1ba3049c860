//! The OpenAI-compatible adapter against the testkit's fake server.

// Helpers outside #[test] functions fail the test just as an assert would.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hearth_core::{
    ChatRequest, Content, FinishReason, Message, Role, StreamEvent, ThinkingLevel, ToolSpec, Usage,
};
use hearth_llm::{
    Accumulator, AssistantTurn, ErrorKind, LlmError, OpenAiCompatConfig, OpenAiCompatProvider,
    OpenAiCompatWire, Provider,
};
use hearth_testkit::{FakeOpenAi, FakeUsage, Reply, ToolCallSpec};
use serde_json::json;

use crate::harness::{assert_no_secret, events, request_for, turn_as};

const KEY: &str = "sk-test-secret-key";

fn config(fake: &FakeOpenAi) -> OpenAiCompatConfig {
    OpenAiCompatConfig {
        name: "fake".into(),
        base_url: fake.base_url(),
        // The fake, like OpenAI, refuses a request without a key.
        api_key: Some(KEY.into()),
        api_key_env: None,
        headers: Vec::new(),
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(10),
        wire: OpenAiCompatWire,
    }
}

fn provider(fake: &FakeOpenAi) -> OpenAiCompatProvider {
    OpenAiCompatProvider::new(config(fake), reqwest::Client::new()).unwrap()
}

fn request(text: &str) -> ChatRequest {
    request_for("test-model", text)
}

async fn turn(p: &OpenAiCompatProvider, req: &ChatRequest) -> Result<AssistantTurn, LlmError> {
    turn_as(p, req, "fake").await
}

fn default_usage() -> Usage {
    let u = FakeUsage::DEFAULT;
    Usage {
        input_tokens: Some(u.prompt_tokens),
        output_tokens: Some(u.completion_tokens),
        cached_tokens: Some(u.cached_tokens),
        reasoning_tokens: Some(u.reasoning_tokens),
        cache_write_tokens: None,
    }
}

#[tokio::test]
async fn plain_text_answer_is_accumulated() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Hello there, wonderful world"));
    let p = provider(&fake);
    let events = events(&p, &request("hi")).await.unwrap();
    let deltas = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
        .count();
    assert!(deltas >= 2, "{events:?}");
    let mut acc = Accumulator::new();
    events.iter().for_each(|e| acc.push(e));
    let turn = acc.finish("fake").unwrap();
    assert_eq!(turn.text(), "Hello there, wonderful world");
    assert_eq!(turn.usage, default_usage());
    assert_eq!(turn.finish_reason, Some(FinishReason::Stop));
    assert_eq!(turn.tool_calls().count(), 0);

    let body = &fake.requests()[0];
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"}
        ])
    );
    assert!(body.get("tools").is_none());
    assert!(body.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn default_reply_echoes_last_user_message() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake);
    let mut req = request("first");
    req.system.clear();
    req.messages.push(Message::text(Role::Assistant, "ok"));
    req.messages
        .push(Message::text(Role::User, "héllo \"there\""));
    let t = turn(&p, &req).await.unwrap();
    assert_eq!(t.text(), "echo: héllo \"there\"");
    assert_eq!(t.usage, default_usage());
    assert_eq!(fake.requests()[0]["messages"][0]["role"], "user");

    fake.set_default_delay(Duration::from_millis(50));
    let started = Instant::now();
    turn(&p, &request("x")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(50));
    fake.wait_for_requests(2).await;
    assert_eq!(fake.request_count(), 2);
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn one_tool_call() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_abc",
        "read_file",
        r#"{"path":"/tmp/notes.txt"}"#,
    )]));
    let mut req = request("read it");
    req.tools = [
        req.tools.to_vec(),
        vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
    ]
    .concat()
    .into();
    let t = turn(&provider(&fake), &req).await.unwrap();
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        t.tool_calls().collect::<Vec<_>>(),
        vec![("call_abc", "read_file", r#"{"path":"/tmp/notes.txt"}"#)]
    );
    assert_eq!(t.text(), "");
    assert_eq!(
        fake.requests()[0]["tools"],
        json!([{"type": "function", "function": {
            "name": "read_file",
            "description": "Reads a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}
        }}])
    );
}

#[tokio::test]
async fn parallel_tool_calls_with_split_arguments() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![
        ToolCallSpec::new(
            "call_1",
            "get_weather",
            r#"{"city":"Zürich","unit":"celsius"}"#,
        ),
        ToolCallSpec::new("call_2", "get_time", r#"{"tz":"Europe/Zurich"}"#),
    ]));
    let p = provider(&fake);
    let evs = events(&p, &request("weather and time")).await.unwrap();
    let arg_fragments = evs
        .iter()
        .filter(
            |e| matches!(e, StreamEvent::ToolCallDelta { arguments, .. } if !arguments.is_empty()),
        )
        .count();
    assert!(arg_fragments >= 4, "arguments should arrive split: {evs:?}");
    let mut acc = Accumulator::new();
    evs.iter().for_each(|e| acc.push(e));
    let t = acc.finish("fake").unwrap();
    assert_eq!(
        t.tool_calls().collect::<Vec<_>>(),
        vec![
            (
                "call_1",
                "get_weather",
                r#"{"city":"Zürich","unit":"celsius"}"#
            ),
            ("call_2", "get_time", r#"{"tz":"Europe/Zurich"}"#),
        ]
    );
}

#[tokio::test]
async fn usage_present_and_missing() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake);
    let custom = FakeUsage {
        prompt_tokens: 100,
        completion_tokens: 20,
        cached_tokens: 64,
        reasoning_tokens: 0,
    };
    fake.push(Reply::text("a b c").with_usage(custom));
    fake.push(Reply::text("a b c").without_usage());
    let with = turn(&p, &request("x")).await.unwrap();
    assert_eq!(
        with.usage,
        Usage {
            input_tokens: Some(100),
            output_tokens: Some(20),
            cached_tokens: Some(64),
            reasoning_tokens: Some(0),
            cache_write_tokens: None,
        }
    );
    let evs = events(&p, &request("x")).await.unwrap();
    assert!(!evs.iter().any(|e| matches!(e, StreamEvent::Usage(_))));
    let mut acc = Accumulator::new();
    evs.iter().for_each(|e| acc.push(e));
    let without = acc.finish("fake").unwrap();
    assert!(without.usage.is_untracked());
    assert_eq!(without.text(), "a b c");

    // `usage: null` on every chunk, as some servers send it, is no usage.
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n\
         data: [DONE]\n\n",
    ));
    let evs = events(&p, &request("x")).await.unwrap();
    assert_eq!(
        evs,
        vec![
            StreamEvent::TextDelta("x".into()),
            StreamEvent::Finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn thinking_via_reasoning_content_and_reasoning() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake);
    fake.push(Reply::text("42").with_reasoning("Let me think about it."));
    let mut req = request("question");
    req.thinking = ThinkingLevel::High;
    let t = turn(&p, &req).await.unwrap();
    assert_eq!(
        t.message.content,
        vec![
            Content::Thinking {
                text: "Let me think about it.".into(),
                signature: None,
                provider: Some("fake".into()),
            },
            Content::Text { text: "42".into() },
        ]
    );
    assert_eq!(fake.requests()[0]["reasoning_effort"], "high");

    // OpenRouter-style `reasoning`, and objects there ignored.
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"reasoning\":\"hmm\"}}]}\n\n\
         data: {\"choices\":[{\"delta\":{\"reasoning\":{\"kind\":\"x\"},\"content\":\"ok\"}}]}\n\n\
         data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n\
         data: [DONE]\n\n",
    ));
    let evs = events(&p, &request("q")).await.unwrap();
    assert_eq!(
        evs,
        vec![
            StreamEvent::ThinkingDelta {
                text: "hmm".into(),
                signature: None
            },
            StreamEvent::TextDelta("ok".into()),
            StreamEvent::Finish(FinishReason::Length),
        ]
    );
}

#[tokio::test]
async fn http_errors_map_to_kinds() {
    let fake = FakeOpenAi::start().await;
    let mut cfg = config(&fake);
    cfg.api_key = Some(KEY.into());
    let p = OpenAiCompatProvider::new(cfg, reqwest::Client::new()).unwrap();
    let cases = [
        (401, ErrorKind::Auth),
        (403, ErrorKind::Auth),
        (404, ErrorKind::NotFound),
        (400, ErrorKind::InvalidRequest),
        (422, ErrorKind::InvalidRequest),
        (500, ErrorKind::Server),
        // One classification for every adapter: 503 and 529 are overload.
        (503, ErrorKind::Overloaded),
        (529, ErrorKind::Overloaded),
    ];
    for (status, kind) in cases {
        fake.push(Reply::http_error(
            status,
            json!({"error": {"message": format!("boom {status}"), "type": "x"}}),
        ));
        let err = p.stream(&request("x")).await.err().unwrap();
        assert_eq!(err.kind, kind, "{status}");
        assert_eq!(err.provider, "fake");
        assert!(err.message.contains(&status.to_string()), "{}", err.message);
        assert!(
            err.message.contains(&format!("boom {status}")),
            "{}",
            err.message
        );
        assert_eq!(err.retry_after, None);
        assert_no_secret(&err, KEY);
    }

    fake.push(
        Reply::http_error(429, json!({"error": {"message": "slow down"}}))
            .with_header("retry-after", "7"),
    );
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::RateLimited);
    assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
    assert!(err.is_retryable());
    assert!(err.message.contains("slow down"));

    // `{"error": "..."}` is understood too.
    fake.push(Reply::http_error(
        502,
        json!({"error": "plain string error"}),
    ));
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Server);
    assert!(err.message.contains("502"));
    assert!(err.message.contains("plain string error"));
}

#[tokio::test]
async fn malformed_chunk_is_an_error_item() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake);
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"secret output\"}}]}\n\n\
         data: {\"choices\": [ {\"delta\": \"secret output\"\n\n",
    ));
    let err = events(&p, &request("x")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(!err.message.contains("secret output"), "{}", err.message);

    // A field of the wrong type is malformed too, and not quoted back.
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":[\"secret output\"]}}]}\n\n",
    ));
    let err = events(&p, &request("x")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(!err.message.contains("secret output"), "{}", err.message);
}

#[tokio::test]
async fn non_sse_content_type_is_malformed() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("hi").with_content_type("application/json"));
    let err = provider(&fake).stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(err.message.contains("application/json"));

    fake.push(Reply::text("hi").with_content_type("Text/Event-Stream; charset=utf-8"));
    let t = turn(&provider(&fake), &request("x")).await.unwrap();
    assert_eq!(t.text(), "hi");
}

#[tokio::test]
async fn stream_cut_without_done_or_finish_is_malformed() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake);
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"partial\"}}]}\n\n\
         data: {\"choices\":[{\"delta\":{\"content\":\"cut mid",
    ));
    let items: Vec<_> = p.stream(&request("x")).await.unwrap().collect().await;
    assert_eq!(items.len(), 2);
    assert_eq!(
        items[0].as_ref().unwrap(),
        &StreamEvent::TextDelta("partial".into())
    );
    assert_eq!(
        items[1].as_ref().unwrap_err().kind,
        ErrorKind::MalformedResponse
    );

    // A finish_reason without [DONE] is a complete answer.
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"done\"},\"finish_reason\":\"stop\"}]}\n\n",
    ));
    let t = turn(&p, &request("x")).await.unwrap();
    assert_eq!(t.text(), "done");
    assert_eq!(t.finish_reason, Some(FinishReason::Stop));

    // [DONE] without a finish_reason: tool calls imply ToolCalls.
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"t\"}}]}}]}\n\n\
         data: [DONE]\n\n",
    ));
    let t = turn(&p, &request("x")).await.unwrap();
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(t.tool_calls().next(), Some(("c", "t", "{}")));
}

#[tokio::test]
async fn idle_timeout_on_a_hanging_stream() {
    let fake = FakeOpenAi::start().await;
    let mut cfg = config(&fake);
    cfg.idle_timeout = Duration::from_millis(200);
    let p = OpenAiCompatProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(Reply::hang());
    let started = Instant::now();
    let err = events(&p, &request("x")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(started.elapsed() < Duration::from_secs(5));

    // Chunks arriving within the idle timeout keep the stream alive.
    fake.push(Reply::text("slow but steady").with_chunk_delay(Duration::from_millis(50)));
    assert_eq!(
        turn(&p, &request("x")).await.unwrap().text(),
        "slow but steady"
    );
}

#[tokio::test]
async fn request_timeout_before_headers() {
    let fake = FakeOpenAi::start().await;
    let mut cfg = config(&fake);
    cfg.request_timeout = Duration::from_millis(100);
    let p = OpenAiCompatProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(Reply::text("late").with_delay(Duration::from_secs(3)));
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.is_retryable());
}

#[tokio::test]
async fn connection_refused_is_network() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut cfg = OpenAiCompatConfig::new("down", format!("http://{addr}/v1"));
    cfg.api_key = Some(KEY.into());
    let p = OpenAiCompatProvider::new(cfg, reqwest::Client::new()).unwrap();
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Network);
    assert_eq!(err.provider, "down");
    // The URL called is named, so the user sees which server did not answer.
    assert!(
        err.message
            .contains(&format!("http://{addr}/v1/chat/completions")),
        "{}",
        err.message
    );
    assert_no_secret(&err, KEY);
}

#[tokio::test]
async fn mid_stream_error_chunk() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n\
         data: {\"error\":{\"message\":\"upstream overloaded\",\"code\":529}}\n\n",
    ));
    let items: Vec<_> = provider(&fake)
        .stream(&request("x"))
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(items.len(), 2);
    let err = items[1].as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Overloaded, "code 529 means overloaded");
    assert!(
        err.message.contains("upstream overloaded"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn bearer_key_and_custom_headers_reach_the_server() {
    let fake = FakeOpenAi::start().await;
    let mut cfg = config(&fake);
    cfg.headers = vec![
        ("X-Title".into(), "hearth tests".into()),
        ("HTTP-Referer".into(), "https://example.invalid".into()),
    ];
    assert!(!format!("{cfg:?}").contains(KEY));
    let p = OpenAiCompatProvider::new(cfg, reqwest::Client::new()).unwrap();
    assert!(!format!("{p:?}").contains(KEY));
    turn(&p, &request("x")).await.unwrap();
    let headers = &fake.request_headers()[0];
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("authorization"), Some("Bearer sk-test-secret-key"));
    assert_eq!(get("x-title"), Some("hearth tests"));
    assert_eq!(get("http-referer"), Some("https://example.invalid"));
    assert_eq!(get("content-type"), Some("application/json"));
    assert_eq!(get("accept"), Some("text/event-stream"));

    // Without a key, no Authorization header at all: the server's 401 is
    // an auth error.
    let mut keyless = config(&fake);
    keyless.api_key = None;
    let p = OpenAiCompatProvider::new(keyless, reqwest::Client::new()).unwrap();
    let err = turn(&p, &request("x")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{err:?}");
    assert!(
        !fake.request_headers()[1]
            .iter()
            .any(|(k, _)| k == "authorization")
    );
    let v = fake.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("Authorization"), "{v:?}");
}

#[tokio::test]
async fn history_with_tool_calls_and_results_is_converted() {
    let fake = FakeOpenAi::start().await;
    let req = ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![
            Message::text(Role::User, "what is in /tmp?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    Content::Thinking {
                        text: "I should look".into(),
                        signature: Some("sig".into()),
                        provider: Some("fake".into()),
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
                        arguments: "{}".into(),
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
        thinking: ThinkingLevel::Low,
        max_output_tokens: None,
    };
    let t = turn(&provider(&fake), &req).await.unwrap();
    assert_eq!(t.text(), "echo: thanks, bye");
    let body = &fake.requests()[0];
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "what is in /tmp?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "ls", "arguments": "{\"path\":\"/tmp\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "du", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"files\":[\"a\"]}"},
            {"role": "tool", "tool_call_id": "call_2", "content": "{\"error\":\"denied\"}"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_3", "type": "function",
                 "function": {"name": "cat", "arguments": "{\"path\":\"/tmp/a\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_3", "content": "{\"text\":\"hi\"}"},
            {"role": "assistant", "content": "It says hi."},
            {"role": "user", "content": "thanks, bye"}
        ])
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn fake_flags_orphan_tool_results() {
    let fake = FakeOpenAi::start().await;
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
    // Refused as OpenAI refuses it: 400, an invalid request.
    let err = turn(&provider(&fake), &req).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidRequest, "{err:?}");
    let v = fake.violations();
    assert_eq!(v.len(), 1);
    assert!(v[0].contains("nobody_called_me"), "{v:?}");
}

#[tokio::test]
async fn concurrent_requests_are_all_recorded() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake);
    let waiter = fake.wait_for_requests(8);
    let calls = futures_util::future::join_all((0..8).map(|i| {
        let p = p.clone();
        async move { turn(&p, &request(&format!("n{i}"))).await.unwrap() }
    }));
    let (turns, ()) = tokio::join!(calls, waiter);
    for (i, t) in turns.iter().enumerate() {
        assert_eq!(t.text(), format!("echo: n{i}"));
    }
    assert_eq!(fake.request_count(), 8);
    assert_eq!(fake.requests().len(), 8);
}

#[tokio::test]
async fn max_output_tokens_is_sent_as_max_tokens() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake);
    let mut req = request("hi");
    turn(&p, &req).await.unwrap();
    req.max_output_tokens = Some(321);
    turn(&p, &req).await.unwrap();
    let sent = fake.requests();
    assert!(sent[0].get("max_tokens").is_none(), "{}", sent[0]);
    assert_eq!(sent[1]["max_tokens"], 321);
}
