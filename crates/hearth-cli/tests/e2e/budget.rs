//! Budget pools in the real binary: a used-up pool refuses the run with
//! `budget_exceeded`, `GET /v1/budget` and `hearth budget` show the numbers,
//! they survive a restart, cancelled calls count, and a bad pool is a
//! config error (exit 2).

use std::time::Duration;

use serde_json::{Value, json};

use hearth_testkit::{FakeOpenAi, Reply};

use crate::harness::{Hearth, command, fake_config, parse_sse};

fn config(base_url: &str) -> String {
    format!(
        "{}\n[llm.prices.\"fake-model\"]\ninput = 1.0\noutput = 2.0\ncached = 0.5\n\
         [budget]\nglobal_daily_usd = 100\n\
         [[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 2\nscope = \"user\"\n\
         models = [\"fake/*\"]\n",
        fake_config(base_url)
    )
}

#[tokio::test]
async fn a_used_up_pool_refuses_the_run_and_the_budget_shows_it() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&config(&fake.base_url()))).await;
    h.ask("api:b1", "one").await;
    h.ask("api:b2", "two").await;
    let refused = h.ask("api:b3", "three").await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert_eq!(refused["error"]["code"], "budget_exceeded");
    let message = refused["error"]["message"].as_str().unwrap();
    for part in [
        "\"calls\"",
        "api:user:anonymous",
        "2 requests used of 2 requests",
        "resets at",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert_eq!(fake.request_count(), 2, "the refused run called no model");
    assert_eq!(
        fake.requests()[0]["max_tokens"],
        4096,
        "[agent] max_output_tokens goes to the provider"
    );

    let (s, v) = h.get("/v1/budget").await;
    assert_eq!(s, 200, "{v}");
    let pools = v["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2, "{v}");
    let calls = &pools[0];
    let resets_at = calls["resets_at"].as_str().unwrap().to_owned();
    assert!(
        resets_at.ends_with("T00:00:00.000Z"),
        "UTC midnight: {resets_at}"
    );
    assert_eq!(
        calls,
        &json!({
            "name": "calls", "kind": "requests", "scope": "user",
            "subject": "api:user:anonymous", "limit": 2.0, "used": 2.0, "reserved": 0.0,
            "resets_at": resets_at,
        })
    );
    // Default fake usage per call: 12 prompt (3 cached), 7 completion:
    // (9 * 1.0 + 3 * 0.5 + 7 * 2.0) per million = $0.0000245.
    let global = &pools[1];
    assert_eq!(
        (
            &global["name"],
            &global["kind"],
            &global["subject"],
            &global["used"]
        ),
        (
            &json!("global_daily_usd"),
            &json!("cost_usd"),
            &json!(null),
            &json!(0.000049)
        ),
        "{global}"
    );

    let text =
        crate::harness::succeeds(command(dir.path()).env("HEARTH_URL", &h.url).arg("budget")).await;
    assert!(
        text.contains("calls") && text.contains("user:api:user:anonymous") && text.contains("100%"),
        "{text}"
    );

    let (_, metrics) = h.get("/metrics").await;
    let metrics = metrics.as_str().unwrap();
    assert!(
        metrics.contains("hearth_budget_used{pool=\"calls\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hearth_budget_limit{pool=\"global_daily_usd\"} 100"),
        "{metrics}"
    );

    // The use is rebuilt from the store after a restart.
    h.terminate().await;
    let h = Hearth::start(dir.path(), None).await;
    let (_, v) = h.get("/v1/budget").await;
    assert_eq!(v["pools"][0]["used"], 2.0, "{v}");
    let refused = h.ask("api:b4", "four").await;
    assert_eq!(refused["error"]["code"], "budget_exceeded", "{refused}");
}

/// Reads `run_id`'s event stream until its first `text.delta`.
async fn first_delta(h: &Hearth, run_id: &str) {
    let mut r = h
        .http
        .get(h.at(&format!("/v1/runs/{run_id}/events")))
        .send()
        .await
        .unwrap();
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = r.chunk().await.unwrap() {
            body.push_str(&String::from_utf8_lossy(&chunk));
            if parse_sse(&body).iter().any(|(_, ev, _)| ev == "text.delta") {
                return;
            }
        }
        panic!("the event stream ended without a text.delta: {body}");
    })
    .await
    .expect("no text.delta within 30 s");
}

#[tokio::test]
async fn cancelled_streamed_calls_count_against_a_requests_pool() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&config(&fake.base_url()))).await;
    for i in 0..2 {
        // The first piece of the answer streams, the rest never comes.
        fake.push(
            Reply::text("a long answer, cut off after its first piece")
                .in_pieces(4)
                .stalling_after(2),
        );
        let (s, v) = h
            .post(json!({ "text": "tell me a story", "thread_key": format!("api:cut{i}") }))
            .await;
        assert_eq!(s, 202, "{v}");
        let run_id = v["run_id"].as_str().unwrap().to_owned();
        first_delta(&h, &run_id).await;
        let (s, v) = h
            .send(
                reqwest::Method::POST,
                &format!("/v1/runs/{run_id}/cancel"),
                json!({}),
            )
            .await;
        assert_eq!((s, v["status"].as_str()), (200, Some("cancelled")), "{v}");
    }
    let (_, v) = h.get("/v1/budget").await;
    assert_eq!(
        (&v["pools"][0]["used"], &v["pools"][0]["reserved"]),
        (&json!(2.0), &json!(0.0)),
        "{v}"
    );
    let refused = h.ask("api:cut2", "and another").await;
    assert_eq!(refused["error"]["code"], "budget_exceeded", "{refused}");
    assert_eq!(fake.request_count(), 2, "the third call was never sent");
    // Usage shows both calls, and a restart still counts them.
    let (_, usage) = h.get("/v1/usage?group_by=model").await;
    assert_eq!(usage["rows"][0]["calls"], 2, "{usage}");
    h.terminate().await;
    let h = Hearth::start(dir.path(), None).await;
    let (_, v): (u16, Value) = h.get("/v1/budget").await;
    assert_eq!(v["pools"][0]["used"], 2.0, "{v}");
}

#[tokio::test]
async fn a_bad_pool_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, says) in [
        (
            "[[budget.pools]]\nname = \"x\"\nkind = \"tokens\"\nlimit = -5\n",
            "above 0",
        ),
        (
            "[[budget.pools]]\nname = \"x\"\nkind = \"tokens\"\nlimit = 5\nwindow = \"fortnight\"\n",
            "fortnight",
        ),
        ("[llm.prices.\"m\"]\ninput = 1.0\n", "free = true"),
    ] {
        std::fs::write(dir.path().join("hearth.toml"), toml).unwrap();
        let out = command(dir.path())
            .args(["serve", "--bind", "127.0.0.1:0"])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{toml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{says}: {err}");
    }
}
