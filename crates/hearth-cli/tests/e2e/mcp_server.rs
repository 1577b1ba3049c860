//! hearth as an MCP server, checked by others' clients: the official `mcp`
//! Python SDK over streamable HTTP (`/mcp`) and over stdio (`hearth mcp
//! serve`), and the official conformance suite in server mode.
//!
//! `.ci/test` installs what these need (the pinned `mcp` package; Node 22 and
//! the pinned suite in cache directories) and runs them: they are ignored
//! by a plain `cargo test`, and a missing tool fails them (see
//! `hearth_testkit::tools`), so none passes without running.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use hearth_testkit::FakeOpenAi;
use serde_json::{Value, json};

use hearth_testkit::tools::{installed, python};

use crate::harness::{Hearth, bin, command, fake_config};

/// What `hearth` answers to MCP's tools/list, in order.
const TOOLS: [&str; 5] = [
    "send_message",
    "get_run",
    "list_threads",
    "memory_search",
    "list_tools",
];

/// The `mcp` package version the client script is written for (pinned in `.ci/prereqs.sh`).
const MCP_PY_VERSION: &str = "2.3.0";
/// The conformance suite's version (pinned in `.ci/prereqs.sh`).
const CONFORMANCE_VERSION: &str = "0.1.16";

/// Checks that the `mcp` package `.ci/test` pins is installed (fails the
/// test otherwise, saying what to install).
fn python_has_mcp() {
    hearth_testkit::tools::python_package("mcp", MCP_PY_VERSION);
}

async fn run_client(args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/mcp_client.py");
    let out: Output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python())
            .arg(script)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python MCP client did not finish within 120 s")
    .unwrap();
    assert!(
        out.status.success(),
        "mcp_client.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// What both transports must show: hearth's tools, the fake's answer as
/// text, the run envelope as structured content, the token holder as user.
fn check_session(v: &Value, user: &str) {
    assert_eq!(v["server"], "hearth", "{v}");
    assert_eq!(v["tools"], json!(TOOLS), "{v}");
    assert_eq!(v["is_error"], json!(false), "{v}");
    let answer = v["answer"][0].as_str().unwrap();
    assert!(answer.contains("hello over mcp"), "{v}");
    let env = &v["envelope"];
    assert_eq!(env["status"], "succeeded", "{v}");
    assert_eq!(env["output"]["text"].as_str(), Some(answer), "{v}");
    assert_eq!(env["thread_key"], "mcp:e2e");
    assert_eq!(env["user_key"], user);
    assert_eq!(v["get_run"], *env);
    assert_eq!(v["missing_is_error"], json!(true), "{v}");
}

/// Run by [`external_tools::the_python_sdk_uses_hearth_over_http_and_stdio`].
async fn python_sdk_over_http_and_stdio() {
    python_has_mcp();
    let dir = tempfile::tempdir().unwrap();
    // An empty script: the fake echoes the last user message.
    let fake = FakeOpenAi::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let secret = crate::harness::new_token(dir.path(), "e2e").await;
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    let http = run_client(&["http", &h.at("/mcp"), &secret]).await;
    check_session(&http, "mcp:user:e2e");

    let stdio = run_client(&["stdio", bin(), &h.url, &secret]).await;
    check_session(&stdio, "mcp:user:e2e");
    assert_ne!(http["envelope"]["run_id"], stdio["envelope"]["run_id"]);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn mcp_serve_without_a_running_hearth_answers_with_an_error() {
    // A port nothing listens on: bind one, note it, free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let mut child = command(dir.path())
        .args(["--url", &format!("http://127.0.0.1:{port}"), "mcp", "serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use tokio::io::AsyncWriteExt;
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\nnot json\n")
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let by_id = |id: Value| lines.iter().find(|l| l["id"] == id).unwrap();
    assert_eq!(by_id(json!(7))["error"]["code"], -32603);
    assert!(
        by_id(json!(7))["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach hearth")
    );
    assert_eq!(by_id(Value::Null)["error"]["code"], -32700);
}

/// Node 22 and the conformance suite, where `.ci/test` installs them (or
/// where HEARTH_NODE and HEARTH_MCP_CONFORMANCE point); fails the test
/// when one is missing.
fn conformance_tools() -> (PathBuf, PathBuf) {
    let node = installed(
        "Node 22",
        "HEARTH_NODE",
        "hearth-node22/node_modules/.bin/node",
    );
    let suite = installed(
        "the MCP conformance suite",
        "HEARTH_MCP_CONFORMANCE",
        &format!("hearth-mcp-conformance-{CONFORMANCE_VERSION}/node_modules/.bin/conformance"),
    );
    (node, suite)
}

/// Run by [`external_tools::the_conformance_suite_passes_in_server_mode`].
async fn conformance_suite_in_server_mode() {
    let (node, suite) = conformance_tools();
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let h = Hearth::start(
        &dir.path().join("home"),
        Some(&fake_config(&fake.base_url())),
    )
    .await;
    let expected = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../hearth-server/tests/mcp-conformance-server-expected-failures.yml"
    );
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new(&node)
            .arg(&suite)
            .args([
                "server",
                "--url",
                &h.at("/mcp"),
                "--expected-failures",
                expected,
            ])
            .arg("-o")
            .arg(dir.path().join("results"))
            .current_dir(dir.path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the conformance suite did not finish within 300 s")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Exit 0: every scenario passed except those expected to fail, and each
    // of those did fail (a stale entry is an error too).
    assert!(
        out.status.success(),
        "conformance failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The scenarios that apply to hearth's own tools, checked by name so
    // that a change of the suite's output cannot pass them silently.
    for passed in [
        "server-initialize",
        "ping",
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        assert!(
            stdout.contains(&format!("\u{2713} {passed}:")),
            "{passed}: {stdout}"
        );
    }
}

/// The tests that need tools from outside the workspace: ignored by a plain
/// `cargo test`, run by `.ci/test` (`-- --ignored external_tools::`), where
/// a missing tool fails them.
mod external_tools {
    #[tokio::test]
    #[ignore = "needs the Python package mcp==2.3.0 (.ci/test installs it): \
                cargo test -p hearth-cli --test e2e -- --ignored external_tools::"]
    async fn the_python_sdk_uses_hearth_over_http_and_stdio() {
        super::python_sdk_over_http_and_stdio().await;
    }

    #[tokio::test]
    #[ignore = "needs Node 22 and the MCP conformance suite (.ci/test installs them): \
                cargo test -p hearth-cli --test e2e -- --ignored external_tools::"]
    async fn the_conformance_suite_passes_in_server_mode() {
        super::conformance_suite_in_server_mode().await;
    }
}
