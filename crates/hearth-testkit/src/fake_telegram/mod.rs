//! `FakeTelegram`: a fake Telegram Bot API server, written from the Bot API
//! reference, that checks every request it receives and answers the way
//! Telegram does (`{"ok":true,"result":…}`, or `{"ok":false,"error_code",
//! "description","parameters"}` with Telegram's wording).
//!
//! Requests go to `{url}/bot<token>/<method>` (POST with a JSON body, or GET
//! with a query). It keeps the chats as users would see them: messages
//! after edits and deletions, with their buttons. Tests push updates
//! (builders for private and group messages, button presses and
//! reactions; `message_reaction` only reaches a bot that asked for it in
//! `allowed_updates`, as on Telegram), inject failures (429 with
//! `retry_after`, 5xx, any error) or make the server unreachable, and wait
//! on conditions over the state without sleeping.
//! Every request Telegram would refuse is counted in
//! [`FakeTelegram::rejections`], so a test can assert there was none; so is
//! a request to a chat before the `retry_after` of a 429 it was answered
//! for that chat has passed (answered 429 again, as Telegram's flood
//! control does).

mod api;
mod html;
mod net;
mod script;
mod updates;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub use html::{Entity, Parsed, parse_html};
pub use script::Matching;
pub use updates::User;

use api::ApiError;
use net::{Connections, GatedListener};

/// The bot's user id when the token does not start with one.
const DEFAULT_BOT_ID: i64 = 7_000_000_001;
/// The bot's @username.
pub const BOT_USERNAME: &str = "hearth_test_bot";

/// A failure injected in place of the next matching answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// An HTTP error status (500, 502, …) with Telegram's JSON error body.
    Status(u16),
    /// 429 `Too Many Requests: retry after N`, `parameters.retry_after = N`.
    TooManyRequests {
        /// Seconds to wait, as Telegram sends it.
        retry_after: u64,
    },
    /// Any other error, e.g. 403 `Forbidden: bot was blocked by the user`.
    Error {
        /// The HTTP status and `error_code`.
        code: u16,
        /// The `description`.
        description: String,
    },
}

/// One inline keyboard button, as the chat shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    /// The label.
    pub text: String,
    /// What pressing it sends back in a callback query.
    pub callback_data: Option<String>,
    /// The URL it opens.
    pub url: Option<String>,
}

/// A message in a chat, as its members would see it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// The chat.
    pub chat_id: i64,
    /// The message id, unique in its chat.
    pub message_id: i64,
    /// True for messages the bot sent.
    pub from_bot: bool,
    /// The visible text, after entity parsing and the last edit.
    pub text: String,
    /// The formatting, from the HTML that was sent.
    pub entities: Vec<Entity>,
    /// The inline keyboard, row by row (empty when none).
    pub buttons: Vec<Vec<Button>>,
    /// The message this one replies to.
    pub reply_to: Option<i64>,
    /// How many times it was edited.
    pub edits: usize,
    /// Deleted messages stay listed, marked.
    pub deleted: bool,
}

/// One request received, with how it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiRequest {
    /// The method, as named in the URL.
    pub method: String,
    /// The parameters: the query merged with the JSON body.
    pub body: Value,
    /// The HTTP status answered.
    pub status: u16,
    /// The error description answered, if any.
    pub error: Option<String>,
    /// The bot token in the URL.
    pub token: String,
    /// When it was answered.
    pub at: std::time::Instant,
}

/// An `answerCallbackQuery` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackAnswer {
    /// The query answered.
    pub query_id: String,
    /// The notification text.
    pub text: Option<String>,
    /// An alert rather than a toast.
    pub show_alert: bool,
}

/// The simulated Telegram: chats, updates, and what the bot did. Tests read
/// it through [`FakeTelegram::wait_for`] and the accessors.
#[derive(Debug, Default)]
pub struct TelegramState {
    bot: Value,
    chats: HashMap<i64, Value>,
    messages: Vec<ChatMessage>,
    index: HashMap<(i64, i64), usize>,
    next_message_id: HashMap<i64, i64>,
    updates: VecDeque<Value>,
    next_update_id: i64,
    /// Updates below this id are confirmed and never returned again.
    confirmed: i64,
    allowed_updates: Option<Vec<String>>,
    /// Bumped by each getUpdates: an older poll still waiting is terminated.
    poll_generation: u64,
    webhook: Option<String>,
    commands: Vec<(String, String)>,
    chat_actions: Vec<(i64, String)>,
    /// Callback query ids pressed, and whether they were answered.
    queries: HashMap<String, bool>,
    next_query: u64,
    callback_answers: Vec<CallbackAnswer>,
    failures: VecDeque<(Matching, Failure)>,
    holds: Vec<script::HoldRule>,
    /// Calls held so far, released or not.
    held: usize,
    /// Bumped by each release: calls held before it go on.
    release_generation: u64,
    requests: Vec<ApiRequest>,
    /// Chats answered 429, until their `retry_after` ends: a request to
    /// one before then is refused (429 again) and counted a rejection.
    limited_until: HashMap<i64, Instant>,
    rejections: Vec<String>,
    /// How many rejections the test has read: the rest fail it on drop.
    rejections_read: AtomicUsize,
}

impl TelegramState {
    /// The bot's messages, in the order they were sent.
    pub fn sent(&self) -> Vec<&ChatMessage> {
        self.messages.iter().filter(|m| m.from_bot).collect()
    }

    /// The bot's visible (not deleted) messages in one chat.
    pub fn visible_in(&self, chat_id: i64) -> Vec<&ChatMessage> {
        self.messages
            .iter()
            .filter(|m| m.from_bot && !m.deleted && m.chat_id == chat_id)
            .collect()
    }

    /// Every request received, in the order they were answered.
    pub fn requests(&self) -> &[ApiRequest] {
        &self.requests
    }

    /// How many requests called `method`.
    pub fn calls(&self, method: &str) -> usize {
        self.requests
            .iter()
            .filter(|r| r.method.eq_ignore_ascii_case(method))
            .count()
    }

    /// Requests Telegram would have refused, one line each (`method: code
    /// description`); injected failures are not counted. Reading them marks
    /// them checked: a fake dropped with rejections never read fails the test.
    pub fn rejections(&self) -> &[String] {
        self.rejections_read
            .store(self.rejections.len(), Ordering::SeqCst);
        &self.rejections
    }

    /// The rejections no test has read yet.
    fn unread_rejections(&self) -> &[String] {
        let read = self.rejections_read.load(Ordering::SeqCst);
        &self.rejections[read.min(self.rejections.len())..]
    }

    /// Calls held so far (see [`FakeTelegram::hold`]), released or not.
    pub fn held(&self) -> usize {
        self.held
    }

    /// `sendChatAction` calls: chat and action.
    pub fn chat_actions(&self) -> &[(i64, String)] {
        &self.chat_actions
    }

    /// `answerCallbackQuery` calls.
    pub fn callback_answers(&self) -> &[CallbackAnswer] {
        &self.callback_answers
    }

    /// The commands of the last `setMyCommands`.
    pub fn commands(&self) -> &[(String, String)] {
        &self.commands
    }

    /// The webhook URL set, if any.
    pub fn webhook(&self) -> Option<&str> {
        self.webhook.as_deref()
    }

    /// Updates not yet confirmed by an offset.
    pub fn pending_updates(&self) -> usize {
        let confirmed = self.confirmed;
        self.updates
            .iter()
            .filter(|u| update_id(u) >= confirmed)
            .count()
    }
}

fn update_id(update: &Value) -> i64 {
    update.get("update_id").and_then(Value::as_i64).unwrap_or(0)
}

/// What the handlers share with the handle.
struct Shared {
    token: String,
    /// Tokens accepted beside `token` (the same bot's new token, after a
    /// rotation).
    more_tokens: Mutex<Vec<String>>,
    state: Mutex<TelegramState>,
    /// Any change of state, for [`FakeTelegram::wait_for`].
    changed: Notify,
    /// New updates or a newer poll, for waiting getUpdates calls.
    polls: Notify,
    /// Held calls may go on.
    released: Notify,
    unreachable: AtomicBool,
    connections: Connections,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, TelegramState> {
        // A test that panicked while holding the lock leaves a usable state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fake Telegram Bot API server on 127.0.0.1; stops when dropped.
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.connections.close_all();
        // A test that never looked at the requests Telegram refused must not
        // pass: hearth got an error it may have swallowed on the way to a
        // green assertion.
        if std::thread::panicking() {
            return;
        }
        let unread = self.shared.lock().unread_rejections().to_vec();
        assert!(
            unread.is_empty(),
            "FakeTelegram dropped with rejected requests the test never read \
             (call rejections() and assert on them): {unread:#?}"
        );
    }
}

impl fmt::Debug for FakeTelegram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeTelegram")
            .field("addr", &self.addr)
            .field("requests", &self.shared.lock().requests.len())
            .finish()
    }
}

impl FakeTelegram {
    /// Starts on 127.0.0.1 with an OS-chosen port, for the bot `token`.
    ///
    /// # Panics
    /// When no local port can be bound: the test environment is broken and
    /// no test using the fake can run.
    #[expect(
        clippy::expect_used,
        reason = "a test fixture that cannot bind loopback cannot run; see Panics"
    )]
    pub async fn start(token: &str) -> Self {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)), token)
            .await
            .expect("bind the fake Telegram server on 127.0.0.1:0")
    }

    /// Accepts `token` too, for the same bot (a token rotated at
    /// BotFather: the old one keeps working here, so a test sees which
    /// one hearth uses in [`ApiRequest::token`]).
    pub fn accept_token(&self, token: &str) {
        self.shared
            .more_tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(token.to_owned());
    }

    /// Starts on `addr` for the bot `token`.
    pub async fn bind(addr: SocketAddr, token: &str) -> io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let bot_id = token
            .split(':')
            .next()
            .and_then(|id| id.parse().ok())
            .unwrap_or(DEFAULT_BOT_ID);
        let state = TelegramState {
            bot: json!({
                "id": bot_id, "is_bot": true, "first_name": "Hearth Test",
                "username": BOT_USERNAME, "can_join_groups": true,
                "can_read_all_group_messages": false, "supports_inline_queries": false,
            }),
            next_update_id: 100_001,
            ..TelegramState::default()
        };
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            more_tokens: Mutex::new(Vec::new()),
            state: Mutex::new(state),
            changed: Notify::new(),
            polls: Notify::new(),
            released: Notify::new(),
            unreachable: AtomicBool::new(false),
            connections: Connections::default(),
        });
        let app = Router::new()
            .route("/{bot}/{method}", any(handle))
            .fallback(not_found)
            .with_state(Arc::clone(&shared));
        let listener = GatedListener::new(listener, Arc::clone(&shared));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared, task })
    }

    /// The socket address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`: the `api_base` to configure (requests go to
    /// `{url}/bot<token>/<method>`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bot's user id (from the token, as Telegram's tokens start with it).
    pub fn bot_id(&self) -> i64 {
        self.shared.lock().bot["id"]
            .as_i64()
            .unwrap_or(DEFAULT_BOT_ID)
    }

    /// Queues an update for getUpdates; an `update_id` is assigned when the
    /// update has none. Returns the update id.
    pub fn push_update(&self, mut update: Value) -> i64 {
        let id = {
            let mut st = self.shared.lock();
            let id = match update.get("update_id").and_then(Value::as_i64) {
                Some(id) => id,
                None => {
                    let id = st.next_update_id;
                    if let Some(obj) = update.as_object_mut() {
                        obj.insert("update_id".into(), json!(id));
                    }
                    id
                }
            };
            st.next_update_id = st.next_update_id.max(id + 1);
            st.updates.push_back(update);
            id
        };
        self.shared.polls.notify_waiters();
        self.shared.changed.notify_waiters();
        id
    }

    /// Makes a chat known, so the bot can write to it before anyone wrote
    /// from it (Telegram answers "chat not found" otherwise).
    pub fn add_chat(&self, chat_id: i64) {
        let chat = if chat_id > 0 {
            User::new(chat_id).private_chat()
        } else {
            updates::group_chat(chat_id)
        };
        self.shared.lock().chats.insert(chat_id, chat);
    }

    /// Answers the next `n` requests (any method) with `failure`.
    pub fn fail_next(&self, n: usize, failure: Failure) {
        let mut st = self.shared.lock();
        st.failures
            .extend(std::iter::repeat_n((Matching::default(), failure), n));
    }

    /// Answers the next `n` calls of `method` with `failure`.
    pub fn fail_method(&self, method: &str, n: usize, failure: Failure) {
        let mut st = self.shared.lock();
        let entry = (Matching::method(method), failure);
        st.failures.extend(std::iter::repeat_n(entry, n));
    }

    /// While true, the platform is down: every connection, open or new, is
    /// closed without an answer. New connections are accepted and closed
    /// rather than refused, because refusing means releasing the port, which
    /// another process could take before it is bound again.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.shared.unreachable.store(unreachable, Ordering::SeqCst);
        if unreachable {
            self.shared.connections.close_all();
        }
    }

    /// The bot's messages, as the chats show them now.
    pub fn sent(&self) -> Vec<ChatMessage> {
        self.shared.lock().sent().into_iter().cloned().collect()
    }

    /// Every request received, in the order they were answered.
    pub fn requests(&self) -> Vec<ApiRequest> {
        self.shared.lock().requests.clone()
    }

    /// Requests Telegram would have refused (see [`TelegramState::rejections`]).
    pub fn rejections(&self) -> Vec<String> {
        self.shared.lock().rejections().to_vec()
    }

    /// Reads the state under its lock.
    pub fn with_state<T>(&self, read: impl FnOnce(&TelegramState) -> T) -> T {
        read(&self.shared.lock())
    }

    /// Waits until `condition` holds over the state, re-checking after each
    /// change; false when `timeout` passes first.
    pub async fn wait_for(
        &self,
        condition: impl Fn(&TelegramState) -> bool,
        timeout: Duration,
    ) -> bool {
        let wait = async {
            loop {
                let notified = self.shared.changed.notified();
                let mut notified = std::pin::pin!(notified);
                // Registered before the check, so no change slips between.
                notified.as_mut().enable();
                if condition(&self.shared.lock()) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}

/// One Bot API call: `/{bot<token>}/{method}`.
async fn handle(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    uri: Uri,
    body: Bytes,
) -> Response {
    if shared.unreachable.load(Ordering::SeqCst) {
        // A request on a connection opened just before: it gets no answer.
        shared.connections.close_all();
        return StatusCode::BAD_GATEWAY.into_response();
    }
    let params = params(&uri, &body);
    let token = bot.strip_prefix("bot").unwrap_or_default().to_owned();
    let known = token == shared.token
        || shared
            .more_tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&token);
    let outcome = if !known {
        Err(Outcome::Rejected(ApiError::new(401, "Unauthorized")))
    } else {
        match (&params, api::canonical(&method)) {
            (_, None) => Err(Outcome::Rejected(ApiError::new(404, "Not Found"))),
            (Err(e), Some(_)) => Err(Outcome::Rejected(e.clone())),
            (Ok(params), Some(name)) => call(&shared, name, params).await,
        }
    };
    let body = params
        .map(Value::Object)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    respond(&shared, method, token, body, outcome)
}

/// Runs one method, unless a failure was injected for it.
async fn call(
    shared: &Shared,
    method: &'static str,
    params: &Map<String, Value>,
) -> Result<Value, Outcome> {
    script::hold_if_matching(shared, method, params).await;
    let chat = chat_of(params);
    let injected = {
        let mut st = shared.lock();
        let now = Instant::now();
        // Telegram's flood control: a chat told to wait gets 429 again,
        // for what is left, until the wait is over.
        let early = chat
            .and_then(|c| st.limited_until.get(&c))
            .filter(|until| **until > now)
            .map(|until| *until - now);
        if let Some(left) = early {
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            let mut refused = ApiError::from(Failure::TooManyRequests { retry_after: secs });
            refused.description = format!(
                "{} (sent {left:?} before the retry_after of an earlier 429 ended)",
                refused.description
            );
            return Err(Outcome::Rejected(refused));
        }
        let pos = st
            .failures
            .iter()
            .position(|(m, _)| m.matches(method, params));
        let failure = pos.and_then(|p| st.failures.remove(p)).map(|(_, f)| f);
        if let (Some(Failure::TooManyRequests { retry_after }), Some(chat)) = (&failure, chat) {
            st.limited_until
                .insert(chat, now + Duration::from_secs(*retry_after));
        }
        failure
    };
    if let Some(failure) = injected {
        return Err(Outcome::Injected(ApiError::from(failure)));
    }
    let result = if method == "getUpdates" {
        api::get_updates(shared, params).await
    } else {
        api::call(&mut shared.lock(), method, params)
    };
    if matches!(method, "setWebhook" | "deleteWebhook") {
        // A poll waiting while a webhook is set ends with a conflict.
        shared.polls.notify_waiters();
    }
    result.map_err(Outcome::Rejected)
}

/// The numeric chat a request is about, if any.
fn chat_of(params: &Map<String, Value>) -> Option<i64> {
    match params.get("chat_id")? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Why a call was not answered with a result.
enum Outcome {
    /// Telegram would have refused the request: counted as a rejection.
    Rejected(ApiError),
    /// A failure the test injected.
    Injected(ApiError),
}

/// The query merged with the JSON body (the body wins).
fn params(uri: &Uri, body: &Bytes) -> Result<Map<String, Value>, ApiError> {
    let query = Query::<HashMap<String, String>>::try_from_uri(uri)
        .map_err(|e| ApiError::bad_request(&format!("can't parse query: {e}")))?;
    let mut params: Map<String, Value> = query
        .0
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    if !body.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(obj)) => params.extend(obj),
            // Telegram also reads forms; hearth sends JSON, and the fake
            // reads nothing else.
            _ => return Err(ApiError::bad_request("request body is not a JSON object")),
        }
    }
    Ok(params)
}

fn respond(
    shared: &Shared,
    method: String,
    token: String,
    body: Value,
    outcome: Result<Value, Outcome>,
) -> Response {
    let (status, answer, error) = match outcome {
        Ok(result) => (200, json!({"ok": true, "result": result}), None),
        Err(Outcome::Rejected(e)) => {
            let line = format!("{method}: {} {}", e.code, e.description);
            shared.lock().rejections.push(line);
            (e.code, e.body(), Some(e.description))
        }
        Err(Outcome::Injected(e)) => (e.code, e.body(), Some(e.description)),
    };
    shared.lock().requests.push(ApiRequest {
        method,
        body,
        status,
        error,
        token,
        at: std::time::Instant::now(),
    });
    shared.changed.notify_waiters();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(answer)).into_response()
}

async fn not_found() -> Response {
    let body = json!({"ok": false, "error_code": 404, "description": "Not Found"});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

#[cfg(test)]
pub(crate) mod tests;
