//! The CLI as a person uses it, against a running server.

use hearth_testkit::FakeOpenAi;

use crate::harness::{Hearth, command, fake_config};

async fn hearth(h: &Hearth, args: &[&str]) -> (i32, String, String) {
    let out = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn message_model_thinking_run_and_health_commands() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    let (code, out, err) = hearth(&h, &["message", "what time is it?", "--wait"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "echo: what time is it?");

    let (code, out, _) = hearth(
        &h,
        &["message", "and in Tokyo?", "--thread", "api:me", "--json"],
    )
    .await;
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    let (code, out, _) = hearth(&h, &["run", "wait", &run_id]).await;
    assert_eq!((code, out.trim()), (0, "echo: and in Tokyo?"));
    let (code, out, _) = hearth(&h, &["run", "get", &run_id, "--json"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("\"succeeded\""));

    let (code, out, _) = hearth(&h, &["model", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("* fake/fake-model") && out.contains("echo/echo"),
        "{out}"
    );
    let (code, out, _) = hearth(
        &h,
        &["model", "set", "fake/other-model", "--thread", "api:me"],
    )
    .await;
    assert_eq!((code, out.trim()), (0, "fake/other-model"));
    let (_, out, _) = hearth(&h, &["model", "get", "--thread", "api:me"]).await;
    assert_eq!(out.trim(), "fake/other-model");
    let (code, _, err) = hearth(&h, &["model", "set", "fake/missing"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("unknown_model"), "{err}");

    let (code, out, _) = hearth(&h, &["thinking", "set", "low"]).await;
    assert_eq!((code, out.trim()), (0, "low"));
    let (_, out, _) = hearth(&h, &["thinking", "get"]).await;
    assert_eq!(out.trim(), "low");
    let (code, _, _) = hearth(&h, &["new"]).await;
    assert_eq!(code, 0);
    let (code, out, _) = hearth(&h, &["health"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("ready"));

    let (code, out, _) = hearth(&h, &["token", "list"]).await;
    assert_eq!((code, out.trim()), (0, ""));
}

#[tokio::test]
async fn client_commands_explain_an_unreachable_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = command(dir.path())
        .env("HEARTH_URL", "http://127.0.0.1:9")
        .args(["message", "hi", "--wait"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach hearth"));
}
