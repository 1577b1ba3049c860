//! hearth as an MCP client, through the real binary: the testkit's
//! `fake-mcp` over stdio, then the reference servers `server-everything` and
//! `server-filesystem` (pinned npm packages that `.ci/test` installs and names
//! in `HEARTH_MCP_NPM_DIR`). The tests that need them are ignored by a plain
//! `cargo test` and run by `.ci/test`, where a missing tool fails them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hearth_testkit::tools::installed;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

/// `[mcp.servers.fk]` running fake-mcp; `member` so the default user may use
/// it, and its `echo` read-class (its readOnlyHint alone does not count).
fn fake_mcp_config() -> String {
    format!(
        "[mcp.servers.fk]\ncommand = \"{}\"\npreset = \"member\"\nread_tools = [\"echo\"]\n",
        hearth_testkit::fake_mcp::fake_mcp_bin().display()
    )
}

/// Waits until `server` is ready in `GET /v1/mcp/servers` (a server starts
/// in the background, so there is no event to wait on; the API is asked
/// until a deadline).
async fn ready(h: &Hearth, server: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, v) = h.get("/v1/mcp/servers").await;
        assert_eq!(s, 200, "{v}");
        let entry = v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == server)
            .cloned()
            .unwrap_or(Value::Null);
        if entry["state"] == "ready" {
            return entry;
        }
        assert!(
            Instant::now() < deadline,
            "{server} never became ready: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The tool result the model got back in its second request.
fn tool_result(fake: &FakeOpenAi) -> String {
    let reqs = fake.requests();
    assert!(reqs.len() >= 2, "{reqs:?}");
    reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn offered(fake: &FakeOpenAi) -> Vec<String> {
    crate::harness::offered_tools(&fake.requests()[0])
}

#[tokio::test]
async fn fake_mcp_tools_are_offered_called_listed_and_confirmed() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "fk__echo",
        r#"{"text":"hello from mcp"}"#,
    )]));
    fake.push(Reply::text("done"));
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{}{}", fake_config(&fake.base_url()), fake_mcp_config());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let entry = ready(&h, "fk").await;
    assert_eq!(entry["transport"], "stdio");
    assert_eq!(entry["tools"], 12, "{entry}");
    assert_eq!(entry["last_error"], Value::Null);

    let v = h.ask("api:mcp", "echo something").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert!(
        offered(&fake).iter().any(|n| n == "fk__echo"),
        "{:?}",
        offered(&fake)
    );
    let result = tool_result(&fake);
    assert!(result.contains("untrusted-content"), "{result}");
    assert!(result.contains("hello from mcp"), "{result}");

    let (_, tools) = h.get("/v1/tools").await;
    let find = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {tools}"))
    };
    let echo = find("fk__echo");
    assert_eq!(
        (
            &echo["class"],
            &echo["source"],
            &echo["capability"],
            &echo["available"]
        ),
        (
            &json!("read"),
            &json!("mcp:fk"),
            &json!("mcp.fk"),
            &json!(true)
        )
    );
    assert_eq!(find("fk__write_note")["class"], "write");
    // `env` says readOnlyHint: true, but the server's word is not trusted.
    assert_eq!(find("fk__env")["class"], "write");
    assert_eq!(find("current_time")["available"], true);

    // The CLI asks the running hearth.
    let listed = crate::harness::succeeds(
        command(dir.path()).args(["--url", &h.url, "--json", "mcp", "list"]),
    )
    .await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["servers"][0]["state"], "ready", "{listed}");
    let out = command(dir.path())
        .args([
            "--url",
            &h.url,
            "mcp",
            "call",
            "fk",
            "echo",
            r#"{"text":"by hand"}"#,
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "by hand");
    let out = command(dir.path())
        .args(["--url", &h.url, "mcp", "call", "nope", "echo"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_found"));

    // A tool without readOnlyHint is write-class: the run waits for the user.
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_2",
        "fk__write_note",
        r#"{"text":"remember"}"#,
    )]));
    fake.push(Reply::text("noted it"));
    let (s, waiting) = h
        .post(json!({ "text": "note it", "thread_key": "api:mcp2", "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    assert_eq!(waiting["status"], "awaiting_confirmation", "{waiting}");
    assert_eq!(waiting["confirmation"]["tool"], "fk__write_note");
}

#[tokio::test]
async fn a_server_preset_withholds_its_tools_from_users_below_it() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "fk__echo",
        r#"{"text":"x"}"#,
    )]));
    fake.push(Reply::text("refused"));
    let dir = tempfile::tempdir().unwrap();
    // The server's preset is `trusted` (the default); users are `member`.
    let config = format!(
        "{}[mcp.servers.fk]\ncommand = \"{}\"\n",
        fake_config(&fake.base_url()),
        hearth_testkit::fake_mcp::fake_mcp_bin().display()
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    ready(&h, "fk").await;
    let v = h.ask("api:mcp", "echo").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert!(!offered(&fake).iter().any(|n| n.starts_with("fk__")));
    let result = tool_result(&fake);
    assert!(result.contains("missing capability mcp.fk"), "{result}");
}

#[tokio::test]
async fn a_servers_capability_is_granted_checked_and_revoked_through_the_api() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "fk__echo",
        r#"{"text":"granted"}"#,
    )]));
    fake.push(Reply::text("done"));
    fake.push(Reply::text("nothing for you"));
    let dir = tempfile::tempdir().unwrap();
    // Preset `trusted` (the default): the `member` users need a grant.
    let config = format!(
        "{}[mcp.servers.fk]\ncommand = \"{}\"\nread_tools = [\"echo\"]\n",
        fake_config(&fake.base_url()),
        hearth_testkit::fake_mcp::fake_mcp_bin().display()
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    ready(&h, "fk").await;
    let grants = h.at("/v1/permissions/grants");
    let bob = json!({"subject": "user:api:user:bob", "capability": "mcp.fk"});
    let r = h.http.post(&grants).json(&bob).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.json::<Value>().await.unwrap()["capability"], "mcp.fk");
    let r = h
        .http
        .post(&grants)
        .json(&json!({"subject": "user:api:user:bob", "capability": "mcp.nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unknown_capability", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no MCP server named \"nope\"") && message.contains("mcp.fk"),
        "{message}"
    );

    let check = |user: &str| format!("/v1/permissions/check?user_key={user}&capability=mcp.fk");
    let (s, v) = h.get(&check("api:user:bob")).await;
    assert_eq!((s, &v), (200, &json!({"allowed": true, "via": "grant"})));
    let (s, v) = h.get(&check("api:user:anonymous")).await;
    assert_eq!((s, &v), (200, &json!({"allowed": false, "via": null})));

    let (s, v) = h
        .post(json!({"text": "echo", "thread_key": "api:bob", "user_key": "api:user:bob", "wait": true}))
        .await;
    assert_eq!((s, &v["status"]), (200, &json!("succeeded")), "{v}");
    assert!(offered(&fake).iter().any(|n| n == "fk__echo"));
    assert!(tool_result(&fake).contains("granted"));
    let v = h.ask("api:anon", "echo").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let third: Vec<String> = fake.requests()[2]["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert!(!third.iter().any(|n| n.starts_with("fk__")), "{third:?}");

    let r = h.http.delete(&grants).json(&bob).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let (_, v) = h.get(&check("api:user:bob")).await;
    assert_eq!(v["allowed"], false, "{v}");
}

/// The pid a fake-mcp flag wrote to `path`, once it is there.
async fn pid_in(path: &std::path::Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(pid) = std::fs::read_to_string(path)
            && !pid.trim().is_empty()
        {
            return pid.trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{} was never written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether process `pid` has exited (or is a zombie nobody reaped yet).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn no_mcp_server_or_process_it_started_outlives_serve() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    let (server, grandchild) = (pids.join("server"), pids.join("grandchild"));
    // It ignores stdin EOF, so only a signal ends it; the process it starts
    // shares its group and holds none of its pipes.
    let config = format!(
        "[mcp.servers.stubborn]\ncommand = \"{}\"\nargs = [\"--ignore-stdin-eof\", \"--pid-file\", \"{}\", \
         \"--grandchild-pid-file\", \"{}\"]\n",
        hearth_testkit::fake_mcp::fake_mcp_bin().display(),
        server.display(),
        grandchild.display(),
    );
    let h = Hearth::start(&dir.path().join("home"), Some(&config)).await;
    ready(&h, "stubborn").await;
    let (server, grandchild) = (pid_in(&server).await, pid_in(&grandchild).await);
    assert!(!gone(&server) && !gone(&grandchild));
    let status = h.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(gone(&server), "the MCP server {server} outlived hearth");
    assert!(
        gone(&grandchild),
        "the process {grandchild} the MCP server started outlived hearth"
    );
}

/// Where `.ci/test` installed the reference servers (`HEARTH_MCP_NPM_DIR`);
/// fails the test when they are not there.
fn npm_dir() -> PathBuf {
    installed(
        "the MCP reference servers",
        "HEARTH_MCP_NPM_DIR",
        "hearth-npm-2026.8.31",
    )
}

/// A `[mcp.servers.<name>]` entry running an installed npm package's bin
/// with node, with `extra` keys.
fn npm_server(
    name: &str,
    dir: &std::path::Path,
    script: &str,
    args: &[&str],
    extra: &str,
) -> String {
    let script = dir.join("node_modules").join(script);
    assert!(script.exists(), "{} is not installed", script.display());
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    format!(
        "[mcp.servers.{name}]\ncommand = \"node\"\nargs = {}\npreset = \"member\"\ntimeout_secs = 30\n{extra}\n",
        serde_json::to_string(&all).unwrap()
    )
}

/// Run by [`external_tools::server_everything_tools_run_end_to_end`].
async fn everything_tools_end_to_end() {
    let npm = npm_dir();
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "ev__echo",
        r#"{"message":"hi from hearth"}"#,
    )]));
    fake.push(Reply::text("echoed"));
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_2",
        "ev__get-sum",
        r#"{"a":2,"b":40}"#,
    )]));
    fake.push(Reply::text("summed"));
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_3",
        "ev__get-tiny-image",
        "{}",
    )]));
    fake.push(Reply::text("looked"));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}{}[tools]\nno_confirm = [\"ev__echo\", \"ev__get-sum\"]\n",
        fake_config(&fake.base_url()),
        npm_server(
            "ev",
            &npm,
            "@modelcontextprotocol/server-everything/dist/index.js",
            &["stdio"],
            // The operator's choice: its readOnlyHint makes get-tiny-image read-class.
            "trust_annotations = true",
        )
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let entry = ready(&h, "ev").await;
    assert!(entry["tools"].as_u64().unwrap() >= 5, "{entry}");
    let v = h.ask("api:ev", "echo").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert!(
        tool_result(&fake).contains("hi from hearth"),
        "{}",
        tool_result(&fake)
    );
    let v = h.ask("api:ev2", "sum").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let reqs = fake.requests();
    let last = reqs[3]["messages"].to_string();
    assert!(last.contains("42"), "{last}");
    // Images reach the model as a placeholder (tool results are text).
    let v = h.ask("api:ev3", "image").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let last = fake.requests()[5]["messages"].to_string();
    assert!(last.contains("[image image/png"), "{last}");
}

/// Run by [`external_tools::server_filesystem_writes_wait_for_confirmation`].
async fn filesystem_writes_wait_for_confirmation() {
    let npm = npm_dir();
    let fake = FakeOpenAi::start().await;
    let files = tempfile::tempdir().unwrap();
    let target = files.path().join("note.txt");
    let args = json!({"path": target.display().to_string(), "content": "written by hearth"});
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "fs__write_file",
        args.to_string(),
    )]));
    fake.push(Reply::text("wrote it"));
    let dir = tempfile::tempdir().unwrap();
    let root = files.path().display().to_string();
    let config = format!(
        "{}{}",
        fake_config(&fake.base_url()),
        npm_server(
            "fs",
            &npm,
            "@modelcontextprotocol/server-filesystem/dist/index.js",
            &[&root],
            "read_tools = [\"read_text_file\"]",
        )
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    ready(&h, "fs").await;
    let (_, tools) = h.get("/v1/tools").await;
    let class = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["class"].clone())
    };
    assert_eq!(class("fs__write_file"), Some(json!("write")), "{tools}");
    assert_eq!(class("fs__read_text_file"), Some(json!("read")), "{tools}");
    // It says readOnlyHint: true, but only the operator's read_tools count.
    assert_eq!(class("fs__list_directory"), Some(json!("write")), "{tools}");

    let (s, waiting) = h
        .post(json!({ "text": "write a note", "thread_key": "api:fs", "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    assert_eq!(
        waiting["confirmation"]["tool"], "fs__write_file",
        "{waiting}"
    );
    assert!(
        !target.exists(),
        "nothing is written before the confirmation"
    );
    let token = waiting["confirmation"]["token"].as_str().unwrap();
    let r = h
        .http
        .post(h.at(&format!("/v1/confirmations/{token}")))
        .json(&json!({"user_key": "api:user:anonymous", "approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let done = h.wait_run(waiting["run_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written by hearth"
    );
}

/// Node 22 and the pinned conformance suite from `.ci/test`; fails the test
/// when one is missing.
fn conformance() -> (String, String) {
    let node = installed(
        "Node 22",
        "HEARTH_NODE",
        "hearth-node22/node_modules/.bin/node",
    );
    let suite = installed(
        "the MCP conformance suite",
        "HEARTH_MCP_CONFORMANCE",
        "hearth-mcp-conformance-0.1.16/node_modules/.bin/conformance",
    );
    (node.display().to_string(), suite.display().to_string())
}

/// Runs the suite in client mode against `hearth mcp probe --call-all`.
async fn run_suite(node: &str, suite: &str, args: &[&str]) -> (bool, String) {
    let probe = format!("{} mcp probe --call-all", crate::harness::bin());
    let out = tokio::process::Command::new(node)
        .arg(suite)
        .args(["client", "--command", &probe])
        .args(args)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Run by [`external_tools::the_conformance_suite_passes_in_client_mode`].
async fn conformance_suite_in_client_mode() {
    let (node, suite) = conformance();
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        let (ok, text) = run_suite(&node, &suite, &["--scenario", scenario]).await;
        assert!(ok, "{scenario}:\n{text}");
        assert!(text.contains("OVERALL: PASSED"), "{scenario}:\n{text}");
    }
    let expected = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/mcp-conformance-client-expected-failures.yml"
    );
    let (ok, text) = run_suite(
        &node,
        &suite,
        &["--suite", "auth", "--expected-failures", expected],
    )
    .await;
    assert!(ok, "auth scenarios (expected failures):\n{text}");
}

/// `[mcp.servers.fk]` running fake-mcp, which writes every call it gets to
/// `calls`; `member` holds `mcp.fk`, and users here hold `none`. `echo` is
/// read-class by the operator's list (annotations are not trusted).
fn logging_config(fake: &FakeOpenAi, calls: &std::path::Path) -> String {
    format!(
        "{}[permissions]\ndefault_preset = \"none\"\n\
         [mcp.servers.fk]\ncommand = \"{}\"\nargs = [\"--calls\", \"{}\"]\npreset = \"member\"\n\
         read_tools = [\"echo\"]\n",
        fake_config(&fake.base_url()),
        hearth_testkit::fake_mcp::fake_mcp_bin().display(),
        calls.display()
    )
}

/// The calls fake-mcp got, by tool name.
fn calls_of(calls: &std::path::Path, tool: &str) -> usize {
    std::fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').next() == Some(tool))
        .count()
}

/// `POST /v1/mcp/servers/fk/call`.
async fn direct(h: &Hearth, body: Value) -> (u16, Value) {
    h.send(reqwest::Method::POST, "/v1/mcp/servers/fk/call", body)
        .await
}

/// The `tool.direct_call` records of the audit log, newest first, as
/// (actor, target, outcome).
async fn direct_audit(h: &Hearth) -> Vec<(String, String, String)> {
    let (_, v) = h.get("/v1/audit").await;
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "tool.direct_call")
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (s("actor"), s("target"), s("outcome"))
        })
        .collect()
}

#[tokio::test]
async fn a_direct_call_of_a_write_tool_runs_only_once_confirmed_and_is_audited() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls.log");
    let h = Hearth::start(
        &dir.path().join("home"),
        Some(&logging_config(&fake, &calls)),
    )
    .await;
    ready(&h, "fk").await;

    // A read-class tool answers at once.
    let (s, v) = direct(&h, json!({"tool": "echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "succeeded", "{v}");
    let out: Value = serde_json::from_str(v["output"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(out, json!({"text": "hi"}));
    assert_eq!(calls_of(&calls, "echo"), 1);

    // A write-class one waits for a confirmation and does not run before it.
    let (s, v) = direct(
        &h,
        json!({"tool": "write_note", "arguments": {"text": "direct"}}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["status"], "awaiting_confirmation", "{v}");
    assert_eq!(v["confirmation"]["tool"], "fk__write_note", "{v}");
    assert_eq!(v["user_key"], "api:operator:local", "{v}");
    assert_eq!(
        calls_of(&calls, "write_note"),
        0,
        "it ran before the answer"
    );
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    let token = v["confirmation"]["token"].as_str().unwrap().to_owned();
    let (s, v) = h
        .send(
            reqwest::Method::POST,
            &format!("/v1/confirmations/{token}"),
            json!({"user_key": "api:operator:local", "approve": true}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let v = h.wait_run(&run_id).await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert!(
        v["output"]["text"]
            .as_str()
            .unwrap()
            .contains("noted: direct"),
        "{v}"
    );
    assert_eq!(calls_of(&calls, "write_note"), 1);

    // Denied: it never runs.
    let (s, v) = direct(
        &h,
        json!({"tool": "write_note", "arguments": {"text": "no"}}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    let token = v["confirmation"]["token"].as_str().unwrap().to_owned();
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    h.send(
        reqwest::Method::POST,
        &format!("/v1/confirmations/{token}"),
        json!({"user_key": "api:operator:local", "approve": false}),
    )
    .await;
    let v = h.wait_run(&run_id).await;
    assert_eq!(
        (&v["status"], &v["error"]["code"]),
        (&json!("failed"), &json!("not_confirmed")),
        "{v}"
    );
    assert_eq!(calls_of(&calls, "write_note"), 1);

    // A named user is held to their own capabilities: mcp.fk is beyond `none`.
    let (s, v) = direct(
        &h,
        json!({"tool": "echo", "arguments": {"text": "x"}, "user_key": "api:user:eve"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (&v["status"], &v["error"]["code"]),
        (&json!("failed"), &json!("forbidden")),
        "{v}"
    );
    assert_eq!(calls_of(&calls, "echo"), 1);

    assert_eq!(
        direct_audit(&h).await,
        [
            ("api:user:eve", "fk__echo", "denied"),
            ("api:operator:local", "fk__write_note", "not_confirmed"),
            ("api:operator:local", "fk__write_note", "ok"),
            ("api:operator:local", "fk__echo", "ok"),
        ]
        .map(|(a, t, o)| (a.to_owned(), t.to_owned(), o.to_owned()))
    );
    assert_eq!(fake.request_count(), 0, "a direct call reached a model");

    // The CLI: without a terminal the question is printed and the call waits
    // (exit 3); `hearth confirm` answers it; `--yes` approves at once.
    let out = command(&h.home)
        .args([
            "--url",
            &h.url,
            "mcp",
            "call",
            "fk",
            "write_note",
            r#"{"text":"cli"}"#,
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(calls_of(&calls, "write_note"), 1, "{stdout}");
    let token = stdout
        .split_whitespace()
        .skip_while(|w| *w != "confirm")
        .nth(1)
        .unwrap_or_else(|| panic!("no token in {stdout:?}"))
        .to_owned();
    let out = command(&h.home)
        .args([
            "--url",
            &h.url,
            "confirm",
            &token,
            "--user",
            "api:operator:local",
            "--wait",
        ])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("noted: cli"),
        "{out:?}"
    );
    let out = command(&h.home)
        .args([
            "--url",
            &h.url,
            "mcp",
            "call",
            "--yes",
            "fk",
            "write_note",
            r#"{"text":"yes"}"#,
        ])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "noted: yes");
    assert_eq!(calls_of(&calls, "write_note"), 3);
}

#[tokio::test]
async fn a_direct_call_waiting_for_its_confirmation_survives_a_kill() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls.log");
    let home = dir.path().join("home");
    let config = logging_config(&fake, &calls);
    let h = Hearth::start(&home, Some(&config)).await;
    ready(&h, "fk").await;
    let (s, v) = direct(
        &h,
        json!({"tool": "write_note", "arguments": {"text": "later"}}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    let token = v["confirmation"]["token"].as_str().unwrap().to_owned();
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    h.kill().await;

    // After the restart it is still a direct call waiting for the same
    // answer, not a message for a model.
    let h = Hearth::start(&home, Some(&config)).await;
    ready(&h, "fk").await;
    let (s, v) = h
        .send(
            reqwest::Method::POST,
            &format!("/v1/confirmations/{token}"),
            json!({"user_key": "api:operator:local", "approve": true}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let v = h.wait_run(&run_id).await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(calls_of(&calls, "write_note"), 1);
    assert_eq!(
        fake.request_count(),
        0,
        "the recovered call reached a model"
    );
}

/// The tests that need tools from outside the workspace: ignored by a plain
/// `cargo test`, run by `.ci/test` (`-- --ignored external_tools::`), where
/// a missing tool fails them.
mod external_tools {
    #[tokio::test]
    #[ignore = "needs the MCP reference servers from npm (.ci/test installs them): \
                cargo test -p hearth-cli --test e2e -- --ignored external_tools::"]
    async fn server_everything_tools_run_end_to_end() {
        super::everything_tools_end_to_end().await;
    }

    #[tokio::test]
    #[ignore = "needs the MCP reference servers from npm (.ci/test installs them): \
                cargo test -p hearth-cli --test e2e -- --ignored external_tools::"]
    async fn server_filesystem_writes_wait_for_confirmation() {
        super::filesystem_writes_wait_for_confirmation().await;
    }

    #[tokio::test]
    #[ignore = "needs Node 22 and the MCP conformance suite (.ci/test installs them): \
                cargo test -p hearth-cli --test e2e -- --ignored external_tools::"]
    async fn the_conformance_suite_passes_in_client_mode() {
        super::conformance_suite_in_client_mode().await;
    }
}
