//! Native adapters end to end: one conversation moves across providers.

use hearth_testkit::fake_anthropic::{AnthropicReply, FakeAnthropic};
use hearth_testkit::fake_gemini::{FakeGemini, GeminiReply};
use hearth_testkit::fake_responses::{FakeResponses, ResponsesReply};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::json;

use crate::harness::{Hearth, fake_config};

#[tokio::test]
async fn a_conversation_with_tools_continues_across_providers() {
    let openai = FakeOpenAi::start().await;
    let anthropic = FakeAnthropic::start().await;
    let gemini = FakeGemini::start().await;
    let responses = FakeResponses::start().await;
    let config = format!(
        "{}\n[llm.providers.claude]\ntype = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"TEST_ANTHROPIC_KEY\"\nmodels = [\"claude-test\"]\n\
         [llm.providers.gem]\ntype = \"gemini\"\nbase_url = \"{}\"\napi_key_env = \"TEST_GEMINI_KEY\"\nmodels = [\"gemini-test\"]\n\
         [llm.providers.oai]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"TEST_GEMINI_KEY\"\nmodels = [\"gpt-test\"]\n",
        fake_config(&openai.base_url()),
        anthropic.base_url(),
        gemini.base_url(),
        responses.base_url()
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start_with(
        dir.path(),
        Some(&config),
        &[
            ("TEST_ANTHROPIC_KEY", "ak-test"),
            ("TEST_GEMINI_KEY", "gk-test"),
        ],
    )
    .await;
    let thread = "api:travel";

    // 1. OpenAI-compatible, with a tool call.
    openai.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_a",
        "current_time",
        r#"{"timezone":"Asia/Tokyo"}"#,
    )]));
    openai.push(Reply::text("It is evening in Tokyo."));
    assert_eq!(
        h.ask(thread, "time in Tokyo?").await["output"]["text"],
        "It is evening in Tokyo."
    );

    // 2. Switch to Anthropic: it gets the whole history in its own format, with thinking on.
    let r = h
        .http
        .put(h.at(&format!("/v1/threads/{thread}/model")))
        .json(&json!({ "model": "claude/claude-test" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    h.http
        .put(h.at(&format!("/v1/threads/{thread}/thinking")))
        .json(&json!({ "level": "low" }))
        .send()
        .await
        .unwrap();
    anthropic.push(
        AnthropicReply::tool_uses(vec![(
            "toolu_1".to_owned(),
            "current_time".to_owned(),
            r#"{"timezone":"Europe/Paris"}"#.to_owned(),
        )])
        .with_thinking("Paris is UTC+1.", "sig-anthropic"),
    );
    anthropic.push(AnthropicReply::text("And morning in Paris."));
    let v = h.ask(thread, "and in Paris?").await;
    assert_eq!(v["output"]["text"], "And morning in Paris.");
    assert_eq!(v["model"], "claude/claude-test");
    assert!(
        anthropic.violations().is_empty(),
        "{:?}",
        anthropic.violations()
    );
    let reqs = anthropic.requests();
    assert_eq!(reqs.len(), 2);
    let first = reqs[0].to_string();
    assert!(
        first.contains("call_a") && first.contains("tool_result"),
        "history reached Anthropic: {first}"
    );
    assert_eq!(reqs[0]["thinking"]["type"], "enabled");
    // The signed thinking goes back to Anthropic on the tool-result turn.
    assert!(reqs[1].to_string().contains("sig-anthropic"));

    // 3. Switch to Gemini: history converts again, Anthropic's signature stays behind.
    h.http
        .put(h.at(&format!("/v1/threads/{thread}/model")))
        .json(&json!({ "model": "gem/gemini-test" }))
        .send()
        .await
        .unwrap();
    gemini.push(GeminiReply::text("Both cities noted."));
    assert_eq!(
        h.ask(thread, "summarise").await["output"]["text"],
        "Both cities noted."
    );
    assert!(gemini.violations().is_empty(), "{:?}", gemini.violations());
    let body = gemini.requests().pop().unwrap().to_string();
    assert!(
        body.contains("functionResponse") && body.contains("current_time"),
        "{body}"
    );
    assert!(
        !body.contains("sig-anthropic"),
        "a signature never goes to another provider"
    );
    assert!(gemini.request_paths()[0].contains("gemini-test:streamGenerateContent"));

    // 4. OpenAI's Responses API: tool calls become function_call items.
    h.http
        .put(h.at(&format!("/v1/threads/{thread}/model")))
        .json(&json!({ "model": "oai/gpt-test" }))
        .send()
        .await
        .unwrap();
    responses.push(ResponsesReply::text("Noted in Responses."));
    assert_eq!(
        h.ask(thread, "one more").await["output"]["text"],
        "Noted in Responses."
    );
    assert!(
        responses.violations().is_empty(),
        "{:?}",
        responses.violations()
    );
    let body = responses.requests().pop().unwrap().to_string();
    assert!(
        body.contains("function_call_output") && body.contains("call_a"),
        "{body}"
    );
    assert!(!body.contains("sig-anthropic"));

    // 5. Back to the first provider: still one coherent history.
    h.http
        .put(h.at(&format!("/v1/threads/{thread}/model")))
        .json(&json!({ "model": "fake/fake-model" }))
        .send()
        .await
        .unwrap();
    h.ask(thread, "thanks").await;
    assert!(openai.violations().is_empty(), "{:?}", openai.violations());
    let last = openai.requests().pop().unwrap();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| **r == "tool").count(),
        2,
        "{roles:?}"
    );

    let (_, models) = h.get("/v1/models").await;
    let claude = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "claude/claude-test")
        .unwrap();
    assert_eq!(claude["capabilities"]["thinking"], true);
}
