//! `hearth message` as a chat client: the answer streamed as it is written,
//! the message read from stdin, Ctrl+C naming the run, and the exit codes
//! and errors of a refused request.

use std::process::Stdio;
use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Gate, Reply, ToolCallSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{Hearth, command, fake_config, hearth};

/// The only run of `thread`, once it is running (the CLI has posted it).
async fn running_run(h: &Hearth, thread: &str) -> String {
    crate::harness::poll("the run to start", Duration::from_secs(30), || async {
        let (_, v) = h
            .get(&format!("/v1/runs?thread_key={thread}&status=running"))
            .await;
        v["runs"][0]["run_id"].as_str().map(str::to_owned).ok_or(v)
    })
    .await
}

fn sigint(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn message_streams_the_answer_before_the_run_ends() {
    let fake = FakeOpenAi::start().await;
    // The role chunk and the first of three pieces, then nothing until the
    // gate opens: the run is still going while the test reads stdout.
    let gate = Gate::new();
    fake.push(
        Reply::text("alpha beta gamma")
            .in_pieces(3)
            .pausing_after(2, gate.clone()),
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let mut child = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(["message", "tell me", "--thread", "cli:stream", "--stream"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    // Read until the first piece shows; the provider holds the rest.
    let first = tokio::time::timeout(Duration::from_secs(30), async {
        while !String::from_utf8_lossy(&seen).contains("alpha") {
            let n = stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "stdout closed before any text: {seen:?}");
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(first.is_ok(), "no streamed text: {seen:?}");
    let (_, runs) = h.get("/v1/runs?thread_key=cli:stream").await;
    assert_eq!(runs["runs"][0]["status"], "running", "{runs}");
    assert!(
        !String::from_utf8_lossy(&seen).contains("gamma"),
        "{seen:?}"
    );
    gate.open();
    stdout.read_to_end(&mut seen).await.unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
    // The answer once, ending its line.
    assert_eq!(String::from_utf8_lossy(&seen), "alpha beta gamma\n");
}

#[tokio::test]
async fn message_reads_stdin_for_a_dash_or_when_piped() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    // Far past what an argument may hold on Linux (128 KiB per argument).
    let long = "x".repeat(200_000);
    for args in [
        vec!["message", "-", "--wait", "--json"],
        vec!["message", "--wait", "--json"],
    ] {
        let mut child = command(&h.home)
            .env("HEARTH_URL", &h.url)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{long}\n").as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        // The echo model answers `echo: <text>`: the whole text, without
        // the newline that ended the input.
        assert_eq!(
            run["output"]["text"].as_str().unwrap(),
            format!("echo: {long}"),
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn ctrl_c_while_waiting_names_the_run_and_how_to_follow_or_cancel_it() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::hang());
    fake.push(Reply::hang());
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    let child = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(["message", "slow", "--wait", "--thread", "cli:int"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run_id = running_run(&h, "cli:int").await;
    sigint(child.id().unwrap());
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains(&format!("`hearth run wait {run_id}`"))
            && err.contains(&format!("`hearth run cancel {run_id}`")),
        "{err}"
    );
    let (_, run) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(run["status"], "running", "the run goes on: {run}");
    hearth(&h, &["run", "cancel", &run_id]).await;

    // --cancel-on-interrupt: the run is cancelled.
    let child = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args([
            "message",
            "slow again",
            "--stream",
            "--thread",
            "cli:int2",
            "--cancel-on-interrupt",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run_id = running_run(&h, "cli:int2").await;
    sigint(child.id().unwrap());
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains(&format!("run {run_id} cancelled")), "{err}");
    let (_, run) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(run["status"], "cancelled", "{run}");
}

/// Once `pid` catches SIGINT (read from /proc: its Ctrl+C handler is in
/// place), so the signal is sent to a CLI that listens for it.
async fn catching_sigint(pid: u32) {
    crate::harness::poll(
        "the CLI to listen for Ctrl+C",
        Duration::from_secs(20),
        || async {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let caught = status
                .lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                .unwrap_or(0);
            // SIGINT is signal 2: bit 1 of the mask.
            if caught & (1 << 1) != 0 {
                Ok(())
            } else {
                Err(caught)
            }
        },
    )
    .await;
}

/// Sends Ctrl+C to the waiting `child` and checks it exits 130 naming
/// `run_id` and the commands to follow or cancel it, the run going on.
async fn interrupted_names_the_run(h: &Hearth, child: tokio::process::Child, run_id: &str) {
    catching_sigint(child.id().unwrap()).await;
    sigint(child.id().unwrap());
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains(&format!("`hearth run wait {run_id}`"))
            && err.contains(&format!("`hearth run cancel {run_id}`")),
        "{err}"
    );
    let (_, run) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(run["status"], "running", "the run goes on: {run}");
}

#[tokio::test]
async fn ctrl_c_in_run_wait_names_the_run_and_how_to_follow_or_cancel_it() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    // `hearth run wait <id>` on a run that does not end.
    fake.push(Reply::hang());
    let (code, _, err) = hearth(&h, &["message", "slow", "--thread", "cli:rw"]).await;
    assert_eq!(code, 0, "{err}");
    let run_id = running_run(&h, "cli:rw").await;
    let child = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(["run", "wait", &run_id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    interrupted_names_the_run(&h, child, &run_id).await;
    hearth(&h, &["run", "cancel", &run_id]).await;
}

#[tokio::test]
async fn ctrl_c_in_confirm_wait_names_the_run_too() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    // `hearth confirm <token> --wait` on a run whose answer does not come.
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    fake.push(Reply::hang());
    let (code, out, err) = hearth(
        &h,
        &["message", "forget it", "--wait", "--thread", "cli:cw"],
    )
    .await;
    assert_eq!(code, 4, "{out}{err}");
    let token = out
        .split("hearth confirm ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token in {out}"))
        .to_owned();
    let child = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(["confirm", &token, "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run_id = running_run(&h, "cli:cw").await;
    interrupted_names_the_run(&h, child, &run_id).await;
    hearth(&h, &["run", "cancel", &run_id]).await;
}

#[tokio::test]
async fn a_request_the_server_refuses_exits_2_and_json_errors_are_json() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    for args in [
        vec!["model", "set", "nowhere/none"],
        vec!["thinking", "set", "extreme"],
        vec!["message", "", "--wait"],
    ] {
        let (code, _, err) = hearth(&h, &args).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.starts_with("hearth: "), "{args:?}: {err}");
    }
    let (code, out, err) = hearth(&h, &["model", "set", "nowhere/none", "--json"]).await;
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    let v: Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["error"]["code"], "unknown_model", "{v}");
    assert_eq!(v["error"]["exit_code"], 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nowhere/none"),
        "{v}"
    );
}

#[tokio::test]
async fn a_usage_error_with_json_is_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = command(dir.path())
        .args(["--json", "memory", "export"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let v: Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["error"]["code"], "usage", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("--user"),
        "{v}"
    );
}

#[tokio::test]
async fn an_empty_hearth_token_counts_as_unset() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let out = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .env("HEARTH_TOKEN", "")
        .args(["model", "list"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "* echo/echo");
}

#[tokio::test]
async fn usage_lines_do_not_show_options_the_environment_gives_as_required() {
    let dir = tempfile::tempdir().unwrap();
    for args in [vec!["memory", "export"], vec!["confirm"]] {
        let out = command(dir.path())
            .env("HEARTH_TOKEN", "hth_secret")
            .env("HEARTH_URL", "http://127.0.0.1:9")
            .args(&args)
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        let usage = err
            .lines()
            .find(|l| l.starts_with("Usage: "))
            .unwrap_or_else(|| panic!("no usage line: {err}"));
        assert!(
            !usage.contains("--token") && !usage.contains("--home") && !usage.contains("--url"),
            "{usage}"
        );
    }
}
