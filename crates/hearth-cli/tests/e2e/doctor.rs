//! `hearth doctor` against the real binary: it fails (exit 2) wherever
//! `serve` refuses to start, in the same words; it warns (exit 1) about what
//! serve starts with but will not work; `--json` lists every check.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_slack::{APP_TOKEN, BOT_TOKEN, FakeSlack};
use hearth_testkit::fake_telegram::FakeTelegram;
use serde_json::{Value, json};

use crate::harness::{FAKE_KEY_LINE, Hearth, command, fake_config};

const TG_TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";

/// A private home holding `config`.
fn home_with(dir: &Path, config: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(home.join("hearth.toml"), config).unwrap();
    home
}

/// Exit code, stdout and stderr of `hearth <args>`.
pub(crate) async fn hearth(
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let mut cmd = command(home);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("hearth did not finish within 60 s")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `hearth doctor --json`: its exit code and checks.
async fn doctor_json(home: &Path, env: &[(&str, &str)]) -> (i32, Vec<Value>) {
    let (code, out, err) = hearth(home, &["doctor", "--json"], env).await;
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code, v["checks"].as_array().unwrap().clone())
}

fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {checks:#?}"))
}

/// `hearth serve` on `home`, expected to refuse: its exit code and stderr.
async fn serve_refuses(home: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = command(home);
    cmd.arg("serve");
    if !env.iter().any(|(k, _)| *k == "HEARTH_BIND") {
        cmd.args(["--bind", "127.0.0.1:0"]);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("serve started instead of refusing")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What is wrong, the config, the words both must say, the environment.
type Refusal<'a> = (&'a str, String, &'a str, &'a [(&'a str, &'a str)]);

#[tokio::test]
async fn doctor_fails_with_exit_2_wherever_serve_refuses_to_start() {
    let fake = FakeOpenAi::start().await;
    let base = fake_config(&fake.base_url());
    let keyed = base.replace(FAKE_KEY_LINE, "api_key_env = \"FAKE_KEY\"\n");
    let cases: [Refusal<'_>; 5] = [
        ("unset key env", keyed.clone(), "FAKE_KEY", &[]),
        ("empty key env", keyed, "FAKE_KEY", &[("FAKE_KEY", " ")]),
        (
            "max_steps = 0",
            format!("{base}[agent]\nmax_steps = 0\n"),
            "agent.max_steps",
            &[],
        ),
        (
            "missing channel token",
            format!("{base}[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\n"),
            "TG_TOKEN",
            &[],
        ),
        (
            "bad bind address",
            base.clone(),
            "bind address",
            &[("HEARTH_BIND", "localhost")],
        ),
    ];
    for (what, config, words, env) in cases {
        let dir = tempfile::tempdir().unwrap();
        let home = home_with(dir.path(), &config);
        let (code, text, _) = hearth(&home, &["doctor"], env).await;
        assert_eq!(code, 2, "{what}: doctor exit\n{text}");
        let fail = text
            .lines()
            .find(|l| l.starts_with("FAIL") && l.contains(words))
            .unwrap_or_else(|| panic!("{what}: no FAIL naming {words}:\n{text}"));
        let (code, stderr) = serve_refuses(&home, env).await;
        assert_eq!(code, 2, "{what}: serve exit\n{stderr}");
        // The same words: serve's reason is in doctor's report.
        let reason = stderr
            .lines()
            .find_map(|l| l.strip_prefix("hearth: "))
            .unwrap_or_else(|| panic!("{what}: no reason from serve:\n{stderr}"));
        assert!(
            text.contains(reason.trim()),
            "{what}: serve said {reason:?}, doctor did not:\n{text}"
        );
        assert!(fail.contains(words), "{fail}");
    }
}

#[tokio::test]
async fn all_ok_is_exit_0_and_json_lists_each_check_with_its_fix() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config =
        fake_config(&fake.base_url()).replace(FAKE_KEY_LINE, "api_key_env = \"FAKE_KEY\"\n");
    let home = home_with(dir.path(), &config);
    let env = [("FAKE_KEY", "test-key")];
    let (code, checks) = doctor_json(&home, &env).await;
    assert_eq!(code, 0, "{checks:#?}");
    for c in &checks {
        assert_eq!(c["status"], "ok", "{c}");
        assert!(c["message"].is_string() && c.get("fix").is_some(), "{c}");
    }
    for name in [
        "config",
        "home",
        "bind",
        "env FAKE_KEY",
        "store",
        "provider fake",
        "model fake/fake-model",
        "model fake/other-model",
        "start",
        "config in force",
    ] {
        check(&checks, name);
    }
    // No server runs on the home: said, and fine.
    let c = check(&checks, "config in force");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("no `hearth serve` runs"),
        "{c}"
    );
    // A model the server does not list is a warning (serve starts), with the fix.
    fake.set_models(&["fake-model"]);
    let (code, checks) = doctor_json(&home, &env).await;
    assert_eq!(code, 1, "{checks:#?}");
    let c = check(&checks, "model fake/other-model");
    assert_eq!(c["status"], "warn");
    assert!(c["fix"].as_str().unwrap().contains("fake-model"), "{c}");
    // A key the provider refuses: warn, naming where the key comes from.
    let config = fake_config(&fake.base_url()).replace(FAKE_KEY_LINE, "");
    std::fs::write(home.join("hearth.toml"), config).unwrap();
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 1, "{checks:#?}");
    let c = check(&checks, "provider fake");
    assert_eq!(c["status"], "warn");
    assert!(
        c["message"].as_str().unwrap().contains("refused the key"),
        "{c}"
    );
}

#[tokio::test]
async fn an_unreachable_provider_is_a_warning_within_seconds() {
    // A port that was just free: connection refused, at once.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(
        dir.path(),
        &fake_config(&format!("http://127.0.0.1:{port}/v1")),
    );
    let t0 = std::time::Instant::now();
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 1, "{checks:#?}");
    let c = check(&checks, "provider fake");
    assert_eq!(c["status"], "warn");
    assert!(
        c["message"].as_str().unwrap().contains("cannot reach"),
        "{c}"
    );
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn an_optional_channel_without_its_token_serves_degraded_and_doctor_warns() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[channels.telegram]\nenabled = true\noptional = true\ntoken_env = \"TG_TOKEN\"\n",
        fake_config(&fake.base_url())
    );
    let home = home_with(dir.path(), &config);
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 1, "{checks:#?}");
    let c = check(&checks, "channel telegram");
    assert_eq!(c["status"], "warn");
    assert!(c["message"].as_str().unwrap().contains("TG_TOKEN"), "{c}");
    let h = Hearth::start(&home, None).await;
    let (s, v) = h.get("/v1/channels").await;
    assert_eq!(s, 200, "{v}");
    let tg = v["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "telegram")
        .unwrap()
        .clone();
    assert_eq!(tg["enabled"], true, "{tg}");
    assert_eq!(tg["state"], "degraded", "{tg}");
    assert!(
        tg["last_error"].as_str().unwrap().contains("TG_TOKEN"),
        "{tg}"
    );
    h.kill().await;
}

#[tokio::test]
async fn slack_tokens_are_checked_the_app_level_token_included() {
    let fake = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[channels.slack]\nenabled = true\napi_base = \"{}\"\n",
        fake_config(&fake.base_url()),
        slack.api_base()
    );
    let home = home_with(dir.path(), &config);
    let (code, checks) = doctor_json(
        &home,
        &[
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_APP_TOKEN", APP_TOKEN),
        ],
    )
    .await;
    assert_eq!(code, 0, "{checks:#?}");
    assert_eq!(check(&checks, "channel slack app token")["status"], "ok");
    let (code, checks) = doctor_json(
        &home,
        &[
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_APP_TOKEN", "xapp-1-wrong"),
        ],
    )
    .await;
    assert_eq!(code, 1, "{checks:#?}");
    let c = check(&checks, "channel slack app token");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("app-level token refused"),
        "{c}"
    );
    // In the words the channel logs at serve time: where the token came
    // from, then the one fix text.
    assert!(
        c["message"].as_str().unwrap().ends_with(&format!(
            ": check SLACK_APP_TOKEN; {}",
            hearth_channels::advice::SLACK_APP_FIX
        )),
        "{c}"
    );
    assert!(
        !c.to_string().contains("xapp-1-wrong"),
        "the token was shown: {c}"
    );
    let refused = slack.violations();
    assert_eq!(
        refused.len(),
        1,
        "only the wrong app token was refused: {refused:?}"
    );
    assert!(refused[0].contains("apps.connections.open"), "{refused:?}");
}

#[tokio::test]
async fn a_job_on_a_disabled_channel_is_refused_and_doctor_flags_one_left_behind() {
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TG_TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let plain = fake_config(&fake.base_url());
    let home = home_with(dir.path(), &plain);
    let job = |thread: &str| json!({"name": "digest", "schedule": "every 1h", "thread_key": thread, "text": "t"});
    let h = Hearth::start(&home, None).await;
    let (s, v) = h
        .send(reqwest::Method::POST, "/v1/jobs", job("telegram:chat:1"))
        .await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["error"]["code"], "channel_disabled", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[channels.telegram] enabled = true"),
        "{v}"
    );
    h.kill().await;
    // Made while Telegram was on, then the config turned it off.
    let with_tg = format!(
        "{plain}[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n",
        tg.url()
    );
    let h = Hearth::start_with(&home, Some(&with_tg), &[("TG_TOKEN", TG_TOKEN)]).await;
    let (s, v) = h
        .send(reqwest::Method::POST, "/v1/jobs", job("telegram:chat:1"))
        .await;
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    h.kill().await;
    std::fs::write(home.join("hearth.toml"), &plain).unwrap();
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 1, "{checks:#?}");
    let c = check(&checks, &format!("job {id}"));
    assert_eq!(c["status"], "warn");
    assert!(
        c["message"].as_str().unwrap().contains("not enabled"),
        "{c}"
    );
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("hearth jobs rm {id}")),
        "{c}"
    );
}

#[tokio::test]
async fn mcp_servers_must_start_and_list_tools() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[mcp.servers.fk]\ncommand = \"{}\"\n[mcp.servers.gone]\ncommand = \"{}\"\n",
        fake_config(&fake.base_url()),
        hearth_testkit::fake_mcp::fake_mcp_bin().display(),
        dir.path().join("no-such-program").display()
    );
    let home = home_with(dir.path(), &config);
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 1, "{checks:#?}");
    let ok = check(&checks, "mcp fk");
    assert_eq!(ok["status"], "ok", "{ok}");
    assert!(ok["message"].as_str().unwrap().contains("tool(s)"), "{ok}");
    let gone = check(&checks, "mcp gone");
    assert_eq!(gone["status"], "warn", "{gone}");
    assert!(
        gone["message"].as_str().unwrap().contains("did not start"),
        "{gone}"
    );
}

#[tokio::test]
async fn a_store_from_a_newer_hearth_fails() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &fake_config(&fake.base_url()));
    let db = rusqlite::Connection::open(home.join("hearth.db")).unwrap();
    db.pragma_update(None, "user_version", 9999).unwrap();
    drop(db);
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 2, "{checks:#?}");
    assert_eq!(check(&checks, "store")["status"], "fail");
}

#[tokio::test]
async fn unset_secret_variables_and_the_master_key_are_named() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[llm.providers.sealed]\ntype = \"openai_compat\"\nbase_url = \"{}\"\napi_key_secret = \"k\"\n",
        fake_config(&fake.base_url()),
        fake.base_url()
    );
    let home = home_with(dir.path(), &config);
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 2, "{checks:#?}");
    let c = check(&checks, "secrets");
    assert_eq!(c["status"], "fail");
    assert!(
        c["message"].as_str().unwrap().contains("HEARTH_SECRET_KEY"),
        "{c}"
    );
}

#[tokio::test]
async fn a_home_others_can_read_is_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &fake_config(&fake.base_url()));
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 1, "{checks:#?}");
    let c = check(&checks, "home");
    assert_eq!(c["status"], "warn");
    assert!(c["message"].as_str().unwrap().contains("chmod 700"), "{c}");
}

#[tokio::test]
async fn skills_that_do_not_verify_or_load_are_warnings() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &fake_config(&fake.base_url()));
    let write = |rel: &str, text: &str| {
        let p = home.join("skills").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "pdf/SKILL.md",
        "---\nname: pdf\ndescription: Fill PDF forms.\n---\nx\n",
    );
    // An executable skill nobody signed.
    write(
        "notes/hearth-skill.json",
        r#"{"name":"notes","version":"1.0.0","description":"Notes","entry":"run.sh","hearth":">=0.1"}"#,
    );
    write("notes/run.sh", "#!/bin/sh\nexit 1\n");
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 1, "{checks:#?}");
    assert_eq!(check(&checks, "skills")["status"], "ok");
    let c = check(&checks, "skill notes");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["fix"].as_str().unwrap().contains("trusted_keys"), "{c}");
}

#[tokio::test]
async fn a_home_not_created_yet_is_checked_without_creating_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("not-yet");
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 0, "{checks:#?}");
    assert_eq!(check(&checks, "store")["status"], "ok");
    assert_eq!(check(&checks, "start")["status"], "ok");
    assert!(!home.exists(), "doctor created the home");
}

#[tokio::test]
async fn a_file_changed_after_the_server_loaded_it_is_a_warning_until_reloaded() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let home = home_with(dir.path(), &config);
    let h = Hearth::start(&home, None).await;
    let env = [("HEARTH_URL", h.url.as_str())];
    let in_force = |checks: &[Value]| check(checks, "config in force").clone();

    // The file as the server loaded it: ok, saying when.
    let (shown_status, shown) = h.get("/v1/config").await;
    assert_eq!(shown_status, 200, "{shown}");
    let loaded_at = shown["loaded_at"].as_str().unwrap().to_owned();
    let (code, checks) = doctor_json(&home, &env).await;
    let c = in_force(&checks);
    assert_eq!((code, c["status"].as_str()), (0, Some("ok")), "{checks:#?}");
    assert!(c["message"].as_str().unwrap().contains(&loaded_at), "{c}");

    // Edited after the start: a warning naming the section, with the fix.
    std::fs::write(
        home.join("hearth.toml"),
        format!("{config}[agent]\nmax_llm_calls = 2\n"),
    )
    .unwrap();
    let (code, checks) = doctor_json(&home, &env).await;
    let c = in_force(&checks);
    assert_eq!(
        (code, c["status"].as_str()),
        (1, Some("warn")),
        "{checks:#?}"
    );
    let message = c["message"].as_str().unwrap();
    assert!(
        message.contains(&loaded_at)
            && message.contains("changed after")
            && message.contains("agent"),
        "{c}"
    );
    assert!(
        c["fix"].as_str().unwrap().contains("hearth config reload"),
        "{c}"
    );
    let (code, out, _) = hearth(&home, &["doctor"], &env).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("WARN  config in force: ")
            && out.contains("      fix: run `hearth config reload`"),
        "{out}"
    );

    // Reloaded: in force, ok again.
    let (code, out, err) = hearth(&home, &["config", "reload"], &env).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, checks) = doctor_json(&home, &env).await;
    let c = in_force(&checks);
    assert_eq!((code, c["status"].as_str()), (0, Some("ok")), "{checks:#?}");
    assert!(!c["message"].as_str().unwrap().contains(&loaded_at), "{c}");
}
