//! The dashboard's actions beyond reading: a job enabled and disabled, a
//! memory deleted and exported, an outbox delivery retried, a thread found
//! by its history, a tool's arguments in a trace.

use std::time::Duration;

use fantoccini::Locator;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use super::browser;
use crate::harness::{Hearth, fake_config};

/// The runs of `thread`, newest first.
async fn runs_of(h: &Hearth, thread: &str) -> Vec<Value> {
    let (s, v) = h
        .get(&format!(
            "/v1/runs?thread_key={}&limit=100",
            super::enc(thread)
        ))
        .await;
    assert_eq!(s, 200, "{v}");
    v["runs"].as_array().unwrap().clone()
}

/// Waits until the page (after a form's redirect) has `css` without `gone`.
async fn until_without(b: &browser::Browser, css: &str, gone: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(e) = b.c.find(Locator::Css(css)).await
            && let Ok(t) = e.text().await
            && !t.contains(gone)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{css} still shows {gone:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn button(label: &str) -> String {
    format!("//button[normalize-space()='{label}']")
}

/// Clicks the button whose text is `label`.
async fn press(b: &browser::Browser, label: &str) {
    until_button(b, label).await.click().await.unwrap();
}

/// The button whose text is `label`, waited for up to 20 s (the page
/// after a form's redirect).
async fn until_button(b: &browser::Browser, label: &str) -> fantoccini::elements::Element {
    tokio::time::timeout(
        Duration::from_secs(20),
        b.c.wait()
            .forever()
            .for_element(Locator::XPath(&button(label))),
    )
    .await
    .unwrap_or_else(|_| panic!("no button {label} within 20 s"))
    .unwrap()
}

#[tokio::test]
async fn a_job_disabled_from_its_page_does_not_fire_until_enabled_again() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (s, job) = h
        .send(
            reqwest::Method::POST,
            "/v1/jobs",
            json!({ "name": "ticker", "schedule": "every 1s", "thread_key": "api:dash-tick", "text": "tick" }),
        )
        .await;
    assert_eq!(s, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();

    b.visit(&h.at("/ui/jobs")).await;
    b.until_text("#jobs", "ticker").await;
    press(&b, "Disable").await;
    until_button(&b, "Enable").await;
    b.check_page("the jobs page after Disable").await;
    let (_, v) = h.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(
        (v["enabled"].as_bool(), &v["next_run_at"]),
        (Some(false), &Value::Null),
        "{v}"
    );

    // Three of its instants pass: no firing is the point, so time must pass.
    let before = runs_of(&h, "api:dash-tick").await.len();
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert_eq!(
        runs_of(&h, "api:dash-tick").await.len(),
        before,
        "a disabled job fired"
    );

    press(&b, "Enable").await;
    until_button(&b, "Disable").await;
    let (_, v) = h.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(v["enabled"], true, "{v}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while runs_of(&h, "api:dash-tick").await.len() == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the enabled job never fired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = b.c.clone().close().await;
}

const MEM_USER: &str = "api:user:dash-mem";

/// The model saves `fact` for [`MEM_USER`] with its memory tool.
async fn save_fact(h: &Hearth, fake: &FakeOpenAi, thread: &str, fact: &str) {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_save",
        "memory_save",
        json!({ "text": fact }).to_string(),
    )]));
    fake.push(Reply::text("Noted."));
    let (s, v) = h
        .post(json!({ "text": "remember this", "thread_key": thread, "user_key": MEM_USER, "wait": true }))
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("succeeded")), "{v}");
}

#[tokio::test]
async fn a_memory_is_deleted_from_the_memory_page_and_the_rest_exported() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    save_fact(&h, &fake, "api:dash-mem-1", "The favourite colour is teal").await;
    save_fact(
        &h,
        &fake,
        "api:dash-mem-2",
        "The favourite food is colourful salad",
    )
    .await;

    let user = super::enc(MEM_USER);
    b.visit(&h.at(&format!("/ui/memory?user_key={user}&q=favourite")))
        .await;
    b.until_text("#memories", "teal").await;
    let row =
        b.c.find(Locator::XPath(
            "//table[@id='memories']//tr[contains(., 'teal')]",
        ))
        .await
        .unwrap();
    row.find(Locator::XPath(".//button[normalize-space()='Delete']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // Back on the same search, without the deleted fact.
    until_without(&b, "#memories", "teal").await;
    b.until_text("#memories", "salad").await;
    b.check_page("the memory page after Delete").await;

    let (s, v) = h.get(&format!("/v1/memory/export?user_key={user}")).await;
    assert_eq!(s, 200, "{v}");
    let texts: Vec<&str> = v["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["The favourite food is colourful salad"], "{v}");

    // The page's export link is a JSON download of the same document.
    let href = b
        .find("#memory-export")
        .await
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    let r = h.http.get(h.at(&href)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment"),
        "{:?}",
        r.headers()
    );
    let file: Value = r.json().await.unwrap();
    assert_eq!(file, v);
    let _ = b.c.clone().close().await;
}

/// The pid fake-mcp wrote to `path`, once it is there.
async fn pid_in(path: &std::path::Path) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(pid) = std::fs::read_to_string(path)
            && !pid.trim().is_empty()
        {
            return pid.trim().to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} was never written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn reload_on_the_mcp_page_starts_the_server_again() {
    let Some(b) = browser::open().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("fk.pid");
    let config = format!(
        "[mcp.servers.fk]\ncommand = \"{}\"\nargs = [\"--pid-file\", \"{}\"]\n",
        hearth_testkit::fake_mcp::fake_mcp_bin().display(),
        pid_file.display(),
    );
    let h = Hearth::start(&dir.path().join("home"), Some(&config)).await;
    let first = pid_in(&pid_file).await;
    std::fs::remove_file(&pid_file).unwrap();

    b.visit(&h.at("/ui/mcp")).await;
    b.until_text("#mcp", "fk").await;
    press(&b, "Reload").await;
    let second = pid_in(&pid_file).await;
    assert_ne!(first, second, "a new server process");
    b.until_text("#mcp", "fk").await;
    b.check_page("the MCP page after Reload").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, v) = h.get("/v1/mcp/servers").await;
        if v["servers"][0]["state"] == "ready" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready again: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (s, v) = h
        .send(
            reqwest::Method::POST,
            "/v1/mcp/servers/nope/restart",
            json!({}),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{v}"
    );
    let _ = b.c.clone().close().await;
}

#[tokio::test]
async fn a_failed_delivery_is_retried_from_its_conversation_on_the_channels_page() {
    use hearth_testkit::fake_telegram::{Failure, FakeTelegram, Matching, User};

    const TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";
    const ALICE: i64 = 1001;
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let config = format!(
        "{}\n[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
         allowed_users = [{ALICE}]\npoll_timeout_secs = 5\n",
        fake_config(&fake.base_url()),
        tg.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start_with(dir.path(), Some(&config), &[("TG_TOKEN", TOKEN)]).await;
    // Refused for good once: the reply ends failed in the outbox.
    tg.fail_matching(
        Matching::method("sendMessage").in_chat(ALICE),
        1,
        Failure::Error {
            code: 403,
            description: "Forbidden: bot was blocked by the user".into(),
        },
    );
    tg.push_update(tg.private_text(&User::new(ALICE), "are you there"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let failed = loop {
        let (_, v) = h.get("/v1/outbox?status=failed").await;
        if let Some(item) = v["items"].as_array().and_then(|a| a.first()) {
            break item.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no failed delivery: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let target = failed["target"].as_str().unwrap().to_owned();

    b.visit(&h.at("/ui/channels")).await;
    let section = format!("section.conversation[data-target='{target}']");
    let text = b.until_text(&section, "Forbidden: bot was blocked").await;
    assert!(text.contains("telegram"), "{text}");
    b.mark_page().await;
    b.find(&section)
        .await
        .find(Locator::XPath(".//button[normalize-space()='Retry']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let delivered = tg
        .wait_for(
            |st| {
                st.visible_in(ALICE)
                    .iter()
                    .any(|m| m.text == "echo: are you there")
            },
            Duration::from_secs(30),
        )
        .await;
    assert!(delivered, "the retried reply never arrived");
    b.until_new_page("Retry").await;
    b.check_page("the channels page after Retry").await;
    let (_, v) = h.get("/v1/outbox?status=failed").await;
    assert_eq!(v["items"], json!([]), "{v}");
    let _ = b.c.clone().close().await;
}

#[tokio::test]
async fn thread_search_finds_a_thread_by_a_word_of_its_history_and_by_its_key() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    h.ask("api:dash-heron", "a grey heron stood in the marsh")
        .await;
    h.ask("api:dash-other", "nothing to see").await;

    b.visit(&h.at("/ui/threads")).await;
    b.find("input[name='q']")
        .await
        .send_keys("Heron")
        .await
        .unwrap();
    b.c.find(Locator::XPath(
        "//form[@role='search']//button[normalize-space()='Search']",
    ))
    .await
    .unwrap()
    .click()
    .await
    .unwrap();
    let hits = b.until_text("#message-hits", "api:dash-heron").await;
    assert!(hits.contains("grey heron"), "{hits}");
    assert!(!hits.contains("api:dash-other"), "{hits}");
    b.check_page("a thread search by words").await;
    b.c.find(Locator::LinkText("api:dash-heron"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.until_text("#history-box", "grey heron").await;

    b.visit(&h.at("/ui/threads?q=api%3Adash-o")).await;
    let keys = b.until_text("#thread-keys", "api:dash-other").await;
    assert!(!keys.contains("api:dash-heron"), "{keys}");
    let _ = b.c.clone().close().await;
}

#[tokio::test]
async fn a_trace_shows_a_tools_arguments_with_a_secret_redacted() {
    let Some(b) = browser::open().await else {
        return;
    };
    const SECRET: &str = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A";
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_args",
        "memory_save",
        json!({ "text": format!("the deploy key is {SECRET} for the garden repo") }).to_string(),
    )]));
    fake.push(Reply::text("Saved."));
    let v = h.ask("api:dash-args", "keep my key").await;
    let run_id = v["run_id"].as_str().unwrap().to_owned();

    b.visit(&h.at(&format!("/ui/runs/{run_id}"))).await;
    // A live redraw may replace the trace as the run's last change lands:
    // `click` finds the summary again, and the arguments are read from the
    // page itself, open or (redrawn) closed.
    b.click("#trace details.args summary").await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let args = loop {
        let text =
            b.c.execute(
                "const e = document.querySelector('#trace pre.arguments'); \
                 return e ? e.textContent : '';",
                vec![],
            )
            .await
            .unwrap();
        let text = text.as_str().unwrap_or_default().to_owned();
        if text.contains("garden repo") {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no arguments in the trace within 20 s: {text:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(args.contains("[REDACTED:github_token:"), "{args}");
    assert!(!args.contains(SECRET), "{args}");
    let html = b.c.source().await.unwrap();
    assert!(!html.contains(SECRET), "the secret is on the page");
    b.check_page("a run's trace with arguments").await;
    let _ = b.c.clone().close().await;
}

#[tokio::test]
async fn a_question_asked_before_a_restart_is_approved_from_the_queue() {
    let Some(b) = browser::open().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let id = super::saved_memory(&h, &fake, "The owl is called Hoot").await;
    let run = super::waiting_forget(&h, &fake, id, "forgotten after the restart").await;
    let status = h.terminate().await;
    assert!(status.success(), "{status:?}");

    // The token was handed out by the process that is gone; the store
    // keeps only its hash.
    let h = Hearth::start(dir.path(), Some(&config)).await;
    b.visit(&h.at("/ui/confirmations")).await;
    b.until_text(&format!("#confirm-{run}"), "memory_forget")
        .await;
    b.submit(&format!("#confirm-{run} button[value=\"true\"]"))
        .await;
    b.check_page("the queue after approving a question from before the restart")
        .await;
    let v = h.wait_run(&run).await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(v["output"]["text"], "forgotten after the restart", "{v}");
    let _ = b.c.clone().close().await;
}
