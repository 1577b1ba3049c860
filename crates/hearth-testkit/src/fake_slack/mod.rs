//! `FakeSlack`: the Slack Web API and a Socket Mode WebSocket server on
//! 127.0.0.1, written from Slack's API reference, for channel tests.
//!
//! The Web API (`POST /api/<method>`) checks every request it receives: the
//! token type each method needs (`xoxb-` bot token, `xapp-` app-level token
//! for `apps.connections.open`), required fields, the text and Block Kit
//! limits (3000 characters of section text, 50 blocks, 25 buttons, 2000
//! characters of button value), and that mrkdwn text escapes `&`, `<` and
//! `>`. Broken invariants are collected in [`FakeSlack::violations`]. It
//! answers 429 with `Retry-After` on demand ([`FakeSlack::rate_limit`]) and,
//! as Slack limits each method per workspace, counts any call of that
//! method before `Retry-After` has passed as a violation, whatever the
//! conversation.
//!
//! The Socket Mode server (see [`socket`]) sends `hello`, delivers the
//! envelopes a test pushes, checks each is acknowledged by its
//! `envelope_id` within 3 s, and redelivers unacknowledged ones with a
//! higher `retry_attempt` on the next connection.

mod checks;
mod hold;
pub mod socket;

pub use socket::event_callback;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The bot token the fake accepts.
pub const BOT_TOKEN: &str = "xoxb-1-fake-bot-token";
/// The app-level token the fake accepts.
pub const APP_TOKEN: &str = "xapp-1-fake-app-token";
/// The bot's user id (`auth.test`).
pub const BOT_USER: &str = "UHEARTHBOT";
/// The workspace.
pub const TEAM: &str = "TFAKE";

/// One Web API call (or `response_url` post) the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `chat.postMessage`, ..., or `response_url`.
    pub method: String,
    /// The JSON body.
    pub body: Value,
    /// When the fake received it.
    pub at: Instant,
}

/// A message the fake holds (posted by the bot).
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    /// Conversation.
    pub channel: String,
    /// Its timestamp.
    pub ts: String,
    /// The thread it is in.
    pub thread_ts: Option<String>,
    /// Its current text.
    pub text: String,
    /// Its current blocks.
    pub blocks: Value,
    /// Deleted with `chat.delete`.
    pub deleted: bool,
}

#[derive(Default)]
pub(crate) struct Inner {
    calls: Vec<Call>,
    pub(crate) violations: Vec<String>,
    /// How many violations the test has read: the rest fail it on drop.
    checked: usize,
    rate_limits: VecDeque<(String, u64)>,
    /// Methods answered 429, until their `Retry-After` ends.
    limited_until: HashMap<String, Instant>,
    messages: Vec<Posted>,
    next_ts: u64,
    holds: Vec<hold::HoldRule>,
    /// Calls held so far, released or not.
    held: usize,
    /// Bumped by each release: calls held before it go on.
    release_generation: u64,
    pub(crate) socket: socket::SocketState,
}

/// State shared by the handlers and the handle.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    /// Notified on every call, connection and acknowledgement.
    pub(crate) changed: Notify,
    /// Held calls may go on.
    released: Notify,
    pub(crate) http_addr: SocketAddr,
    pub(crate) ws_addr: SocketAddr,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn violation(&self, v: String) {
        self.lock().violations.push(v);
        self.changed.notify_waiters();
    }
}

/// A fake Slack; stops when dropped.
pub struct FakeSlack {
    pub(crate) shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        // A test that never looked at what hearth broke must not pass: the
        // call got Slack's `ok: false`, which hearth may have retried or
        // swallowed on the way to a green assertion.
        if std::thread::panicking() {
            return;
        }
        let unchecked = {
            let s = self.shared.lock();
            s.violations[s.checked.min(s.violations.len())..].to_vec()
        };
        assert!(
            unchecked.is_empty(),
            "FakeSlack dropped with violations the test never read \
             (call violations() and assert on them): {unchecked:#?}"
        );
    }
}

impl std::fmt::Debug for FakeSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSlack")
            .field("http", &self.shared.http_addr)
            .field("ws", &self.shared.ws_addr)
            .finish_non_exhaustive()
    }
}

impl FakeSlack {
    /// Starts on 127.0.0.1 with OS-chosen ports.
    pub async fn start() -> io::Result<Self> {
        let http = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let ws = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
            released: Notify::new(),
            http_addr: http.local_addr()?,
            ws_addr: ws.local_addr()?,
        });
        let app = Router::new()
            .route("/api/{method}", post(api))
            .route("/respond/{id}", post(respond))
            .with_state(shared.clone());
        let serve = tokio::spawn(async move {
            let _ = axum::serve(http, app).await;
        });
        let sockets = tokio::spawn(socket::accept_loop(ws, shared.clone()));
        Ok(Self {
            shared,
            tasks: vec![serve, sockets],
        })
    }

    /// `http://<addr>/api`: the `api_base` to configure.
    pub fn api_base(&self) -> String {
        format!("http://{}/api", self.shared.http_addr)
    }

    /// A `response_url` for a slash command or interaction payload.
    pub fn response_url(&self, id: &str) -> String {
        format!("http://{}/respond/{id}", self.shared.http_addr)
    }

    /// The next call of `method` is answered 429 with `Retry-After: secs`.
    pub fn rate_limit(&self, method: &str, secs: u64) {
        self.shared
            .lock()
            .rate_limits
            .push_back((method.to_owned(), secs));
    }

    /// Every call of `method` so far (`response_url` for response posts).
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.body.clone())
            .collect()
    }

    /// Every call of `method` so far with when it arrived.
    pub fn calls_at(&self, method: &str) -> Vec<(Instant, Value)> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .map(|c| (c.at, c.body.clone()))
            .collect()
    }

    /// Every call so far, in order.
    pub fn all_calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// Messages the bot posted (and their current state).
    pub fn messages(&self) -> Vec<Posted> {
        self.shared.lock().messages.clone()
    }

    /// Broken rules seen so far, one sentence each. A call that broke
    /// Slack's rules got Slack's own answer (`ok: false` with its error, or
    /// 429 again before `Retry-After`), not a success. Reading them marks
    /// them checked: a fake dropped with violations never read fails the test.
    pub fn violations(&self) -> Vec<String> {
        let mut s = self.shared.lock();
        s.checked = s.violations.len();
        s.violations.clone()
    }

    /// Waits (at most `within`) until `f` holds of the state; the last
    /// value of `f`'s result either way.
    pub(crate) async fn wait<T>(
        &self,
        within: Duration,
        f: impl Fn(&Inner) -> Option<T>,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(v) = f(&self.shared.lock()) {
                return Some(v);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return f(&self.shared.lock());
            }
        }
    }

    /// Waits until the bot has a (not deleted) message containing `want`;
    /// the first such message.
    ///
    /// # Panics
    /// After `within` without one, listing the calls seen.
    pub async fn wait_posted(&self, want: &str, within: Duration) -> Posted {
        let got = self
            .wait(within, |s| {
                s.messages
                    .iter()
                    .find(|m| !m.deleted && m.text.contains(want))
                    .cloned()
            })
            .await;
        match got {
            Some(m) => m,
            None => panic!(
                "waited {within:?} for a message with {want:?}; calls seen: {:#?}",
                self.all_calls()
            ),
        }
    }

    /// Waits until `method` was called at least `n` times; its calls.
    ///
    /// # Panics
    /// After `within` without them, listing the calls seen.
    pub async fn wait_calls(&self, method: &str, n: usize, within: Duration) -> Vec<Value> {
        let got = self
            .wait(within, |s| {
                let calls: Vec<Value> = s
                    .calls
                    .iter()
                    .filter(|c| c.method == method)
                    .map(|c| c.body.clone())
                    .collect();
                (calls.len() >= n).then_some(calls)
            })
            .await;
        match got {
            Some(calls) => calls,
            None => panic!(
                "waited {within:?} for {n} {method} calls; calls seen: {:#?}",
                self.all_calls()
            ),
        }
    }
}

/// The Web API.
async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut violations = Vec::new();
    let index = shared.lock().calls.len();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let wants_app = method == "apps.connections.open";
    let token_error = match (token, wants_app) {
        ("", _) => Some("not_authed"),
        (t, true) if t.starts_with("xoxb-") => Some("not_allowed_token_type"),
        (t, false) if t.starts_with("xapp-") => Some("not_allowed_token_type"),
        (t, true) if t != APP_TOKEN => Some("invalid_auth"),
        (t, false) if t != BOT_TOKEN => Some("invalid_auth"),
        _ => None,
    };
    // Slack's own error for a body it cannot read, if any.
    let mut body_error = None;
    let parsed: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                violations.push(format!("call {index} ({method}): body is not JSON: {e}"));
                body_error = Some("invalid_json");
                Value::Null
            }
        }
    };
    if !body.is_empty() {
        let json_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json_type {
            violations.push(format!(
                "call {index} ({method}): JSON body without Content-Type application/json"
            ));
            body_error = body_error.or(Some("invalid_form_data"));
        }
    }
    if let Some(err) = token_error {
        violations.push(format!("call {index} ({method}): token refused: {err}"));
    }
    hold::hold_if_matching(&shared, &method, &parsed).await;
    let answer = {
        let mut s = shared.lock();
        let now = Instant::now();
        s.calls.push(Call {
            method: method.clone(),
            body: parsed.clone(),
            at: now,
        });
        // Still limited: Slack answers 429 again, for what is left.
        let early = s
            .limited_until
            .get(&method)
            .filter(|until| **until > now)
            .map(|until| *until - now);
        if let Some(left) = early {
            violations.push(format!(
                "call {index} ({method}): sent {left:?} before the Retry-After of an earlier 429 ended"
            ));
        }
        let limited = s
            .rate_limits
            .iter()
            .position(|(m, _)| *m == method)
            .and_then(|i| s.rate_limits.remove(i));
        if let Some(err) = token_error {
            Answer::Error(err.to_owned())
        } else if let Some(err) = body_error {
            Answer::Error(err.to_owned())
        } else if let Some(left) = early {
            // Whole seconds, rounded up, as Slack's Retry-After is.
            Answer::Limited(left.as_secs() + u64::from(left.subsec_nanos() > 0))
        } else if let Some((_, secs)) = limited {
            s.limited_until
                .insert(method.clone(), now + Duration::from_secs(secs));
            Answer::Limited(secs)
        } else {
            let mut broken = Vec::new();
            checks::check(&method, &parsed, index, &mut broken);
            if broken.is_empty() {
                handle(&mut s, &shared, &method, &parsed)
            } else {
                let answer = Answer::Invalid(broken.clone());
                violations.extend(broken);
                answer
            }
        }
    };
    {
        let mut s = shared.lock();
        s.violations.extend(violations);
    }
    shared.changed.notify_waiters();
    match answer {
        Answer::Ok(v) => {
            let mut v = v;
            v["ok"] = json!(true);
            axum::Json(v).into_response()
        }
        Answer::Error(e) => axum::Json(json!({ "ok": false, "error": e })).into_response(),
        // Slack's answer to arguments it refuses: which, in the metadata.
        Answer::Invalid(broken) => axum::Json(json!({
            "ok": false, "error": "invalid_arguments",
            "response_metadata": { "messages": broken },
        }))
        .into_response(),
        Answer::Limited(secs) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", secs.to_string())],
            axum::Json(json!({ "ok": false, "error": "ratelimited" })),
        )
            .into_response(),
    }
}

enum Answer {
    Ok(Value),
    Error(String),
    /// Arguments Slack refuses, one sentence each.
    Invalid(Vec<String>),
    Limited(u64),
}

fn str_field<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn handle(s: &mut Inner, shared: &Shared, method: &str, body: &Value) -> Answer {
    match method {
        "auth.test" => Answer::Ok(json!({
            "url": "https://fake.slack.com/", "team": "Fake", "user": "hearth",
            "team_id": TEAM, "user_id": BOT_USER, "bot_id": "BHEARTH",
        })),
        "apps.connections.open" => {
            let ticket = s.socket.issue_ticket();
            Answer::Ok(json!({ "url": format!("ws://{}/link/?ticket={ticket}", shared.ws_addr) }))
        }
        "chat.postMessage" => {
            let Some(channel) = str_field(body, "channel") else {
                return Answer::Error("channel_not_found".into());
            };
            s.next_ts += 1;
            let ts = format!("1800000000.{:06}", s.next_ts);
            s.messages.push(Posted {
                channel: channel.to_owned(),
                ts: ts.clone(),
                thread_ts: str_field(body, "thread_ts").map(str::to_owned),
                text: str_field(body, "text").unwrap_or_default().to_owned(),
                blocks: body.get("blocks").cloned().unwrap_or(Value::Null),
                deleted: false,
            });
            Answer::Ok(
                json!({ "channel": channel, "ts": ts, "message": { "text": body.get("text") } }),
            )
        }
        "chat.update" | "chat.delete" => {
            let (Some(channel), Some(ts)) = (str_field(body, "channel"), str_field(body, "ts"))
            else {
                return Answer::Error("message_not_found".into());
            };
            let Some(m) = s
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts && !m.deleted)
            else {
                return Answer::Error("message_not_found".into());
            };
            if method == "chat.delete" {
                m.deleted = true;
            } else {
                m.text = str_field(body, "text").unwrap_or_default().to_owned();
                m.blocks = body.get("blocks").cloned().unwrap_or(Value::Null);
            }
            Answer::Ok(json!({ "channel": channel, "ts": ts }))
        }
        "chat.postEphemeral" => Answer::Ok(json!({ "message_ts": "1800000000.999999" })),
        _ => Answer::Error("unknown_method".into()),
    }
}

/// A `response_url`: records the post like a call named `response_url`.
async fn respond(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let refused = {
        let mut s = shared.lock();
        let index = s.calls.len();
        let mut v = Vec::new();
        if parsed.is_null() {
            v.push(format!(
                "response_url post {index} ({id}): body is not JSON"
            ));
        } else {
            checks::check("response_url", &parsed, index, &mut v);
        }
        let refused = !v.is_empty();
        s.violations.extend(v);
        let mut body = parsed;
        if let Value::Object(m) = &mut body {
            m.insert("response_url_id".into(), json!(id));
        }
        s.calls.push(Call {
            method: "response_url".into(),
            body,
            at: Instant::now(),
        });
        refused
    };
    shared.changed.notify_waiters();
    if refused {
        // What a response_url answers a payload it cannot use.
        return (StatusCode::BAD_REQUEST, "invalid_payload").into_response();
    }
    StatusCode::OK.into_response()
}
