//! The fakes fail closed: a request that breaks the platform's rules gets
//! the platform's own error, not the scripted answer, and a test that never
//! reads the violations fails when the fake is dropped.

#![expect(
    clippy::expect_used,
    reason = "helpers of tests: what they cannot do fails the test"
)]

use hearth_testkit::fake_anthropic::FakeAnthropic;
use hearth_testkit::fake_discord::FakeDiscord;
use hearth_testkit::fake_gemini::FakeGemini;
use hearth_testkit::fake_responses::FakeResponses;
use hearth_testkit::fake_slack::{self, FakeSlack};
use hearth_testkit::fake_telegram::FakeTelegram;
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

const JSON: &str = "application/json";

/// POSTs `body` to `url` with `headers`; the status and the JSON answer.
async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    let mut req = reqwest::Client::new().post(url).body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the fake answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn chat(model: &str, messages: Value) -> Value {
    json!({"model": model, "messages": messages, "stream": true})
}

#[tokio::test]
async fn openai_refuses_what_openai_refuses_and_keeps_the_scripted_reply() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("scripted"));
    let url = format!("{}/chat/completions", fake.base_url());
    let auth = ("authorization", "Bearer sk-test");
    let ct = ("content-type", JSON);
    let hi = json!([{"role": "user", "content": "hi"}]);

    let (status, body) = post(&url, &[ct], &chat("m", hi.clone())).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let (status, body) = post(&url, &[auth, ct], &json!({"messages": hi})).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("model"));
    let (status, _) = post(&url, &[auth, ct], &chat("m", json!([]))).await;
    assert_eq!(status, 400);
    let (status, _) = post(
        &url,
        &[auth, ("content-type", "text/plain")],
        &chat("m", hi.clone()),
    )
    .await;
    assert_eq!(status, 400);
    let orphan = json!([{"role": "tool", "tool_call_id": "x", "content": "{}"}]);
    let (status, _) = post(&url, &[auth, ct], &chat("m", orphan)).await;
    assert_eq!(status, 400);

    // The scripted reply was left for the first request that keeps the rules.
    let (status, body) = post(&url, &[auth, ct], &chat("m", hi)).await;
    assert_eq!(status, 200);
    // The scripted text, streamed in pieces.
    assert!(
        body.as_str().unwrap().contains("\"content\":\"scr\""),
        "{body}"
    );
    let v = fake.violations();
    assert_eq!(v.len(), 5, "{v:#?}");
    assert!(v[0].contains("Authorization"), "{v:#?}");
}

#[tokio::test]
#[should_panic(expected = "FakeOpenAi dropped with violations the test never read")]
async fn openai_dropped_with_unread_violations_fails_the_test() {
    let fake = FakeOpenAi::start().await;
    let url = format!("{}/chat/completions", fake.base_url());
    post(&url, &[], &json!({})).await;
}

#[tokio::test]
async fn anthropic_gemini_and_responses_refuse_a_request_without_a_key() {
    let anthropic = FakeAnthropic::start().await;
    let body = json!({"model": "m", "max_tokens": 16, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let url = format!("{}/v1/messages", anthropic.base_url());
    let (status, answer) = post(
        &url,
        &[("content-type", JSON), ("anthropic-version", "2023-06-01")],
        &body,
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["type"]),
        (401, &json!("authentication_error"))
    );
    let headers = [
        ("content-type", JSON),
        ("anthropic-version", "2023-06-01"),
        ("x-api-key", "k"),
    ];
    let (status, answer) = post(&url, &headers, &json!({"model": "m", "stream": true})).await;
    assert_eq!(
        (status, &answer["error"]["type"]),
        (400, &json!("invalid_request_error"))
    );
    assert_eq!(anthropic.violations().len(), 3);

    let gemini = FakeGemini::start().await;
    let url = format!(
        "{}/models/m:streamGenerateContent?alt=sse",
        gemini.base_url()
    );
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let (status, answer) = post(&url, &[("content-type", JSON)], &body).await;
    assert_eq!(
        (status, &answer["error"]["status"]),
        (403, &json!("PERMISSION_DENIED"))
    );
    let (status, answer) = post(
        &url,
        &[("content-type", JSON), ("x-goog-api-key", "k")],
        &json!({"contents": []}),
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["status"]),
        (400, &json!("INVALID_ARGUMENT"))
    );
    assert_eq!(gemini.violations().len(), 2);

    let responses = FakeResponses::start().await;
    let url = format!("{}/responses", responses.base_url());
    let body = json!({"model": "m", "stream": true, "input": [{"role": "user", "content": "hi"}]});
    let (status, _) = post(&url, &[("content-type", JSON)], &body).await;
    assert_eq!(status, 401);
    let (status, _) = post(
        &url,
        &[("content-type", JSON), ("authorization", "Bearer k")],
        &json!({"model": "m"}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(responses.violations().len(), 3);
}

#[tokio::test]
async fn slack_answers_ok_false_to_arguments_it_refuses() {
    let slack = FakeSlack::start().await.unwrap();
    let url = format!("{}/chat.postMessage", slack.api_base());
    let auth = format!("Bearer {}", fake_slack::BOT_TOKEN);
    let headers = [("authorization", auth.as_str()), ("content-type", JSON)];
    let (status, answer) = post(&url, &headers, &json!({"channel": "C1"})).await;
    assert_eq!(status, 200);
    assert_eq!(answer["ok"], false);
    assert_eq!(answer["error"], "invalid_arguments");
    assert!(slack.messages().is_empty(), "nothing was posted");
    let (_, answer) = post(&url, &headers, &json!({"channel": "C1", "text": "hi"})).await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(slack.violations().len(), 1);
}

#[tokio::test]
#[should_panic(expected = "FakeSlack dropped with violations the test never read")]
async fn slack_dropped_with_unread_violations_fails_the_test() {
    let slack = FakeSlack::start().await.unwrap();
    let url = format!("{}/chat.postMessage", slack.api_base());
    let auth = format!("Bearer {}", fake_slack::BOT_TOKEN);
    post(
        &url,
        &[("authorization", auth.as_str()), ("content-type", JSON)],
        &json!({}),
    )
    .await;
}

#[tokio::test]
async fn discord_refuses_an_edit_it_would_refuse_and_changes_nothing() {
    let discord = FakeDiscord::start("tok").await;
    let url = format!("{}/channels/100/messages", discord.api_base());
    let headers = [("authorization", "Bot tok"), ("content-type", JSON)];
    let (status, sent) = post(&url, &headers, &json!({"content": "first"})).await;
    assert_eq!(status, 200, "{sent}");
    let id = sent["id"].as_str().unwrap().to_owned();
    let too_long = "x".repeat(2001);
    let resp = reqwest::Client::new()
        .patch(format!("{url}/{id}"))
        .header("authorization", "Bot tok")
        .header("content-type", JSON)
        .body(json!({"content": too_long}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["code"], 50035);
    assert_eq!(discord.messages()[0].content, "first");
    assert_eq!(discord.violations().len(), 1);
}

/// A post to a channel before the `retry_after` of its 429 is refused with
/// 429 again and counted; another channel is not held back.
#[tokio::test]
async fn discord_refuses_a_post_before_retry_after_and_counts_it() {
    let discord = FakeDiscord::start("tok").await;
    let to = |channel: &str| format!("{}/channels/{channel}/messages", discord.api_base());
    let headers = [("authorization", "Bot tok"), ("content-type", JSON)];
    let body = json!({"content": "x"});
    discord.rate_limit_messages(1, 5.0);
    let (status, answer) = post(&to("100"), &headers, &body).await;
    assert_eq!((status, &answer["retry_after"]), (429, &json!(5.0)));
    assert!(
        discord.violations().is_empty(),
        "the 429 itself is scripted"
    );
    assert_eq!(post(&to("200"), &headers, &body).await.0, 200);
    let (status, answer) = post(&to("100"), &headers, &body).await;
    assert_eq!(status, 429);
    assert!(answer["retry_after"].as_f64().unwrap() <= 5.0, "{answer}");
    let violations = discord.violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0].contains("before the retry_after"),
        "{violations:?}"
    );
    assert_eq!(discord.messages().len(), 1);
}

#[tokio::test]
#[should_panic(expected = "FakeDiscord dropped with violations the test never read")]
async fn discord_dropped_with_unread_violations_fails_the_test() {
    let discord = FakeDiscord::start("tok").await;
    let url = format!("{}/channels/100/messages", discord.api_base());
    post(
        &url,
        &[("authorization", "Bot wrong")],
        &json!({"content": "x"}),
    )
    .await;
}

#[tokio::test]
#[should_panic(expected = "FakeTelegram dropped with rejected requests the test never read")]
async fn telegram_dropped_with_unread_rejections_fails_the_test() {
    let telegram = FakeTelegram::start("1:tok").await;
    let url = format!("{}/bot1:tok/sendMessage", telegram.url());
    post(&url, &[("content-type", JSON)], &json!({"chat_id": 42})).await;
}

#[tokio::test]
async fn openai_embeddings_answer_the_tests_vectors_and_refuse_broken_requests() {
    let fake = FakeOpenAi::start().await;
    fake.embed_with(|text| {
        if text == "car" {
            vec![1.0, 0.0]
        } else {
            vec![0.0, 1.0]
        }
    });
    let url = format!("{}/embeddings", fake.base_url());
    let auth = ("authorization", "Bearer sk-test");
    let ct = ("content-type", JSON);

    let (status, body) = post(
        &url,
        &[auth, ct],
        &json!({"model": "e", "input": ["car", "x"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], "e");
    assert_eq!(body["data"][0]["object"], "embedding");
    assert_eq!(body["data"][0]["index"], 0);
    assert_eq!(body["data"][0]["embedding"], json!([1.0, 0.0]));
    assert_eq!(body["data"][1]["embedding"], json!([0.0, 1.0]));
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        body["usage"]["total_tokens"],
        body["usage"]["prompt_tokens"]
    );
    let (status, body) = post(&url, &[auth, ct], &json!({"model": "e", "input": "car"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    assert!(fake.violations().is_empty());

    let (status, _) = post(&url, &[ct], &json!({"model": "e", "input": "car"})).await;
    assert_eq!(status, 401);
    let (status, _) = post(&url, &[auth, ct], &json!({"input": "car"})).await;
    assert_eq!(status, 400);
    let (status, _) = post(&url, &[auth, ct], &json!({"model": "e", "input": []})).await;
    assert_eq!(status, 400);
    let (status, _) = post(&url, &[auth, ct], &json!({"model": "e", "input": ""})).await;
    assert_eq!(status, 400);
    let (status, _) = post(
        &url,
        &[auth, ("content-type", "text/plain")],
        &json!({"model": "e", "input": "a"}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(fake.violations().len(), 5, "{:?}", fake.violations());
    assert_eq!(fake.embedding_requests().len(), 7);
    assert!(
        fake.requests().is_empty(),
        "embeddings are not chat requests"
    );
}

#[tokio::test]
#[should_panic(expected = "unread embeddings violations")]
async fn openai_embeddings_violations_never_read_fail_the_test() {
    let fake = FakeOpenAi::start().await;
    let url = format!("{}/embeddings", fake.base_url());
    let _ = post(
        &url,
        &[("content-type", JSON)],
        &json!({"model": "e", "input": "a"}),
    )
    .await;
}
