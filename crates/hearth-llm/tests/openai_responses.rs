//! The OpenAI Responses API adapter against the testkit's fake Responses server.

// Helpers outside #[test] functions fail the test just as an assert would.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::time::{Duration, Instant};

use hearth_core::{
    ChatRequest, Content, FinishReason, Message, Role, StreamEvent, ThinkingLevel, Usage,
};
use hearth_llm::openai::{OpenAiConfig, OpenAiProvider};
use hearth_llm::{AssistantTurn, ErrorKind, LlmError, Provider};
use hearth_testkit::fake_responses::{FakeResponses, ResponsesReply, ResponsesUsage};
use serde_json::{Value, json};

use crate::harness::{
    accumulate, assert_no_secret, error_after, events, header, request_for, text_of, tool, turn_as,
};

const KEY: &str = "sk-proj-test-secret-key";
const NAME: &str = "openai";

fn config(fake: &FakeResponses) -> OpenAiConfig {
    let mut cfg = OpenAiConfig::new(NAME, fake.base_url());
    cfg.api_key = Some(KEY.into());
    cfg.request_timeout = Duration::from_secs(10);
    cfg.idle_timeout = Duration::from_secs(10);
    cfg
}

fn provider(fake: &FakeResponses) -> OpenAiProvider {
    OpenAiProvider::new(config(fake), reqwest::Client::new()).unwrap()
}

fn request(text: &str) -> ChatRequest {
    request_for("gpt-test", text)
}

async fn turn(p: &OpenAiProvider, req: &ChatRequest) -> Result<AssistantTurn, LlmError> {
    turn_as(p, req, NAME).await
}

fn default_usage() -> Usage {
    let u = ResponsesUsage::DEFAULT;
    Usage {
        input_tokens: Some(u.input_tokens),
        output_tokens: Some(u.output_tokens),
        cached_tokens: Some(u.cached_tokens),
        reasoning_tokens: Some(u.reasoning_tokens),
        cache_write_tokens: None,
    }
}

/// One SSE frame as OpenAI writes it.
fn frame(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn completed() -> String {
    frame(&json!({"type": "response.completed", "sequence_number": 99,
                  "response": {"status": "completed", "usage": null}}))
}

#[tokio::test]
async fn plain_text_answer_and_request_shape() {
    let fake = FakeResponses::start().await;
    fake.push(ResponsesReply::text("Hello there, wonderful world"));
    let mut cfg = config(&fake);
    cfg.wire.organization = Some("org-fake".into());
    cfg.headers = vec![("OpenAI-Project".into(), "proj_123".into())];
    assert!(!format!("{cfg:?}").contains(KEY));
    let p = OpenAiProvider::new(cfg, reqwest::Client::new()).unwrap();
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
    assert!(
        !t.message
            .content
            .iter()
            .any(|c| matches!(c, Content::Thinking { .. }))
    );

    // The system prompt goes in `instructions`; thinking off means no
    // `reasoning` and no `include`.
    let body = &fake.requests()[0];
    assert_eq!(
        *body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "store": false,
            "instructions": "be brief",
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "hi"}]}]
        })
    );
    let headers = &fake.request_headers()[0];
    let bearer = format!("Bearer {KEY}");
    assert_eq!(header(headers, "authorization"), Some(bearer.as_str()));
    assert_eq!(header(headers, "openai-organization"), Some("org-fake"));
    assert_eq!(header(headers, "openai-project"), Some("proj_123"));
    assert_eq!(header(headers, "content-type"), Some("application/json"));
    assert_eq!(header(headers, "accept"), Some("text/event-stream"));
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn default_reply_echoes_last_user_text() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    let mut req = request("first");
    req.system.clear();
    req.messages.push(Message::text(Role::Assistant, "ok"));
    req.messages
        .push(Message::text(Role::User, "héllo \"there\""));
    let t = turn(&p, &req).await.unwrap();
    assert_eq!(t.text(), "echo: héllo \"there\"");
    assert_eq!(t.usage, default_usage());
    assert!(fake.requests()[0].get("instructions").is_none());
    fake.wait_for_requests(1).await;
    assert_eq!(fake.request_count(), 1);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn one_function_call() {
    let fake = FakeResponses::start().await;
    fake.push(ResponsesReply::function_calls(vec![(
        "call_abc123",
        "read_file",
        r#"{"path":"/tmp/notes.txt"}"#,
    )]));
    let mut req = request("read it");
    req.tools = vec![tool("list_dir"), tool("read_file")].into();
    let t = turn(&provider(&fake), &req).await.unwrap();
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        t.tool_calls().collect::<Vec<_>>(),
        vec![("call_abc123", "read_file", r#"{"path":"/tmp/notes.txt"}"#)]
    );
    assert_eq!(t.text(), "");
    let body = &fake.requests()[0];
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    assert_eq!(
        body["tools"],
        json!([
            {"type": "function", "name": "list_dir", "description": "The list_dir tool",
             "parameters": schema, "strict": false},
            {"type": "function", "name": "read_file", "description": "The read_file tool",
             "parameters": schema, "strict": false}
        ])
    );
    assert!(body.get("parallel_tool_calls").is_none());
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn parallel_function_calls_with_split_arguments_are_numbered_from_zero() {
    let fake = FakeResponses::start().await;
    fake.push(
        ResponsesReply::function_calls(vec![
            (
                "call_1",
                "get_weather",
                r#"{"city":"Zürich","unit":"celsius","note":"say \"hi\""}"#,
            ),
            ("call_2", "get_time", r#"{"tz":"Europe/Zurich"}"#),
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
    // Output items 1 and 2 (after the message) are calls 0 and 1.
    assert!(indexes.iter().all(|i| *i < 2), "{indexes:?}");
    assert!(indexes.contains(&0) && indexes.contains(&1));
    assert!(fragments >= 8, "arguments should arrive split: {evs:?}");
    let t = accumulate(&evs, NAME);
    assert_eq!(t.text(), "Let me check both.");
    assert_eq!(
        t.tool_calls().collect::<Vec<_>>(),
        vec![
            (
                "call_1",
                "get_weather",
                r#"{"city":"Zürich","unit":"celsius","note":"say \"hi\""}"#
            ),
            ("call_2", "get_time", r#"{"tz":"Europe/Zurich"}"#),
        ]
    );
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn argument_deltas_are_routed_by_item_id_or_output_index() {
    let fake = FakeResponses::start().await;
    let added = |index: u64, id: &str, call_id: &str, name: &str| {
        frame(
            &json!({"type": "response.output_item.added", "sequence_number": 0,
                      "output_index": index,
                      "item": {"id": id, "type": "function_call", "status": "in_progress",
                               "arguments": "", "call_id": call_id, "name": name}}),
        )
    };
    let delta = |value: Value| {
        let mut v = json!({"type": "response.function_call_arguments.delta",
                           "sequence_number": 0});
        v.as_object_mut()
            .unwrap()
            .extend(value.as_object().unwrap().clone());
        frame(&v)
    };
    // Interleaved deltas, one addressed only by output_index; a third call
    // whose arguments come only whole, in `.done` (as some servers do).
    let body = [
        added(0, "fc_a", "call_a", "one"),
        added(1, "fc_b", "call_b", "two"),
        delta(json!({"item_id": "fc_a", "output_index": 0, "delta": "{\"x\""})),
        delta(json!({"item_id": "fc_b", "output_index": 1, "delta": "{\"y\":"})),
        delta(json!({"output_index": 0, "delta": ":1}"})),
        delta(json!({"item_id": "fc_b", "output_index": 1, "delta": "2}"})),
        frame(
            &json!({"type": "response.function_call_arguments.done", "sequence_number": 0,
                      "item_id": "fc_a", "output_index": 0, "arguments": "{\"x\":1}"}),
        ),
        added(2, "fc_c", "call_c", "three"),
        frame(
            &json!({"type": "response.function_call_arguments.done", "sequence_number": 0,
                      "item_id": "fc_c", "output_index": 2, "arguments": "{\"z\":3}"}),
        ),
        frame(
            &json!({"type": "response.output_item.done", "sequence_number": 0,
                      "output_index": 2,
                      "item": {"id": "fc_c", "type": "function_call", "arguments": "{\"z\":3}",
                               "call_id": "call_c", "name": "three"}}),
        ),
        completed(),
    ]
    .concat();
    fake.push(ResponsesReply::raw_sse(body));
    let t = turn(&provider(&fake), &request("x")).await.unwrap();
    assert_eq!(
        t.tool_calls().collect::<Vec<_>>(),
        vec![
            ("call_a", "one", r#"{"x":1}"#),
            ("call_b", "two", r#"{"y":2}"#),
            ("call_c", "three", r#"{"z":3}"#),
        ]
    );
    assert_eq!(t.finish_reason, Some(FinishReason::ToolCalls));

    // A delta for an item never announced is malformed.
    fake.push(ResponsesReply::raw_sse(
        delta(json!({"item_id": "fc_zz", "output_index": 7, "delta": "{}"})) + &completed(),
    ));
    let (_, err) = error_after(&provider(&fake), &request("x")).await;
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
}

#[tokio::test]
async fn reasoning_is_signed_and_returned_only_to_its_provider() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    fake.push(
        ResponsesReply::function_calls(vec![("call_9", "ls", r#"{"path":"/"}"#)])
            .with_reasoning("I should list the root directory.", "gAAAAABenc=="),
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
    let signature = r#"{"id":"rs_fake0000","encrypted_content":"gAAAAABenc=="}"#;
    let thinking = Content::Thinking {
        text: "I should list the root directory.".into(),
        signature: Some(signature.into()),
        provider: Some(NAME.into()),
    };
    assert_eq!(t.message.content[0], thinking);
    let sent = &fake.requests()[0];
    assert_eq!(
        sent["reasoning"],
        json!({"effort": "medium", "summary": "auto"})
    );
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(sent["store"], false);

    // Next turn: the reasoning item goes back first, before the call.
    let mut next = req.clone();
    next.messages.push(t.message.clone());
    next.messages.push(Message {
        role: Role::Tool,
        content: vec![Content::ToolResult {
            call_id: "call_9".into(),
            output: r#"{"files":["etc"]}"#.into(),
        }],
    });
    turn(&p, &next).await.unwrap();
    let sent = &fake.requests()[1];
    assert_eq!(
        sent["input"],
        json!([
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "what is in /?"}]},
            {"type": "reasoning", "id": "rs_fake0000", "encrypted_content": "gAAAAABenc==",
             "summary": []},
            {"type": "function_call", "call_id": "call_9", "name": "ls",
             "arguments": "{\"path\":\"/\"}"},
            {"type": "function_call_output", "call_id": "call_9",
             "output": "{\"files\":[\"etc\"]}"}
        ])
    );

    // Another configured provider (a model switch) gets no reasoning item,
    // and neither does an unsigned one or a foreign signature format.
    let mut other_cfg = config(&fake);
    other_cfg.name = "openai-backup".into();
    let other = OpenAiProvider::new(other_cfg, reqwest::Client::new()).unwrap();
    turn(&other, &next).await.unwrap();
    for sig in [None, Some("EqQBanthropic-style-sig")] {
        let mut unsigned = next.clone();
        unsigned.messages[1].content[0] = Content::Thinking {
            text: "x".into(),
            signature: sig.map(Into::into),
            provider: Some(NAME.into()),
        };
        turn(&p, &unsigned).await.unwrap();
    }
    for sent in &fake.requests()[2..] {
        let input = sent["input"].as_array().unwrap();
        assert_eq!(input.len(), 3, "{input:?}");
        assert!(input.iter().all(|i| i["type"] != "reasoning"), "{input:?}");
    }
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn summary_parts_and_several_reasoning_items() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    let summary = |id: &str, part: u64, delta: &str| {
        frame(
            &json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 0,
                      "item_id": id, "output_index": 0, "summary_index": part,
                      "delta": delta}),
        )
    };
    let item = |event: &str, id: &str, enc: Option<&str>| {
        let mut item = json!({"id": id, "type": "reasoning", "summary": []});
        if let Some(enc) = enc {
            item["encrypted_content"] = json!(enc);
        }
        frame(&json!({"type": event, "sequence_number": 0, "output_index": 0, "item": item}))
    };
    let body = [
        item("response.output_item.added", "rs_1", None),
        summary("rs_1", 0, "**Plan**"),
        summary("rs_1", 1, "Then act"),
        item("response.output_item.done", "rs_1", Some("ENC1")),
        item("response.output_item.added", "rs_2", None),
        summary("rs_2", 0, "More"),
        item("response.output_item.done", "rs_2", Some("ENC2")),
        frame(
            &json!({"type": "response.output_text.delta", "sequence_number": 0,
                      "item_id": "msg_1", "output_index": 2, "content_index": 0,
                      "delta": "ok"}),
        ),
        completed(),
    ]
    .concat();
    fake.push(ResponsesReply::raw_sse(body));
    let mut req = request("x");
    req.thinking = ThinkingLevel::Low;
    let t = turn(&p, &req).await.unwrap();
    let Content::Thinking {
        text, signature, ..
    } = &t.message.content[0]
    else {
        panic!("{:?}", t.message.content);
    };
    assert_eq!(text, "**Plan**\n\nThen act\n\nMore");
    let sig: Value = serde_json::from_str(signature.as_deref().unwrap()).unwrap();
    assert_eq!(
        sig,
        json!([{"id": "rs_1", "encrypted_content": "ENC1"},
               {"id": "rs_2", "encrypted_content": "ENC2"}])
    );
    assert_eq!(t.text(), "ok");

    // Both items go back, in order, before the assistant's message.
    let mut next = req.clone();
    next.messages.push(t.message.clone());
    next.messages.push(Message::text(Role::User, "go on"));
    turn(&p, &next).await.unwrap();
    let input = fake.requests()[1]["input"].clone();
    assert_eq!(input[1]["id"], "rs_1");
    assert_eq!(input[2]["id"], "rs_2");
    assert_eq!(input[2]["encrypted_content"], "ENC2");
    assert_eq!(input[3]["role"], "assistant");
    assert_eq!(input[4]["role"], "user");
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn usage_fields_are_mapped() {
    let fake = FakeResponses::start().await;
    fake.push(ResponsesReply::text("cached").with_usage(1200, 340, 1024, 256));
    let evs = events(&provider(&fake), &request("x")).await.unwrap();
    let usages = evs
        .iter()
        .filter(|e| matches!(e, StreamEvent::Usage(_)))
        .count();
    assert_eq!(usages, 1, "{evs:?}");
    assert_eq!(
        accumulate(&evs, NAME).usage,
        Usage {
            input_tokens: Some(1200),
            output_tokens: Some(340),
            cached_tokens: Some(1024),
            reasoning_tokens: Some(256),
            cache_write_tokens: None,
        }
    );
}

#[tokio::test]
async fn incomplete_responses_map_to_finish_reasons() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    for (reason, expected) in [
        ("max_output_tokens", FinishReason::Length),
        ("content_filter", FinishReason::ContentFilter),
        ("something_new", FinishReason::Other("something_new".into())),
    ] {
        fake.push(ResponsesReply::incomplete(reason).with_usage(10, 20, 0, 5));
        let evs = events(&p, &request("x")).await.unwrap();
        let t = accumulate(&evs, NAME);
        assert_eq!(t.finish_reason, Some(expected), "{reason}");
        assert_eq!(t.text(), "Partial answer");
        assert_eq!(t.usage.output_tokens, Some(20));
        assert_eq!(t.usage.reasoning_tokens, Some(5));
    }
}

#[tokio::test]
async fn failed_responses_and_error_events_end_with_an_error() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    for (code, kind) in [
        ("rate_limit_exceeded", ErrorKind::RateLimited),
        ("server_error", ErrorKind::Server),
        ("context_length_exceeded", ErrorKind::ContextLength),
        ("vector_store_timeout", ErrorKind::Server),
    ] {
        fake.push(ResponsesReply::failed(code, "It went wrong"));
        let (evs, err) = error_after(&p, &request("x")).await;
        assert_eq!(err.kind, kind, "{code}");
        assert_eq!(err.provider, NAME);
        assert!(err.message.contains("It went wrong"), "{}", err.message);
        assert!(err.message.contains(code), "{}", err.message);
        assert!(evs.is_empty(), "{evs:?}");
        assert_no_secret(&err, KEY);

        fake.push(ResponsesReply::error_event(code, "Stream broke"));
        let (evs, err) = error_after(&p, &request("x")).await;
        assert_eq!(err.kind, kind, "{code}");
        assert!(err.message.contains("Stream broke"), "{}", err.message);
        assert_eq!(text_of(&evs), "Partial answer");
        assert!(!evs.iter().any(|e| matches!(e, StreamEvent::Finish(_))));
    }
}

#[tokio::test]
async fn http_errors_map_to_kinds() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    let cases = [
        (
            401,
            "invalid_request_error",
            Some("invalid_api_key"),
            "Incorrect API key provided",
            ErrorKind::Auth,
        ),
        (
            403,
            "invalid_request_error",
            None,
            "not allowed",
            ErrorKind::Auth,
        ),
        (
            404,
            "invalid_request_error",
            Some("model_not_found"),
            "The model `gpt-nope` does not exist",
            ErrorKind::NotFound,
        ),
        (
            400,
            "invalid_request_error",
            Some("context_length_exceeded"),
            "Your input exceeds the context window of this model.",
            ErrorKind::ContextLength,
        ),
        (
            400,
            "invalid_request_error",
            Some("invalid_value"),
            "Invalid value: 'x'",
            ErrorKind::InvalidRequest,
        ),
        (
            500,
            "server_error",
            None,
            "The server had an error",
            ErrorKind::Server,
        ),
        (
            503,
            "server_error",
            None,
            "The engine is currently overloaded",
            ErrorKind::Overloaded,
        ),
    ];
    for (status, error_type, code, message, kind) in cases {
        fake.push(ResponsesReply::api_error(status, error_type, code, message));
        let err = p.stream(&request("x")).await.err().unwrap();
        assert_eq!(err.kind, kind, "{status} {message}");
        assert_eq!(err.provider, NAME);
        assert!(err.message.contains(&status.to_string()), "{}", err.message);
        assert!(err.message.contains(message), "{}", err.message);
        assert_eq!(err.retry_after, None);
        assert_no_secret(&err, KEY);
    }

    fake.push(
        ResponsesReply::api_error(
            429,
            "requests",
            Some("rate_limit_exceeded"),
            "Rate limit reached",
        )
        .with_header("retry-after", "7"),
    );
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::RateLimited);
    assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
    assert!(err.is_retryable());
    assert!(err.message.contains("Rate limit reached"));

    // A body that is not OpenAI's shape still yields the status.
    fake.push(ResponsesReply::http_error(502, json!("bad gateway")));
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Server);
    assert!(err.message.contains("502"));
}

#[tokio::test]
async fn stream_cut_before_the_terminal_event_is_malformed() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    fake.push(ResponsesReply::raw_sse(
        [
            frame(&json!({"type": "response.created", "sequence_number": 0,
                          "response": {"status": "in_progress"}})),
            frame(
                &json!({"type": "response.output_text.delta", "sequence_number": 1,
                          "item_id": "msg_1", "output_index": 0, "content_index": 0,
                          "delta": "partial"}),
            ),
        ]
        .concat(),
    ));
    let (evs, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(
        err.message.contains("response.completed"),
        "{}",
        err.message
    );
    assert_eq!(evs, vec![StreamEvent::TextDelta("partial".into())]);

    // Cut in the middle of an event.
    fake.push(ResponsesReply::raw_sse(
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.del",
    ));
    let (_, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
}

#[tokio::test]
async fn malformed_json_is_an_error_item_that_quotes_nothing() {
    let fake = FakeResponses::start().await;
    let p = provider(&fake);
    fake.push(ResponsesReply::raw_sse(
        "event: response.output_text.delta\n\
         data: {\"type\":\"response.output_text.delta\",\"delta\":\"secret output\"\n\n",
    ));
    let (evs, err) = error_after(&p, &request("x")).await;
    assert!(evs.is_empty(), "{evs:?}");
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(!err.message.contains("secret output"), "{}", err.message);

    // A known event with a field of the wrong type is malformed too.
    fake.push(ResponsesReply::raw_sse(frame(
        &json!({"type": "response.output_text.delta", "delta": ["secret output"]}),
    )));
    let (_, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(!err.message.contains("secret output"), "{}", err.message);

    // Lifecycle and unknown events are ignored, whatever their shape.
    fake.push(ResponsesReply::raw_sse(
        [
            frame(&json!({"type": "response.created", "sequence_number": 0,
                          "response": {"status": "in_progress"}})),
            frame(
                &json!({"type": "response.in_progress", "sequence_number": 1,
                          "response": {"status": "in_progress"}}),
            ),
            frame(&json!({"type": "response.brand_new", "delta": {"odd": true}})),
            frame(
                &json!({"type": "response.output_text.delta", "sequence_number": 2,
                          "item_id": "msg_1", "output_index": 0, "content_index": 0,
                          "delta": "ok"}),
            ),
            // No `type` in the payload: the SSE event name stands in.
            "event: response.output_text.delta\ndata: {\"delta\":\"!\"}\n\n".to_owned(),
            completed(),
        ]
        .concat(),
    ));
    assert_eq!(
        events(&p, &request("x")).await.unwrap(),
        vec![
            StreamEvent::TextDelta("ok".into()),
            StreamEvent::TextDelta("!".into()),
            StreamEvent::Finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn non_sse_content_type_is_malformed() {
    let fake = FakeResponses::start().await;
    fake.push(ResponsesReply::http_error(
        200,
        json!({"object": "response"}),
    ));
    let err = provider(&fake).stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::MalformedResponse);
    assert!(err.message.contains("application/json"), "{}", err.message);
}

#[tokio::test]
async fn idle_timeout_on_a_hanging_stream() {
    let fake = FakeResponses::start().await;
    let mut cfg = config(&fake);
    cfg.idle_timeout = Duration::from_millis(200);
    let p = OpenAiProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(ResponsesReply::hang());
    let started = Instant::now();
    let (_, err) = error_after(&p, &request("x")).await;
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(started.elapsed() < Duration::from_secs(5));

    // Events arriving within the idle timeout keep the stream alive.
    fake.push(ResponsesReply::text("slow but steady").with_chunk_delay(Duration::from_millis(20)));
    assert_eq!(
        turn(&p, &request("x")).await.unwrap().text(),
        "slow but steady"
    );
}

#[tokio::test]
async fn request_timeout_and_connection_refused() {
    let fake = FakeResponses::start().await;
    let mut cfg = config(&fake);
    cfg.request_timeout = Duration::from_millis(100);
    let p = OpenAiProvider::new(cfg, reqwest::Client::new()).unwrap();
    fake.push(ResponsesReply::text("late").with_delay(Duration::from_secs(3)));
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Timeout);

    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut cfg = OpenAiConfig::new("down", format!("http://{addr}/v1"));
    cfg.api_key = Some(KEY.into());
    let p = OpenAiProvider::new(cfg, reqwest::Client::new()).unwrap();
    let err = p.stream(&request("x")).await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Network);
    assert_eq!(err.provider, "down");
    assert_no_secret(&err, KEY);
}

#[tokio::test]
async fn history_is_converted_to_input_items() {
    let fake = FakeResponses::start().await;
    let req = ChatRequest {
        model: "m".into(),
        system: "sys".into(),
        messages: vec![
            Message::text(Role::User, "what is in /tmp?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    // From another provider: never sent here.
                    Content::Thinking {
                        text: "I should look".into(),
                        signature: Some("foreign-sig".into()),
                        provider: Some("claude".into()),
                    },
                    Content::Text {
                        text: "Let me check.".into(),
                    },
                    Content::ToolCall {
                        id: "toolu_1".into(),
                        name: "ls".into(),
                        arguments: r#"{"path":"/tmp"}"#.into(),
                    },
                    Content::ToolCall {
                        id: "toolu_2".into(),
                        name: "du".into(),
                        arguments: String::new(),
                    },
                ],
            },
            Message {
                role: Role::Tool,
                content: vec![
                    Content::ToolResult {
                        call_id: "toolu_1".into(),
                        output: r#"{"files":["a"]}"#.into(),
                    },
                    Content::ToolResult {
                        call_id: "toolu_2".into(),
                        output: r#"{"error":"denied"}"#.into(),
                    },
                ],
            },
            Message::text(Role::Assistant, "It has a."),
            Message {
                role: Role::User,
                content: vec![
                    Content::Text {
                        text: "thanks, ".into(),
                    },
                    Content::Text {
                        text: String::new(),
                    },
                    Content::Text { text: "bye".into() },
                ],
            },
        ],
        tools: vec![tool("ls"), tool("du")].into(),
        thinking: ThinkingLevel::Off,
        max_output_tokens: None,
    };
    let t = turn(&provider(&fake), &req).await.unwrap();
    assert_eq!(t.text(), "echo: bye");
    let body = &fake.requests()[0];
    assert_eq!(body["instructions"], "sys");
    assert!(body.get("reasoning").is_none());
    assert!(body.get("include").is_none());
    assert_eq!(
        body["input"],
        json!([
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "what is in /tmp?"}]},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Let me check."}]},
            {"type": "function_call", "call_id": "toolu_1", "name": "ls",
             "arguments": "{\"path\":\"/tmp\"}"},
            {"type": "function_call", "call_id": "toolu_2", "name": "du", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "toolu_1",
             "output": "{\"files\":[\"a\"]}"},
            {"type": "function_call_output", "call_id": "toolu_2",
             "output": "{\"error\":\"denied\"}"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "It has a."}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "thanks, "},
                {"type": "input_text", "text": "bye"}
            ]}
        ])
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn fake_flags_broken_requests() {
    let fake = FakeResponses::start().await;
    // No key configured: the bearer header is missing.
    let mut cfg = config(&fake);
    cfg.api_key = None;
    let p = OpenAiProvider::new(cfg, reqwest::Client::new()).unwrap();
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
    assert!(v.iter().any(|s| s.contains("Bearer")), "{v:?}");
    assert!(v.iter().any(|s| s.contains("nobody_called_me")), "{v:?}");
}

#[tokio::test]
async fn concurrent_requests_are_all_recorded() {
    let fake = FakeResponses::start().await;
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
