//! The CLI as a person uses it, against a running server.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config, hearth};

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
    // A model the server does not know: a usage error the server refused.
    let (code, _, err) = hearth(&h, &["model", "set", "fake/missing"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("unknown_model"), "{err}");

    let (code, out, _) = hearth(&h, &["thinking", "set", "low"]).await;
    assert_eq!((code, out.trim()), (0, "low"));
    let (_, out, _) = hearth(&h, &["thinking", "get"]).await;
    assert_eq!(out.trim(), "low");
    // `new` clears the thread's history: the API sees it gone.
    let (_, before) = h.get("/v1/threads/cli:local/runtime").await;
    assert!(before["message_count"].as_u64().unwrap() >= 2, "{before}");
    let (code, out, err) = hearth(&h, &["new"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "new session on cli:local: its run cancelled, its history cleared (0 messages left)"
    );
    let (_, after) = h.get("/v1/threads/cli:local/runtime").await;
    assert_eq!(after["message_count"], 0, "{after}");
    let (code, out, _) = hearth(&h, &["health"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("ready"));

    let (code, out, _) = hearth(&h, &["token", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        out.starts_with("no tokens in ") && out.contains("hearth token create"),
        "{out}"
    );
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

/// Runs `hearth <args>` with `env` on a home that may have no server.
async fn hearth_at(
    home: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let mut cmd = command(home);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_wait_that_times_out_says_the_run_goes_on_and_exits_3() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::hang());
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (code, out, err) = hearth(&h, &["message", "slow one", "--wait", "--timeout", "1"]).await;
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("is still running after 1 s"), "{err}");
    let run_id = err
        .split("hearth run wait ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no `hearth run wait <id>` in {err}"))
        .to_owned();
    let (_, run) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(run["status"], "running", "{run}");
    let (code, out, err) = hearth(&h, &["run", "cancel", &run_id]).await;
    assert_eq!(
        (code, out.trim()),
        (0, format!("{run_id} cancelled").as_str()),
        "{err}"
    );
}

#[tokio::test]
async fn thinking_set_says_when_the_model_clamps_the_level() {
    let dir = tempfile::tempdir().unwrap();
    // No provider: the offline echo model, which has no reasoning control.
    let h = Hearth::start(dir.path(), None).await;
    let (code, out, err) = hearth(&h, &["thinking", "set", "high"]).await;
    assert_eq!((code, out.trim()), (0, "off"), "{err}");
    assert!(
        err.contains("echo/echo has no reasoning control") && err.contains("`high` is kept"),
        "{err}"
    );
    // A level the model keeps prints no note.
    let (code, out, err) = hearth(&h, &["thinking", "set", "off"]).await;
    assert_eq!((code, out.trim(), err.as_str()), (0, "off", ""));
}

/// Without `--url` or `HEARTH_URL`, client commands ask the address the
/// home's config binds: a replica with its own home and port is reached
/// with `--home` alone.
#[tokio::test]
async fn client_commands_ask_the_address_the_home_binds() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    // The file names the port the server took (it was started on port 0).
    let port = h.url.rsplit(':').next().unwrap();
    let config = format!(
        "{}[server]\nbind = \"0.0.0.0:{port}\"\n",
        fake_config(&fake.base_url())
    );
    std::fs::write(dir.path().join("hearth.toml"), config).unwrap();
    let (code, out, err) = hearth_at(dir.path(), &["health"], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    // A URL given still wins over the file.
    let (code, _, err) = hearth_at(
        dir.path(),
        &["health"],
        &[("HEARTH_URL", "http://127.0.0.1:9")],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("at http://127.0.0.1:9"), "{err}");
}

#[tokio::test]
async fn a_url_without_a_scheme_gets_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) =
        hearth_at(dir.path(), &["health"], &[("HEARTH_URL", "127.0.0.1:7777")]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("add the scheme: http://127.0.0.1:7777"),
        "{err}"
    );
    assert!(!err.contains("builder error"), "{err}");
}

#[tokio::test]
async fn a_new_token_says_where_it_lives_and_how_to_use_it() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let (code, out, err) = hearth(&h, &["token", "create", "--name", "laptop"]).await;
    assert_eq!(code, 0, "{err}");
    let secret = out.trim().to_owned();
    assert!(secret.starts_with("hth_"), "{out}");
    let home = std::fs::canonicalize(dir.path()).unwrap();
    assert!(err.contains(&home.display().to_string()), "{err}");
    assert!(
        err.contains(&format!("export HEARTH_TOKEN={secret}")),
        "{err}"
    );

    // Without the token the CLI is refused, and told where it takes one from.
    let (code, _, err) = hearth(&h, &["model", "list"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("HTTP 401") && err.contains("HEARTH_TOKEN") && err.contains("--token"),
        "{err}"
    );
    let (code, out, err) = hearth_at(
        dir.path(),
        &["model", "list"],
        &[("HEARTH_URL", &h.url), ("HEARTH_TOKEN", &secret)],
    )
    .await;
    assert_eq!((code, out.trim()), (0, "* echo/echo"), "{err}");
}

#[tokio::test]
async fn the_usage_table_aligns_its_columns() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    h.ask("cli:usage", "one").await;
    let (code, _, err) = hearth(&h, &["model", "set", "echo/echo", "--thread", "cli:usage"]).await;
    assert_eq!(code, 0, "{err}");
    h.ask("cli:usage", "two").await;
    let (code, out, err) = hearth(&h, &["usage", "--by", "model"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    // Right-aligned numbers: each column ends where its header ends.
    for header in ["calls", "input", "output", "cached", "cost"] {
        let end = lines[0].find(header).unwrap() + header.len();
        for row in &lines[1..] {
            let cell_end = row[..end].trim_end().len();
            assert_eq!(cell_end, end, "{header} misaligned:\n{out}");
        }
    }
}

/// Every `--json` output is one style: indented JSON, one document.
#[tokio::test]
async fn json_output_is_one_style() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let (_, out, _) = hearth(&h, &["message", "hi", "--wait", "--json"]).await;
    let run: Value = serde_json::from_str(&out).unwrap();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    for args in [
        vec!["run", "get", run_id.as_str()],
        vec!["model", "list"],
        vec!["model", "status"],
        vec!["usage"],
        vec!["health"],
        vec!["permissions", "list"],
        vec!["secrets", "list"],
        vec!["token", "list"],
        vec!["memory", "export", "--user", "cli:user:local"],
    ] {
        let mut args = args.clone();
        args.push("--json");
        let (code, out, err) = hearth(&h, &args).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        let v: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"));
        // Indented: the object opens on its own line, keys two spaces in.
        assert!(
            v.is_object() && out.starts_with("{\n  \"") && out.ends_with("\n}\n"),
            "{args:?}: {out}"
        );
    }
}

#[tokio::test]
async fn confirm_can_wait_for_the_answer() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "s1",
        "memory_save",
        json!({ "text": "The kite is green" }).to_string(),
    )]));
    fake.push(Reply::text("noted"));
    let (code, out, err) = hearth(&h, &["message", "remember the kite", "--wait"]).await;
    assert_eq!((code, out.trim()), (0, "noted"), "{err}");
    let (_, out, _) = hearth(&h, &["memory", "export", "--user", "cli:user:local"]).await;
    let memories: Value = serde_json::from_str(&out).unwrap();
    let id = memories["memories"][0]["id"].as_i64().unwrap();
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": id }).to_string(),
    )]));
    fake.push(Reply::text("the kite is forgotten"));
    // A wait that ends on a question exits 4, naming the run.
    let (code, out, err) = hearth(&h, &["message", "forget the kite", "--wait"]).await;
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("stopped to ask for a confirmation"), "{err}");
    let token = out
        .split("hearth confirm ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token in {out}"))
        .to_owned();
    let (code, out, err) = hearth(&h, &["confirm", &token, "--wait"]).await;
    assert_eq!((code, out.trim()), (0, "the kite is forgotten"), "{err}");
    let (_, out, _) = hearth(&h, &["memory", "export", "--user", "cli:user:local"]).await;
    let memories: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(memories["memories"], json!([]), "{memories}");
}

#[tokio::test]
async fn output_into_a_closed_pipe_ends_quietly() {
    // `hearth model list | head -0`: the reader is gone before hearth writes.
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(["--json", "model", "list"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // Ended by SIGPIPE, as `ls | head` ends `ls`: no exit code, no message.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(13), "{:?} {err}", out.status);
}

/// A model's answer may carry escape sequences (a web page it read can
/// steer it into writing them). Printed on a terminal, none of them is
/// obeyed: each control character shows as U+FFFD. Piped, the answer is
/// kept as it is, for the scripts that read it.
#[tokio::test]
async fn an_answer_printed_on_a_terminal_obeys_no_escape_sequence() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let steered = "hi \u{1b}]0;owned\u{7}\u{1b}[2J";

    let (code, out, err) = hearth(&h, &["message", steered, "--wait"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim_end(), format!("echo: {steered}"), "piped");

    // script(1) runs the command on a pseudo-terminal and copies what it
    // wrote there to its own stdout.
    let out = tokio::process::Command::new("script")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HEARTH_HOME", &h.home)
        .env("HEARTH_URL", &h.url)
        .env("HEARTH", crate::harness::bin())
        .env("STEERED", steered)
        .args([
            "-q",
            "-e",
            "-c",
            "exec \"$HEARTH\" message \"$STEERED\" --wait",
            "/dev/null",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("script(1) runs (util-linux)");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown} {:?}", out.stderr);
    assert!(
        shown.contains("echo: hi \u{FFFD}]0;owned\u{FFFD}\u{FFFD}[2J"),
        "{shown:?}"
    );
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
}
