//! The dashboard as a person uses it: the real binary, headless Chromium,
//! the fake provider. Every page visited is checked for console errors
//! (failed requests, CSP violations) and, with axe-core, for serious
//! accessibility violations. Screenshots go to `<target>/dashboard-screenshots`.

mod actions;
mod browser;

use std::time::Duration;

use fantoccini::Locator;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

const USER: &str = "api:user:dash-alice";

fn enc(s: &str) -> String {
    s.replace(':', "%3A")
}

/// A token made by `hearth token create` on `home`.
async fn make_token(home: &std::path::Path, name: &str) -> String {
    make_token_with(home, name, &[]).await
}

/// The same with `extra` arguments (`--user <key>`).
async fn make_token_with(home: &std::path::Path, name: &str, extra: &[&str]) -> String {
    let out = command(home)
        .args(["token", "create", "--name", name])
        .args(extra)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn a_token_logs_in_a_bad_one_does_not_and_every_page_is_clean() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = make_token(dir.path(), "operator").await;
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    b.c.goto(&h.at("/ui/runs")).await.unwrap();
    let url = b.c.current_url().await.unwrap();
    assert_eq!(
        (url.path(), url.query()),
        ("/ui/login", Some("next=%2Fui%2Fruns"))
    );
    b.check_page("the login page").await;
    b.find("#token")
        .await
        .send_keys("hth_not_a_real_token")
        .await
        .unwrap();
    b.c.find(Locator::Css("form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let err = b.find("#login-error").await.text().await.unwrap();
    assert!(err.contains("not a valid API token"), "{err}");
    // The refused login answered 401: the console logs it, which is expected here.
    let _ = b.console_errors().await;

    b.find("#token").await.send_keys(&token).await.unwrap();
    b.c.find(Locator::Css("form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.find("#live").await;
    assert_eq!(
        b.c.current_url().await.unwrap().path(),
        "/ui/runs",
        "back where the login began"
    );

    let r = h
        .http
        .post(h.at("/v1/messages"))
        .bearer_auth(&token)
        .json(&json!({ "text": "hello", "thread_key": "api:dash", "wait": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    for page in [
        "/ui",
        "/ui/runs",
        "/ui/confirmations",
        "/ui/threads",
        "/ui/threads/api%3Adash",
        "/ui/usage",
        "/ui/budget",
        "/ui/router",
        "/ui/jobs",
        "/ui/channels",
        "/ui/mcp",
        "/ui/skills",
        "/ui/memory?user_key=api%3Auser%3Aanonymous&q=cat",
        "/ui/settings",
        "/ui/logout",
    ] {
        b.visit(&h.at(page)).await;
        let h1 = b.find("h1").await.text().await.unwrap();
        assert!(!h1.is_empty() && !h1.contains("Not found"), "{page}: {h1}");
    }
    b.visit(&h.at("/ui")).await;
    b.find("#runs-per-min").await;
    let slots =
        b.c.find_all(Locator::Css("#runs-hour rect.bar"))
            .await
            .unwrap();
    assert_eq!(slots.len(), 12, "five-minute slots of the last hour");
    let paint = b
        .c
        .execute(
            "const p = performance.getEntriesByName('first-contentful-paint')[0]; return p ? p.startTime : null",
            vec![],
        )
        .await
        .unwrap();
    eprintln!("overview first contentful paint: {paint} ms");
    b.screenshots("overview").await;

    // Logging out ends the session: the next page asks for the token again.
    b.visit(&h.at("/ui/logout")).await;
    b.c.find(Locator::Css("main form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.find("#token").await;
    b.c.goto(&h.at("/ui/settings")).await.unwrap();
    assert_eq!(b.c.current_url().await.unwrap().path(), "/ui/login");
    let _ = b.c.clone().close().await;
}

/// Saves a memory for [`USER`] through the model; its id.
async fn saved_memory(h: &Hearth, fake: &FakeOpenAi, text: &str) -> i64 {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "s1",
        "memory_save",
        json!({ "text": text }).to_string(),
    )]));
    fake.push(Reply::text("noted"));
    let (s, v) = h.post(json!({ "text": "remember", "thread_key": "api:dash-conf", "user_key": USER, "wait": true })).await;
    assert_eq!(s, 200, "{v}");
    let out = command(&h.home)
        .args(["memory", "export", "--user", USER])
        .output()
        .await
        .unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["text"] == text)
        .unwrap()["id"]
        .as_i64()
        .unwrap()
}

/// A run waiting for the confirmation of `memory_forget(id)`; its id.
async fn waiting_forget(h: &Hearth, fake: &FakeOpenAi, id: i64, then: &str) -> String {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": id }).to_string(),
    )]));
    fake.push(Reply::text(then));
    let (s, v) = h.post(json!({ "text": "forget it", "thread_key": "api:dash-conf", "user_key": USER, "wait": true })).await;
    assert_eq!(
        (s, v["status"].as_str()),
        (202, Some("awaiting_confirmation")),
        "{v}"
    );
    v["run_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_run_appears_live_its_trace_opens_and_confirmations_are_answered() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    b.visit(&h.at("/ui/runs")).await;
    fake.push(Reply::text("hello from the fake"));
    let (s, v) = h
        .post(json!({ "text": "hi", "thread_key": "api:dash-live" }))
        .await;
    assert_eq!(s, 202, "{v}");
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    // No reload: the list redraws itself when the event stream tells of the run.
    b.until_text("#live", &run_id).await;
    b.click(&format!("#run-{run_id} a")).await;
    b.find("#trace").await;
    b.until_text("#run-status", "succeeded").await;
    assert_eq!(b.text("#run-id").await, run_id);
    b.check_page("a run's trace").await;
    b.screenshots("run-trace").await;

    let id = saved_memory(&h, &fake, "The cat is called Miso").await;
    let approved = waiting_forget(&h, &fake, id, "forgotten").await;
    b.visit(&h.at("/ui/confirmations")).await;
    b.until_text(&format!("#confirm-{approved}"), "memory_forget")
        .await;
    b.screenshots("confirmations").await;
    b.submit(&format!("#confirm-{approved} button[value=\"true\"]"))
        .await;
    b.check_page("the queue after Approve").await;
    b.visit(&h.at(&format!("/ui/runs/{approved}"))).await;
    b.until_text("#run-status", "succeeded").await;
    b.until_text("#live", "forgotten").await;

    let id = saved_memory(&h, &fake, "The dog is called Pip").await;
    // The queue is open before the question is asked: it appears live.
    b.visit(&h.at("/ui/confirmations")).await;
    let denied = waiting_forget(&h, &fake, id, "kept it").await;
    b.submit(&format!("#confirm-{denied} button[value=\"false\"]"))
        .await;
    b.visit(&h.at(&format!("/ui/runs/{denied}"))).await;
    b.until_text("#run-status", "succeeded").await;
    let out = command(&h.home)
        .args(["memory", "export", "--user", USER])
        .output()
        .await
        .unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        all["memories"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["text"] == "The dog is called Pip"),
        "denied: kept"
    );
    // An answered question cannot be answered again.
    let r = reqwest::Client::new()
        .post(h.at(&format!("/ui/confirmations/{denied}")))
        .header("origin", h.at(""))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("approve=true&csrf={}", csrf_of(&b).await))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let _ = b.c.clone().close().await;
}

/// The page's CSRF token (from its meta tag).
async fn csrf_of(b: &browser::Browser) -> String {
    let v =
        b.c.execute(
            "return document.querySelector('meta[name=csrf]').content",
            vec![],
        )
        .await
        .unwrap();
    v.as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_message_sent_from_a_thread_page_streams_its_answer() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    b.visit(&h.at(&format!("/ui/threads/{}", enc("api:dash-thread"))))
        .await;
    fake.push(
        Reply::text("an answer that arrives in pieces")
            .in_pieces(5)
            .with_delay(Duration::from_millis(30)),
    );
    b.find("#text")
        .await
        .send_keys("hello there")
        .await
        .unwrap();
    b.c.find(Locator::XPath("//button[normalize-space()='Send']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.until_text("#answer-text", "an answer that arrives in pieces")
        .await;
    b.find("#answer[data-done=\"run.succeeded\"]").await;
    b.until_text("#history-box", "hello there").await;
    b.check_page("a thread after sending").await;
    let _ = b.c.clone().close().await;
}

/// Days ago as unix ms (noon UTC of that day, so the day is unambiguous).
fn days_ago(n: i64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let day = 86_400_000;
    (now / day - n) * day + day / 2
}

#[tokio::test]
async fn the_usage_chart_has_a_bar_per_day_split_by_model_and_the_csv_matches_the_api() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    // Seeded model calls on three days of the last 30 (yesterday, 3 and 20
    // days ago; none today, whose noon may be ahead) and one 40 days ago.
    let db = rusqlite::Connection::open(h.home.join("hearth.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    for (i, (ago, model)) in [
        (1, "fake-model"),
        (1, "other-model"),
        (3, "fake-model"),
        (20, "other-model"),
        (40, "fake-model"),
    ]
    .iter()
    .enumerate()
    {
        db.execute(
            "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, output_tokens, latency_ms, status)
             VALUES (?1, 0, ?2, 'fake', ?3, 'answer', 100, 20, 5, 'ok')",
            rusqlite::params![format!("seed-{i}"), days_ago(*ago), model],
        )
        .unwrap();
    }
    b.visit(&h.at("/ui/usage")).await;
    let days =
        b.c.find_all(Locator::Css("#usage-chart g.day"))
            .await
            .unwrap();
    assert_eq!(
        days.len(),
        3,
        "one bar per day with calls in the last 30 days"
    );
    // Each day's bar is split by model: yesterday's holds both.
    let mut split = Vec::new();
    for d in &days {
        let mut models = Vec::new();
        for seg in d.find_all(Locator::Css("rect.bar")).await.unwrap() {
            models.push(seg.attr("data-model").await.unwrap().unwrap());
        }
        split.push(models.join("+"));
    }
    assert_eq!(
        split,
        [
            "fake/other-model",
            "fake/fake-model",
            "fake/fake-model+fake/other-model"
        ],
        "20, 3 and 1 days ago"
    );
    let legend = b.find("#usage-legend").await.text().await.unwrap();
    assert!(legend.contains("fake/other-model"), "{legend}");

    for group in ["day", "model", "provider"] {
        let q = format!("since=30d&group_by={group}");
        let csv = reqwest::get(h.at(&format!("/ui/usage.csv?{q}")))
            .await
            .unwrap();
        assert_eq!(csv.headers()["content-type"], "text/csv; charset=utf-8");
        let csv = csv.text().await.unwrap();
        let (_, api) = h.get(&format!("/v1/usage?{q}")).await;
        let mut want = String::from(
            "key,calls,input_tokens,output_tokens,cached_tokens,cost_usd,untracked_calls\n",
        );
        for r in api["rows"].as_array().unwrap() {
            let cost = r["cost_usd"]
                .as_f64()
                .map(|c| c.to_string())
                .unwrap_or_default();
            want.push_str(&format!(
                "{},{},{},{},{},{},{}\n",
                r["key"].as_str().unwrap(),
                r["calls"],
                r["input_tokens"],
                r["output_tokens"],
                r["cached_tokens"],
                cost,
                r["untracked_calls"]
            ));
        }
        assert_eq!(csv, want, "{group}");
        assert!(csv.lines().count() > 1, "{group}: {csv}");
    }
    let _ = b.c.clone().close().await;
}

#[tokio::test]
async fn a_running_run_is_cancelled_and_a_job_is_run_now_from_their_pages() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    fake.push(Reply::hang());
    let (s, v) = h
        .post(json!({ "text": "take your time", "thread_key": "api:dash-cancel" }))
        .await;
    assert_eq!(s, 202, "{v}");
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    b.visit(&h.at(&format!("/ui/runs/{run_id}"))).await;
    b.until_text("#run-status", "running").await;
    assert_eq!(b.text("#live form button.danger").await, "Cancel run");
    b.click("#live form button.danger").await;
    b.until_text("#run-status", "cancelled").await;
    let (_, run) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(run["status"], "cancelled", "{run}");

    let (s, job) = h
        .send(
            reqwest::Method::POST,
            "/v1/jobs",
            json!({ "name": "daily digest", "schedule": "0 9 * * *", "thread_key": "api:dash-job", "text": "digest" }),
        )
        .await;
    assert_eq!(s, 201, "{job}");
    fake.push(Reply::text("here is the digest"));
    b.visit(&h.at("/ui/jobs")).await;
    b.until_text("#jobs", "daily digest").await;
    b.c.find(Locator::XPath("//button[normalize-space()='Run now']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The run ends within milliseconds, maybe before the page's event
    // stream opens: the page still comes to show the end.
    b.until_text("#run-status", "succeeded").await;
    b.find("#trace").await;
    b.until_text("#live", "here is the digest").await;
    b.check_page("a job's run").await;
    let _ = b.c.clone().close().await;
}

/// Logs in on the login page the browser is at.
async fn log_in(b: &browser::Browser, token: &str) {
    b.find("#token").await.send_keys(token).await.unwrap();
    b.c.find(Locator::Css("form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_members_session_cannot_open_another_users_run() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let operator = make_token(dir.path(), "operator").await;
    let ann = make_token_with(dir.path(), "ann", &["--user", "api:user:ann"]).await;
    let listed = command(dir.path())
        .args(["token", "list"])
        .output()
        .await
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(
        listed.contains("api:user:ann") && listed.contains("operator"),
        "{listed}"
    );
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let send = |token: &str, body: Value| {
        h.http
            .post(h.at("/v1/messages"))
            .bearer_auth(token.to_owned())
            .json(&body)
            .send()
    };
    fake.push(Reply::text("for bob"));
    let bobs: Value = send(
        &operator,
        json!({ "text": "hi", "user_key": "api:user:bob", "thread_key": "api:bob", "wait": true }),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    fake.push(Reply::text("for ann"));
    let anns: Value = send(
        &ann,
        json!({ "text": "hi", "thread_key": "api:ann", "wait": true }),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let (bobs, anns) = (
        bobs["run_id"].as_str().unwrap(),
        anns["run_id"].as_str().unwrap(),
    );

    b.c.goto(&h.at("/ui")).await.unwrap();
    log_in(&b, &ann).await;
    b.find("#runs").await;
    assert_eq!(b.c.current_url().await.unwrap().path(), "/ui/runs");
    b.check_page("a member's runs").await;
    b.find("#runs").await;
    let rows = b.text("#runs").await;
    assert!(rows.contains(anns) && !rows.contains(bobs), "{rows}");
    b.c.goto(&h.at(&format!("/ui/runs/{bobs}"))).await.unwrap();
    let h1 = b.find("h1").await.text().await.unwrap();
    assert_eq!(h1, "Forbidden");
    assert!(
        b.find("main")
            .await
            .text()
            .await
            .unwrap()
            .contains("another user")
    );
    // The 403 answer itself is logged by the browser: expected here.
    let errors = b.console_errors().await;
    assert!(errors.iter().all(|e| e.contains("403")), "{errors:#?}");
    b.visit(&h.at(&format!("/ui/runs/{anns}"))).await;
    b.until_text("#run-status", "succeeded").await;
    let _ = b.c.clone().close().await;
}
