//! `fake-mcp` fails closed: what breaks JSON-RPC 2.0 or MCP's order gets the
//! protocol's own error, and the test that ignores the report fails.

#![expect(
    clippy::expect_used,
    reason = "helpers of tests: what they cannot do fails the test"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use hearth_testkit::fake_mcp::Violations;
use serde_json::{Value, json};

/// Sends `lines` to a fresh `fake-mcp` reporting to `v`, closes its stdin,
/// and returns every message it wrote.
fn exchange(v: &Violations, lines: &[String]) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-mcp"))
        .args(v.args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fake-mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    for l in lines {
        writeln!(stdin, "{l}").expect("write to fake-mcp");
    }
    drop(stdin);
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let msgs = out
        .lines()
        .map(|l| serde_json::from_str(&l.expect("read")).expect("fake-mcp writes JSON"))
        .collect();
    assert!(child.wait().expect("wait").success());
    msgs
}

fn error_code(msgs: &[Value], id: &Value) -> Option<i64> {
    msgs.iter()
        .find(|m| &m["id"] == id && m.get("error").is_some())
        .and_then(|m| m["error"]["code"].as_i64())
}

fn init(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}})
    .to_string()
}

#[test]
fn a_line_that_is_not_json_gets_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    let v = Violations::in_dir(dir.path());
    let msgs = exchange(&v, &[init(1), "{not json".into()]);
    assert_eq!(error_code(&msgs, &Value::Null), Some(-32700), "{msgs:?}");
    let seen = v.violations();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("not JSON"), "{seen:?}");
}

#[test]
fn a_message_without_jsonrpc_2_0_gets_invalid_request() {
    let dir = tempfile::tempdir().unwrap();
    let v = Violations::in_dir(dir.path());
    let bad = [
        json!({"id": 2, "method": "tools/list"}).to_string(),
        json!({"jsonrpc": "1.0", "id": 3, "method": "tools/list"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 4}).to_string(),
    ];
    let mut lines = vec![init(1)];
    lines.extend(bad);
    let msgs = exchange(&v, &lines);
    for id in [2, 3, 4] {
        assert_eq!(error_code(&msgs, &json!(id)), Some(-32600), "{msgs:?}");
    }
    assert_eq!(v.violations().len(), 3);
}

#[test]
fn a_request_before_initialize_gets_invalid_request_and_ping_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let v = Violations::in_dir(dir.path());
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
        init(3),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).to_string(),
    ];
    let msgs = exchange(&v, &lines);
    assert_eq!(error_code(&msgs, &json!(1)), None, "{msgs:?}");
    assert_eq!(error_code(&msgs, &json!(2)), Some(-32600), "{msgs:?}");
    let listed = msgs
        .iter()
        .find(|m| m["id"] == 4)
        .expect("tools/list answered");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let seen = v.violations();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with("tools/list before initialize"),
        "{seen:?}"
    );
}

#[test]
fn a_well_behaved_session_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let v = Violations::in_dir(dir.path());
    let lines = [
        init(1),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "hi"}}})
        .to_string(),
    ];
    let msgs = exchange(&v, &lines);
    let echoed = msgs.iter().find(|m| m["id"] == 2).expect("call answered");
    assert_eq!(echoed["result"]["content"][0]["text"], "hi");
    assert!(v.violations().is_empty());
}

#[test]
#[should_panic(expected = "fake-mcp reported violations the test never read")]
fn a_report_never_read_fails_the_test() {
    let dir = tempfile::tempdir().unwrap();
    let v = Violations::in_dir(dir.path());
    exchange(&v, &["{not json".into()]);
    drop(v);
}
