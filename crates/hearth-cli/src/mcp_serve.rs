//! `hearth mcp serve`: hearth as an MCP server on stdio, for clients that
//! start their servers as child processes (Claude Code, Codex, editors).
//!
//! It is a bridge to the running hearth's `/mcp` endpoint, not a second
//! implementation: each JSON-RPC line read on stdin is POSTed there (with
//! `--token`, the session id and the negotiated protocol version), and every
//! message of the answer (JSON or SSE) is written to stdout as one line. So
//! the tools, their arguments and the caller (`mcp:user:<token name>`) are
//! exactly those of `/mcp`, and the bridge holds no state but the session.
//!
//! stdout carries protocol messages only; problems go to stderr.

use std::sync::Arc;

use futures_util::StreamExt;
use hearth_llm::sse::SseDecoder;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use crate::Exit;
use crate::cli::Global;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// JSON-RPC's code for an error of the server (the bridge or hearth).
const SERVER_ERROR: i64 = -32603;
const PARSE_ERROR: i64 = -32700;
/// Longest stdin line accepted (a JSON-RPC message), as `/mcp`'s body limit.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What the bridge remembers of the MCP session with hearth.
#[derive(Default)]
struct Session {
    id: Option<String>,
    protocol_version: Option<String>,
    /// The client's `initialize` request, replayed when hearth forgot the
    /// session (it ends idle sessions), so a long-lived client keeps working.
    initialize: Option<Value>,
}

struct Bridge {
    http: reqwest::Client,
    endpoint: String,
    token: Option<String>,
    session: Mutex<Session>,
    out: mpsc::UnboundedSender<String>,
}

/// Runs the bridge until stdin closes.
pub async fn run(g: &Global) -> Result<(), Exit> {
    let base = crate::client::base_url(&crate::client::server_url(g))?;
    let http = hearth_http::client_builder()
        .build()
        .map_err(|e| Exit::from(anyhow::anyhow!("cannot build the HTTP client: {e}")))?;
    let (out, mut lines) = mpsc::unbounded_channel::<String>();
    // One writer, so concurrent answers never interleave within a line.
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            if stdout.write_all(line.as_bytes()).await.is_err()
                || stdout.write_all(b"\n").await.is_err()
                || stdout.flush().await.is_err()
            {
                break;
            }
        }
    });
    let bridge = Arc::new(Bridge {
        http,
        endpoint: format!("{base}/mcp"),
        token: g.token.clone(),
        session: Mutex::new(Session::default()),
        out,
    });
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut tasks = tokio::task::JoinSet::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut stdin)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await
            .map_err(|e| anyhow::anyhow!("reading stdin: {e}"))?;
        if n == 0 {
            break;
        }
        if buf.len() > MAX_LINE_BYTES && !buf.ends_with(b"\n") {
            bridge.reply_error(&Value::Null, PARSE_ERROR, "message too large");
            // The rest of the oversized line is thrown away, not buffered:
            // it is not a message of its own.
            discard_line(&mut stdin)
                .await
                .map_err(|e| anyhow::anyhow!("reading stdin: {e}"))?;
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                bridge.reply_error(&Value::Null, PARSE_ERROR, &format!("not JSON: {e}"));
                continue;
            }
        };
        if is_initialize(&msg) {
            // Later messages need the session id it creates: finish it first.
            bridge.clone().forward(msg, true).await;
        } else {
            let b = bridge.clone();
            tasks.spawn(async move { b.forward(msg, true).await });
        }
    }
    while tasks.join_next().await.is_some() {}
    bridge.close().await;
    drop(bridge);
    let _ = writer.await;
    Ok(())
}

async fn discard_line(r: &mut (impl AsyncBufReadExt + Unpin)) -> std::io::Result<()> {
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            r.consume(i + 1);
            return Ok(());
        }
        let n = chunk.len();
        r.consume(n);
    }
}

fn is_initialize(msg: &Value) -> bool {
    msg.get("method").and_then(Value::as_str) == Some("initialize") && msg.get("id").is_some()
}

impl Bridge {
    fn reply_error(&self, id: &Value, code: i64, message: &str) {
        let v = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let _ = self.out.send(v.to_string());
    }

    fn request(&self, session: &Session) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        if let Some(id) = &session.id {
            rb = rb.header(SESSION_HEADER, id);
        }
        if let Some(v) = &session.protocol_version {
            rb = rb.header(VERSION_HEADER, v);
        }
        rb
    }

    /// Sends one message to hearth and writes what comes back. `retry`:
    /// whether a forgotten session may be re-established once for it.
    async fn forward(self: Arc<Self>, msg: Value, retry: bool) {
        let id = msg.get("id").cloned();
        let initialize = is_initialize(&msg);
        let rb = {
            let mut session = self.session.lock().await;
            if initialize {
                *session = Session {
                    initialize: Some(msg.clone()),
                    ..Session::default()
                };
            }
            self.request(&session).json(&msg)
        };
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => {
                return self.fail(id, &format!(
                    "cannot reach hearth at {}: {} (is `hearth serve` running? set --url or HEARTH_URL)",
                    self.endpoint,
                    e.without_url()
                ));
            }
        };
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && retry && !initialize && self.reinitialize().await {
            return Box::pin(self.forward(msg, false)).await;
        }
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let hint = match status {
                StatusCode::UNAUTHORIZED => " (set --token or HEARTH_TOKEN to an API token)",
                _ => "",
            };
            return self.fail(
                id,
                &format!(
                    "hearth answered {status}{hint}: {}",
                    body.chars().take(300).collect::<String>()
                ),
            );
        }
        if initialize {
            let mut session = self.session.lock().await;
            session.id = resp
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
        }
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if is_sse {
            self.relay_sse(resp, initialize).await;
        } else if status != StatusCode::ACCEPTED {
            match resp.bytes().await {
                Ok(body) if !body.is_empty() => self.emit(&body, initialize).await,
                Ok(_) => {}
                Err(e) => self.fail(id, &format!("reading hearth's answer: {e}")),
            }
        }
    }

    fn fail(&self, id: Option<Value>, message: &str) {
        eprintln!("hearth mcp serve: {message}");
        // A notification gets no answer, even an error.
        if let Some(id) = id {
            self.reply_error(&id, SERVER_ERROR, message);
        }
    }

    /// Writes one JSON-RPC message from hearth; remembers the protocol
    /// version an initialize result settles on.
    async fn emit(&self, body: &[u8], initialize: bool) {
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            eprintln!("hearth mcp serve: hearth sent something that is not JSON; dropped");
            return;
        };
        if initialize
            && let Some(version) = v.pointer("/result/protocolVersion").and_then(Value::as_str)
            && HeaderValue::from_str(version).is_ok()
        {
            self.session.lock().await.protocol_version = Some(version.to_owned());
        }
        let _ = self.out.send(v.to_string());
    }

    async fn relay_sse(&self, resp: reqwest::Response, initialize: bool) {
        let mut decoder = SseDecoder::new();
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else {
                eprintln!("hearth mcp serve: hearth's event stream broke off");
                return;
            };
            decoder.push(&chunk);
            loop {
                match decoder.next_event() {
                    // Priming events (an id and a retry, no data) carry no message.
                    Ok(Some(ev)) if ev.data.trim().is_empty() => {}
                    Ok(Some(ev)) => self.emit(ev.data.as_bytes(), initialize).await,
                    Ok(None) => break,
                    Err(e) => eprintln!("hearth mcp serve: skipped an event: {e}"),
                }
            }
        }
    }

    /// Replays the client's initialize (and the `initialized` notification)
    /// after hearth forgot the session. False when it cannot.
    async fn reinitialize(&self) -> bool {
        let mut session = self.session.lock().await;
        let Some(init) = session.initialize.clone() else {
            return false;
        };
        session.id = None;
        let Ok(resp) = self.request(&session).json(&init).send().await else {
            return false;
        };
        if !resp.status().is_success() {
            return false;
        }
        session.id = resp
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // The answer was given to the client long ago; only the session matters.
        let _ = resp.bytes().await;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.request(&session)
            .json(&note)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// Ends the session at hearth (best effort: it expires anyway).
    async fn close(&self) {
        let session = self.session.lock().await;
        let Some(id) = &session.id else { return };
        let mut rb = self.http.delete(&self.endpoint).header(SESSION_HEADER, id);
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        let _ = rb.send().await;
    }
}
