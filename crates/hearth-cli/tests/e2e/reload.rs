//! Live configuration reload: `POST /v1/config/reload`, SIGHUP and `hearth
//! config reload` put a changed hearth.toml in force for the next run
//! without a restart; an invalid file changes nothing; runs in flight keep
//! the configuration they started with; `GET /v1/config` never shows a
//! secret.

use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Gate, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config, offered_tools, poll, succeeds};

/// A fake provider that answers every request with its own name.
fn named(fake: &FakeOpenAi, name: &'static str) {
    fake.respond_with(move |_| Some(Reply::text(name)));
}

async fn reload(h: &Hearth) -> (u16, Value) {
    h.send(reqwest::Method::POST, "/v1/config/reload", json!({}))
        .await
}

fn write_config(h: &Hearth, config: &str) {
    std::fs::write(h.home.join("hearth.toml"), config).unwrap();
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn provider_model_permissions_and_limits_change_for_the_next_run() {
    let old = FakeOpenAi::start().await;
    let new = FakeOpenAi::start().await;
    named(&new, "from the new provider");
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&old.base_url()))).await;

    // Before: the old provider, member tools offered, a tool call allowed.
    old.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "current_time",
        r#"{"timezone":"UTC"}"#,
    )]));
    old.push(Reply::text("old answer"));
    let v = h.ask("api:a", "time?").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(v["model"], "fake/fake-model");
    assert!(offered_tools(&old.requests()[0]).contains(&"memory_search".to_owned()));
    let (_, p) = h.get("/v1/permissions").await;
    assert_eq!(p["default_preset"], "member");

    // The file changes: another base URL and default model, no preset, one
    // model call per run.
    let config = format!(
        "{}[permissions]\ndefault_preset = \"none\"\n[agent]\nmax_llm_calls = 1\n",
        fake_config(&new.base_url()).replace("fake/fake-model", "fake/other-model")
    );
    write_config(&h, &config);
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["agent", "llm", "permissions"], "{r}");
    assert_eq!(r["needs_restart"], json!([]), "{r}");
    assert!(r["loaded_at"].is_string(), "{r}");

    let asked_old = old.requests().len();
    let v = h.ask("api:b", "hello").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(v["model"], "fake/other-model", "{v}");
    assert_eq!(v["output"]["text"], "from the new provider");
    assert_eq!(
        old.requests().len(),
        asked_old,
        "the old base URL was asked"
    );
    let req = new.requests().pop().unwrap();
    assert_eq!(req["model"], "other-model");
    assert!(
        !offered_tools(&req).contains(&"memory_search".to_owned()),
        "preset none still offers member tools: {:?}",
        offered_tools(&req)
    );
    let (_, p) = h.get("/v1/permissions").await;
    assert_eq!(p["default_preset"], "none");

    // The new limit: a run that needs a second model call stops at one.
    new.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c2",
        "current_time",
        r#"{"timezone":"UTC"}"#,
    )]));
    let (s, v) = h
        .post(json!({ "text": "time again?", "thread_key": "api:c", "wait": true }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error"]["code"], "limit_exceeded", "{v}");
    assert!(old.violations().is_empty() && new.violations().is_empty());
}

#[tokio::test]
async fn an_invalid_file_changes_nothing_and_says_why() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    let (_, before) = h.get("/v1/config").await;

    // A key that does not exist, and a default model no provider has.
    for (bad, says) in [
        (format!("{good}[agent]\nmax_stepz = 3\n"), "max_stepz"),
        (good.replace("fake/fake-model", "nowhere/model"), "nowhere"),
    ] {
        write_config(&h, &bad);
        let (s, v) = reload(&h).await;
        assert_eq!(s, 400, "{v}");
        assert_eq!(v["error"]["code"], "invalid_config", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        let (_, now) = h.get("/v1/config").await;
        assert_eq!(now, before, "a refused reload changed the config in force");
        let v = h.ask("api:still", "still there?").await;
        assert_eq!(v["status"], "succeeded", "{v}");
        assert_eq!(v["model"], "fake/fake-model");
    }
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn what_cannot_change_live_is_reported_and_the_rest_applies() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    write_config(
        &h,
        &format!(
            "{good}[server]\nbind = \"127.0.0.1:1\"\n[store]\ndurability = \"strict\"\n\
             [agent]\nmax_llm_calls = 1\n"
        ),
    );
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["agent"], "{r}");
    assert_eq!(names(&r["needs_restart"]), ["server.bind", "store"], "{r}");
    let (_, c) = h.get("/v1/config").await;
    assert_eq!(c["agent"]["max_llm_calls"], 1, "{c}");
    // Still served where it was bound.
    let v = h.ask("api:x", "hi").await;
    assert_eq!(v["status"], "succeeded", "{v}");
}

#[tokio::test]
async fn sighup_reloads_the_configuration() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (_, before) = h.get("/v1/config").await;
    write_config(
        &h,
        &fake_config(&fake.base_url()).replace("fake/fake-model", "fake/other-model"),
    );
    let status = std::process::Command::new("kill")
        .args(["-HUP", &h.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The signal's reload runs in the server; its end is seen as a new
    // `loaded_at` (no event is sent to the caller of a signal).
    let after = poll("the reload on SIGHUP", Duration::from_secs(30), || async {
        let (_, v) = h.get("/v1/config").await;
        if v["loaded_at"] != before["loaded_at"] {
            Ok(v)
        } else {
            Err(v["loaded_at"].clone())
        }
    })
    .await;
    assert_eq!(after["llm"]["default_model"], "fake/other-model");
    let v = h.ask("api:hup", "hi").await;
    assert_eq!(v["model"], "fake/other-model", "{v}");
    let log = std::fs::read_to_string(h.home.join("serve.log")).unwrap();
    assert!(
        log.contains("configuration reloaded") && log.contains("llm"),
        "{log}"
    );
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn get_config_shows_set_or_unset_and_never_a_secret() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}api_key_env = \"FAKE_KEY\"\n[alerts]\nwebhook_secret_env = \"NOT_SET_ANYWHERE\"\n",
        fake_config(&fake.base_url()).replace(crate::harness::FAKE_KEY_LINE, "")
    );
    let h = Hearth::start_with(
        dir.path(),
        Some(&config),
        &[("FAKE_KEY", "test-key-value-0123456789")],
    )
    .await;
    let (s, v) = h.get("/v1/config").await;
    assert_eq!(s, 200, "{v}");
    let text = v.to_string();
    assert!(!text.contains("test-key-value"), "a key leaked: {text}");
    let p = &v["llm"]["providers"]["fake"];
    assert_eq!(p["api_key_env"], "FAKE_KEY");
    assert_eq!(p["api_key"], "<set>");
    assert_eq!(v["alerts"]["webhook_secret"], "<unset>");
    assert_eq!(v["secret_key"], "<unset>");
    assert!(v["loaded_at"].is_string(), "{v}");

    // The CLI shows the same, from the running server.
    let stdout = succeeds(command(&h.home).args(["--url", &h.url, "config", "show"])).await;
    assert!(stdout.contains("\"api_key\": \"<set>\""), "{stdout}");
    assert!(!stdout.contains("test-key-value"), "{stdout}");
    let log = std::fs::read_to_string(h.home.join("serve.log")).unwrap();
    assert!(!log.contains("test-key-value"), "{log}");
}

#[tokio::test]
async fn the_cli_reloads_and_lists_what_changed() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    write_config(&h, &format!("{good}[agent]\nmax_llm_calls = 2\n"));
    let stdout = succeeds(command(&h.home).args(["--url", &h.url, "config", "reload"])).await;
    assert!(stdout.contains("agent"), "{stdout}");

    write_config(&h, "[agent\n");
    let out = command(&h.home)
        .args(["--url", &h.url, "--json", "config", "reload"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("hearth.toml"), "{stderr}");
}

/// The MCP server `fk` running fake-mcp, writing its pid to `pid_file`.
fn with_fk(good: &str, pid_file: &std::path::Path) -> String {
    format!(
        "{good}[mcp.servers.fk]\ncommand = \"{}\"\nargs = [\"--pid-file\", \"{}\"]\n\
         preset = \"member\"\nread_tools = [\"echo\"]\n",
        hearth_testkit::fake_mcp::fake_mcp_bin().display(),
        pid_file.display()
    )
}

/// Waits until `fk` is ready (it starts in the background; no event tells).
async fn fk_ready(h: &Hearth) {
    poll("fk ready", Duration::from_secs(60), || async {
        let (_, v) = h.get("/v1/mcp/servers").await;
        let ready = v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "fk" && e["state"] == "ready");
        if ready { Ok(()) } else { Err(v) }
    })
    .await;
}

/// The pid a fake-mcp wrote, once written.
async fn pid_in(path: &std::path::Path) -> String {
    poll("the MCP server's pid", Duration::from_secs(30), || async {
        match std::fs::read_to_string(path) {
            Ok(pid) if !pid.trim().is_empty() => Ok(pid.trim().to_owned()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// Waits until process `pid` is gone (or a zombie).
async fn gone(pid: &str) {
    poll(
        "the old MCP server gone",
        Duration::from_secs(30),
        || async {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => Ok(()),
                Ok(stat)
                    if stat
                        .rsplit(')')
                        .next()
                        .is_some_and(|r| r.trim_start().starts_with('Z')) =>
                {
                    Ok(())
                }
                Ok(stat) => Err(stat),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn mcp_servers_added_changed_and_removed_by_a_reload() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    let (first, second) = (dir.path().join("fk1.pid"), dir.path().join("fk2.pid"));

    // Added: it starts, and the next run is offered its tools.
    write_config(&h, &with_fk(&good, &first));
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["mcp"], "{r}");
    fk_ready(&h).await;
    let old_pid = pid_in(&first).await;
    h.ask("api:m", "hi").await;
    let tools = offered_tools(&fake.requests().pop().unwrap());
    assert!(tools.iter().any(|t| t.starts_with("fk__")), "{tools:?}");

    // Changed: the old process stops, a new one starts.
    write_config(&h, &with_fk(&good, &second));
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["mcp"], "{r}");
    let new_pid = pid_in(&second).await;
    assert_ne!(new_pid, old_pid);
    gone(&old_pid).await;
    fk_ready(&h).await;

    // Unchanged: a reload leaves it running.
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["changed"], json!([]), "{r}");
    assert!(
        std::path::Path::new(&format!("/proc/{new_pid}")).exists(),
        "an unchanged server was stopped"
    );

    // Removed: it stops, and the next run is not offered its tools.
    write_config(&h, &good);
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["mcp"], "{r}");
    let (_, v) = h.get("/v1/mcp/servers").await;
    assert!(
        !v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "fk"),
        "{v}"
    );
    gone(&new_pid).await;
    h.ask("api:m2", "hi").await;
    let tools = offered_tools(&fake.requests().pop().unwrap());
    assert!(!tools.iter().any(|t| t.starts_with("fk__")), "{tools:?}");
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn a_reload_under_load_loses_no_run_and_changes_none_in_flight() {
    const N: usize = 16;
    let fake = FakeOpenAi::start().await;
    // Second calls of the runs in flight answer "old", new runs "new".
    fake.respond_with(|req| {
        Some(Reply::text(match req["model"].as_str() {
            Some("fake-model") => "old",
            _ => "new",
        }))
    });
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;

    // N runs on N threads, each held half-way through a tool call, so each
    // makes its second model call after the reload.
    let gate = Gate::new();
    for i in 0..N {
        fake.push(
            Reply::tool_calls(vec![ToolCallSpec::new(
                format!("call_{i}"),
                "current_time",
                r#"{"timezone":"UTC"}"#,
            )])
            .pausing_after(1, gate.clone()),
        );
    }
    let mut in_flight = Vec::new();
    for i in 0..N {
        let (s, v) = h
            .post(json!({ "text": "go", "thread_key": format!("api:load{i}") }))
            .await;
        assert_eq!(s, 202, "{v}");
        in_flight.push(v["run_id"].as_str().unwrap().to_owned());
    }
    poll(
        "every run at the provider",
        Duration::from_secs(60),
        || async {
            let n = fake.requests().len();
            if n == N { Ok(()) } else { Err(n) }
        },
    )
    .await;

    // Another default model, and one model call per run: the runs in
    // flight, which need two, must not feel it.
    write_config(
        &h,
        &format!(
            "{}[agent]\nmax_llm_calls = 1\n",
            good.replace("fake/fake-model", "fake/other-model")
        ),
    );
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["agent", "llm"], "{r}");

    // New runs, while the old ones still wait: the new model.
    let mut fresh = Vec::new();
    for i in 0..N {
        let (s, v) = h
            .post(json!({ "text": "go", "thread_key": format!("api:new{i}") }))
            .await;
        assert_eq!(s, 202, "{v}");
        fresh.push(v["run_id"].as_str().unwrap().to_owned());
    }
    gate.open();
    for id in &in_flight {
        let v = h.wait_run(id).await;
        assert_eq!(v["status"], "succeeded", "{v}");
        assert_eq!(v["model"], "fake/fake-model", "{v}");
        assert_eq!(v["output"]["text"], "old", "{v}");
    }
    for id in &fresh {
        let v = h.wait_run(id).await;
        assert_eq!(v["status"], "succeeded", "{v}");
        assert_eq!(v["model"], "fake/other-model", "{v}");
        assert_eq!(v["output"]["text"], "new", "{v}");
    }
    let models: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models.iter().filter(|m| *m == "fake-model").count(), 2 * N);
    assert_eq!(models.iter().filter(|m| *m == "other-model").count(), N);
    let (_, runs) = h.get("/v1/runs?limit=100").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2 * N, "{runs}");
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn config_routes_need_the_token_and_refuse_other_sites() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = crate::harness::new_token(dir.path(), "ops").await;
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    write_config(&h, &format!("{good}[agent]\nmax_llm_calls = 1\n"));

    let (s, _) = h.get("/v1/config").await;
    assert_eq!(s, 401);
    let (s, _) = reload(&h).await;
    assert_eq!(s, 401);
    // A page of another site, even with the token a browser might hold.
    let r = h
        .http
        .post(h.at("/v1/config/reload"))
        .bearer_auth(&token)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = h
        .http
        .get(h.at("/v1/config"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["agent"]["max_llm_calls"], 12,
        "a refused request reloaded: {v}"
    );

    // The operator, with no body at all.
    let r = h
        .http
        .post(h.at("/v1/config/reload"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(names(&v["changed"]), ["agent"], "{v}");
}

#[tokio::test]
async fn a_skills_folder_added_by_a_reload_is_offered_to_the_next_run() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let more = dir.path().join("more-skills/pdf");
    std::fs::create_dir_all(&more).unwrap();
    std::fs::write(
        more.join("SKILL.md"),
        "---\nname: pdf\ndescription: Fill PDF forms.\n---\nx\n",
    )
    .unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    let (_, v) = h.get("/v1/skills").await;
    assert_eq!(v["skills"], json!([]), "{v}");

    write_config(
        &h,
        &format!("{good}[skills]\nextra_dirs = [\"more-skills\"]\n"),
    );
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["skills"], "{r}");
    let (_, v) = h.get("/v1/skills").await;
    assert_eq!(v["skills"][0]["name"], "pdf", "{v}");
    h.ask("api:s", "hi").await;
    let system = fake.requests().pop().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("Fill PDF forms."), "{system}");
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn tool_profiles_and_budget_pools_change_for_the_next_run() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    h.ask("api:t1", "one").await;
    h.ask("api:t2", "two").await;
    assert!(offered_tools(&fake.requests()[1]).contains(&"memory_search".to_owned()));

    // A profile that hides memory from the API, and a pool of two calls a
    // day per user, which the two calls above (read back from the store)
    // already used.
    write_config(
        &h,
        &format!(
            "{good}[tools.profiles.api]\nexclude = [\"memory_*\"]\n\
             [[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 3\nscope = \"user\"\n"
        ),
    );
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["budget", "tools"], "{r}");
    h.ask("api:t3", "three").await;
    let tools = offered_tools(&fake.requests()[2]);
    assert!(!tools.iter().any(|t| t.starts_with("memory_")), "{tools:?}");
    let refused = h.ask("api:t4", "four").await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert_eq!(refused["error"]["code"], "budget_exceeded", "{refused}");
    assert_eq!(fake.request_count(), 3, "the refused run called no model");
    let (_, b) = h.get("/v1/budget").await;
    assert_eq!(b["pools"][0]["name"], "calls", "{b}");
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn router_arms_change_for_the_next_run() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    let v = h.ask("api:r1", "write a poem").await;
    assert_eq!(v["model"], "fake/fake-model", "{v}");

    write_config(
        &h,
        &format!(
            "{good}[router]\nstrategy = \"cheapest\"\n\
             [[router.arms]]\nmodel = \"fake/other-model\"\n"
        ),
    );
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["router"], "{r}");
    let (_, router) = h.get("/v1/router").await;
    assert_eq!(router["strategy"], "cheapest", "{router}");
    let v = h.ask("api:r2", "write a poem").await;
    assert_eq!(v["model"], "fake/other-model", "{v}");
    let (_, trace) = h
        .get(&format!("/v1/runs/{}/trace", v["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(trace["steps"][0]["kind"], "route", "{trace}");
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn a_confirmation_asked_before_a_reload_is_answered_after_it() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let good = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&good)).await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        r#"{"id": 999}"#,
    )]));
    fake.push(Reply::text("done"));
    let (s, waiting) = h
        .post(json!({ "text": "forget it", "thread_key": "api:conf", "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    assert_eq!(waiting["status"], "awaiting_confirmation", "{waiting}");
    let token = waiting["confirmation"]["token"]
        .as_str()
        .unwrap()
        .to_owned();

    write_config(&h, &format!("{good}[agent]\nmax_tool_calls = 4\n"));
    let (s, r) = reload(&h).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["agent"], "{r}");

    let r = h
        .http
        .post(h.at(&format!("/v1/confirmations/{token}")))
        .json(&json!({ "user_key": "api:user:anonymous", "approve": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v = h.wait_run(waiting["run_id"].as_str().unwrap()).await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(v["output"]["text"], "done", "{v}");
    assert!(fake.violations().is_empty());
}
