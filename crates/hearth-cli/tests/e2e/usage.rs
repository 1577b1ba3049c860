//! Usage and cost: every model call is counted, priced when a price is known.

use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::json;

use crate::harness::{Hearth, command, fake_config};

#[tokio::test]
async fn usage_counts_every_call_and_prices_it_when_a_price_is_known() {
    let fake = FakeOpenAi::start().await;
    // Default fake usage per call: 12 prompt (3 cached), 7 completion.
    let config = format!(
        "{}\n[llm.prices.\"fake-model\"]\ninput = 1.0\noutput = 2.0\ncached = 0.5\n",
        fake_config(&fake.base_url())
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&config)).await;
    h.ask("api:u1", "one").await;
    h.ask("api:u2", "two").await;
    fake.push(Reply::text("no usage reported").without_usage());
    h.ask("api:u2", "three").await;
    fake.push(
        Reply::http_error(429, json!({"error": {"message": "slow"}}))
            .with_header("retry-after", "0"),
    );
    h.ask("api:u3", "four").await;

    let (s, v) = h.get("/v1/usage?group_by=model").await;
    assert_eq!(s, 200, "{v}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    let r = &rows[0];
    assert_eq!(r["key"], "fake/fake-model");
    assert_eq!(r["calls"], 5, "4 answers + 1 rate-limited attempt: {r}");
    assert_eq!(
        r["untracked_calls"], 2,
        "no usage reported + the failed attempt: {r}"
    );
    assert_eq!(r["input_tokens"], 36);
    assert_eq!(r["output_tokens"], 21);
    assert_eq!(r["cached_tokens"], 9);
    // (36-9)*1.0 + 9*0.5 + 21*2.0 = 73.5 per million.
    assert_eq!(r["cost_usd"], json!(0.0000735));

    let (_, by_day) = h.get("/v1/usage?group_by=day&since=today").await;
    assert_eq!(by_day["rows"][0]["calls"], 5);
    let (s, v) = h.get("/v1/usage?group_by=week").await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_request"))
    );
    let (s, _) = h.get("/v1/usage?since=last-tuesday").await;
    assert_eq!(s, 400);

    let out = command(dir.path())
        .env("HEARTH_URL", &h.url)
        .args(["usage", "--by", "model"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("fake/fake-model") && text.contains("$0.000073"),
        "{text}"
    );
    let text = crate::harness::succeeds(
        command(dir.path())
            .env("HEARTH_URL", &h.url)
            .args(["model", "status", "--thread", "api:u1"]),
    )
    .await;
    assert!(
        text.contains("fake/fake-model") && text.contains("tools") && text.contains("5 calls"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unpriced_model_reports_cost_as_null() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    h.ask("api:np", "hi").await;
    let (_, v) = h.get("/v1/usage").await;
    assert_eq!(v["rows"][0]["key"], "fake");
    assert!(v["rows"][0]["cost_usd"].is_null(), "{v}");
    // The echo provider reports no usage: counted as untracked, not priced.
    h.http
        .put(h.at("/v1/threads/api:np/model"))
        .json(&json!({"model": "echo/echo"}))
        .send()
        .await
        .unwrap();
    h.ask("api:np", "hi again").await;
    let (_, v) = h.get("/v1/usage").await;
    let echo = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "echo")
        .unwrap();
    assert_eq!(
        (echo["calls"].as_u64(), echo["untracked_calls"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(echo["cost_usd"].is_null());
}
