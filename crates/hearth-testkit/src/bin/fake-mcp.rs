//! `fake-mcp`: a scripted MCP server over stdio (newline-delimited JSON-RPC),
//! for the MCP client's tests. Written on serde_json alone so that it can
//! misbehave in ways an SDK server would not allow.
//!
//! Like some real servers, it sends `notifications/tools/list_changed`
//! before answering `initialize` (and adds the tool `early` at that moment).
//! Tools:
//! - `echo {text}` (readOnlyHint: true): answers the text;
//! - `write_note {text}` (no hints, so write-class): answers `noted: <text>`;
//! - `env`: answers the names of its environment variables, sorted, one per line;
//! - `hang`: never answers;
//! - `die`: exits at once (status 3);
//! - `add_tool`: adds the tool `extra` and sends `tools/list_changed`;
//! - `media`: answers an image and an embedded text resource;
//! - `big {bytes}`: answers that many `x`;
//! - `fail`: answers `isError: true`;
//! - `stderr {bytes}`: writes a line that is not UTF-8 to stderr, then about
//!   `bytes` of log lines, then answers `logged` (a closed stderr makes it
//!   exit with status 141, as SIGPIPE would);
//! - a tool whose name is 80 characters long;
//! - with `--read-files` only, `read_text_file {path}` (readOnlyHint: true):
//!   answers the file's text, as the reference filesystem server's tool of
//!   that name does (the README's example calls it).
//!
//! Flags, for the tests of its life around hearth's:
//! - `--pid-file <path>`: writes its pid there at start;
//! - `--grandchild-pid-file <path>`: starts a child of its own (another
//!   `fake-mcp` that only sleeps, in the same process group) and writes that
//!   child's pid there;
//! - `--ignore-stdin-eof`: keeps running after stdin ends (until a signal);
//! - `--start-delay-ms <n>`: waits that long before reading anything;
//! - `--calls <file>`: appends every `tools/call` it gets to the file as one
//!   line, `<name> <arguments as JSON>`, before it answers: a test sees
//!   which calls really reached the server.
//! - `--violations <file>`: appends every message that breaks JSON-RPC 2.0
//!   or MCP's order to the file, one line each (see
//!   `hearth_testkit::fake_mcp::Violations`, which reads it for a test).
//!
//! It fails closed, as a conforming server does: a line that is not JSON is
//! answered with JSON-RPC's -32700 (id null); a message without `jsonrpc:
//! "2.0"` or a `method` string, or a request other than `ping` before
//! `initialize`, with -32600. Each is also written to stderr and, with
//! `--violations`, to that file.

use std::io::{BufRead, Write};
use std::time::Duration;

use serde_json::{Value, json};

/// The 80-character tool name.
fn long_name() -> String {
    format!("long_{}", "n".repeat(75))
}

fn tool(name: &str, read_only: bool) -> Value {
    let mut t = json!({
        "name": name,
        "description": format!("fake tool {name}"),
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "bytes": {"type": "integer"}}},
    });
    if read_only {
        t["annotations"] = json!({"readOnlyHint": true});
    }
    t
}

fn send(out: &mut impl Write, msg: &Value) {
    // A closed stdout means the client is gone: nothing left to do.
    if writeln!(out, "{msg}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Where broken messages are reported: stderr always, and the file named by
/// `--violations`, when given, for the test to read.
struct Violations {
    file: Option<std::fs::File>,
}

impl Violations {
    fn open(args: Vec<String>) -> Self {
        let file = flag(&args, "--violations").map(|path| {
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("fake-mcp: cannot open {path}: {e}");
                    std::process::exit(2);
                }
            }
        });
        Self { file }
    }

    fn record(&mut self, what: &str) {
        // One line each, whatever the message held.
        let line = what.replace(['\n', '\r'], " ");
        eprintln!("fake-mcp: violation: {line}");
        if let Some(f) = self.file.as_mut()
            && writeln!(f, "{line}").and_then(|()| f.flush()).is_err()
        {
            eprintln!("fake-mcp: cannot write to the violations file");
            std::process::exit(2);
        }
    }
}

fn text(id: &Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
}

/// The value after `flag` on the command line.
fn flag(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Writes a line that is not UTF-8, then log lines, to stderr.
fn log_to_stderr(bytes: usize) {
    let mut err = std::io::stderr().lock();
    let mut written = 0;
    let mut ok = err.write_all(b"bad byte \xff\xfe here\n").is_ok();
    while ok && written < bytes {
        ok = writeln!(err, "log line {written:>12} of fake-mcp's stderr").is_ok();
        written += 40;
    }
    if !ok || err.flush().is_err() {
        // What a server without Rust's SIGPIPE handling does: dies.
        std::process::exit(141);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--sleep-forever") {
        sleep_forever();
    }
    if let Some(path) = flag(&args, "--pid-file") {
        let _ = std::fs::write(path, std::process::id().to_string());
    }
    if let Some(path) = flag(&args, "--grandchild-pid-file") {
        // Null stdio: it holds none of the pipes to hearth, like a worker
        // process a server starts.
        let child = std::env::current_exe().and_then(|exe| {
            std::process::Command::new(exe)
                .arg("--sleep-forever")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
        });
        if let Ok(child) = child {
            let _ = std::fs::write(path, child.id().to_string());
        }
    }
    if let Some(ms) = flag(&args, "--start-delay-ms").and_then(|v| v.parse().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let ignore_eof = args.iter().any(|a| a == "--ignore-stdin-eof");
    serve();
    if ignore_eof {
        sleep_forever();
    }
}

fn serve() {
    let mut tools: Vec<Value> = vec![
        tool("echo", true),
        tool("write_note", false),
        tool("env", true),
        tool("hang", true),
        tool("die", false),
        tool("add_tool", false),
        tool("media", true),
        tool("big", true),
        tool("fail", true),
        tool("stderr", true),
        tool(&long_name(), true),
    ];
    let read_files = std::env::args().any(|a| a == "--read-files");
    if read_files {
        let mut read = tool("read_text_file", true);
        read["inputSchema"] = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
        tools.push(read);
    }
    let mut calls_log: Option<std::fs::File> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--calls"
            && let Some(path) = args.next()
        {
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                Ok(f) => calls_log = Some(f),
                Err(e) => {
                    eprintln!("fake-mcp: cannot open {path}: {e}");
                    std::process::exit(2);
                }
            }
        }
    }
    let mut violations = Violations::open(std::env::args().collect::<Vec<_>>());
    let mut initialized = false;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            violations.record(&format!("a line that is not JSON: {line}"));
            send(&mut out, &rpc_error(&Value::Null, -32700, "Parse error"));
            continue;
        };
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        // A response to a request of ours (none are sent) has no method.
        let is_response = msg.get("method").is_none()
            && (msg.get("result").is_some() || msg.get("error").is_some());
        if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0")
            || !(is_response || msg.get("method").is_some_and(Value::is_string))
        {
            violations.record(&format!(
                "not a JSON-RPC 2.0 message (jsonrpc \"2.0\" and a method needed): {line}"
            ));
            send(&mut out, &rpc_error(&id, -32600, "Invalid Request"));
            continue;
        }
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let is_request = msg.get("id").is_some();
        if !initialized && is_request && !matches!(method, "initialize" | "ping") {
            violations.record(&format!("{method} before initialize: {line}"));
            send(
                &mut out,
                &rpc_error(&id, -32600, "Invalid Request: initialize must come first"),
            );
            continue;
        }
        match method {
            "initialize" => {
                initialized = true;
                tools.push(tool("early", true));
                send(
                    &mut out,
                    &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                );
                let version = msg
                    .pointer("/params/protocolVersion")
                    .cloned()
                    .unwrap_or(json!("2025-06-18"));
                send(
                    &mut out,
                    &json!({"jsonrpc": "2.0", "id": id, "result": {
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": true}},
                        "serverInfo": {"name": "fake-mcp", "version": "0.0.0"},
                    }}),
                );
            }
            "ping" => send(&mut out, &json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            "tools/list" => send(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}),
            ),
            "tools/call" => {
                let name = msg
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let arg = |k: &str| msg.pointer(&format!("/params/arguments/{k}")).cloned();
                let said = arg("text")
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                if let Some(log) = calls_log.as_mut() {
                    let arguments = msg
                        .pointer("/params/arguments")
                        .cloned()
                        .unwrap_or(json!({}));
                    if writeln!(log, "{name} {arguments}")
                        .and_then(|()| log.flush())
                        .is_err()
                    {
                        eprintln!("fake-mcp: cannot write to the calls file");
                        std::process::exit(2);
                    }
                }
                match name {
                    "echo" => send(&mut out, &text(&id, &said)),
                    "write_note" => send(&mut out, &text(&id, &format!("noted: {said}"))),
                    "env" => {
                        let mut names: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
                        names.sort();
                        send(&mut out, &text(&id, &names.join("\n")));
                    }
                    "hang" => {}
                    "die" => std::process::exit(3),
                    "add_tool" => {
                        tools.push(tool("extra", true));
                        send(&mut out, &text(&id, "added"));
                        send(
                            &mut out,
                            &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                        );
                    }
                    "media" => send(
                        &mut out,
                        &json!({"jsonrpc": "2.0", "id": id, "result": {"content": [
                            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                            {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "resource body"}},
                        ]}}),
                    ),
                    "big" => {
                        let n = arg("bytes").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
                        send(&mut out, &text(&id, &"x".repeat(n)));
                    }
                    "fail" => send(
                        &mut out,
                        &json!({"jsonrpc": "2.0", "id": id, "result": {"isError": true, "content": [{"type": "text", "text": "it broke"}]}}),
                    ),
                    "stderr" => {
                        let n = arg("bytes").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
                        log_to_stderr(n);
                        send(&mut out, &text(&id, "logged"));
                    }
                    "read_text_file" if read_files => {
                        let path = arg("path")
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        match std::fs::read_to_string(&path) {
                            Ok(body) => send(&mut out, &text(&id, &body)),
                            Err(e) => send(
                                &mut out,
                                &json!({"jsonrpc": "2.0", "id": id, "result": {"isError": true, "content": [{"type": "text", "text": format!("cannot read {path}: {e}")}]}}),
                            ),
                        }
                    }
                    n if n == long_name() || n == "early" || n == "extra" => {
                        send(&mut out, &text(&id, n));
                    }
                    _ => send(
                        &mut out,
                        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("unknown tool {name}")}}),
                    ),
                }
            }
            _ if msg.get("id").is_some() => send(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}}),
            ),
            // Notifications (initialized, cancelled) need no answer.
            _ => {}
        }
    }
}
