//! `FakeDiscord`: Discord's REST API and gateway on 127.0.0.1, written from
//! Discord's API reference, checking every request it receives.
//!
//! REST (`api_base()`, `/api/v10/...`): the bot token in `Authorization:
//! Bot <token>`; messages within 2000 characters with a valid `nonce`
//! (`enforce_nonce` answers a repeated nonce with the message already
//! created); components' `custom_id` within 100 characters; interaction
//! callbacks once per interaction with a known token; 429 with
//! `retry_after` and `X-RateLimit-*` headers on demand, and a post to a
//! channel before the `retry_after` of a 429 it was answered for that
//! channel has passed answered 429 again and counted a violation.
//!
//! Gateway (`gateway_url()`): HELLO, IDENTIFY checked (token, intents),
//! READY with `session_id` and `resume_gateway_url` (`/resume` on the same
//! server), heartbeat ACKs, dispatches pushed by the test (messages and
//! reactions only when the session's intents cover them), a connection
//! dropped on demand, then RESUME checked (URL, session id, sequence) and
//! the missed dispatches replayed before RESUMED. A session outlives its
//! connection (the bot killed or stopped): what is pushed meanwhile waits
//! for a RESUME. A RESUME of a session that ended (a newer IDENTIFY, or
//! [`FakeDiscord::invalidate_session`]) is answered op 9 `d: false`, as
//! Discord answers one it no longer keeps; of a session never issued, the
//! same and a violation. Heartbeats carry null or a sequence already sent.
//!
//! Broken expectations are collected in [`FakeDiscord::violations`].

mod gateway;
mod rest;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The GUILD_MESSAGES intent: messages in guilds.
pub const GUILD_MESSAGES: u64 = 1 << 9;
/// The GUILD_MESSAGE_REACTIONS intent: reactions in guilds.
pub const GUILD_MESSAGE_REACTIONS: u64 = 1 << 10;
/// The DIRECT_MESSAGES intent: messages in DMs.
pub const DIRECT_MESSAGES: u64 = 1 << 12;
/// The DIRECT_MESSAGE_REACTIONS intent: reactions in DMs.
pub const DIRECT_MESSAGE_REACTIONS: u64 = 1 << 13;
/// The intents hearth must identify with: GUILDS, GUILD_MESSAGES,
/// GUILD_MESSAGE_REACTIONS, DIRECT_MESSAGES, DIRECT_MESSAGE_REACTIONS,
/// MESSAGE_CONTENT.
pub const EXPECTED_INTENTS: u64 = 1
    | GUILD_MESSAGES
    | GUILD_MESSAGE_REACTIONS
    | DIRECT_MESSAGES
    | DIRECT_MESSAGE_REACTIONS
    | (1 << 15);

/// The intent without which a gateway does not send event `t` with data
/// `d` (for the events of the intents hearth uses that a test can push).
fn intent_of(t: &str, d: &Value) -> Option<u64> {
    let in_guild = d.get("guild_id").is_some_and(|g| !g.is_null());
    match t {
        "MESSAGE_CREATE" => Some(if in_guild {
            GUILD_MESSAGES
        } else {
            DIRECT_MESSAGES
        }),
        "MESSAGE_REACTION_ADD"
        | "MESSAGE_REACTION_REMOVE"
        | "MESSAGE_REACTION_REMOVE_ALL"
        | "MESSAGE_REACTION_REMOVE_EMOJI" => Some(if in_guild {
            GUILD_MESSAGE_REACTIONS
        } else {
            DIRECT_MESSAGE_REACTIONS
        }),
        _ => None,
    }
}
/// The bot's user id.
pub const BOT_ID: &str = "900000000000000001";
/// The bot's application id.
pub const APP_ID: &str = "900000000000000002";

/// A message the bot created.
#[derive(Debug, Clone, PartialEq)]
pub struct SentMessage {
    /// Its id.
    pub id: String,
    /// Where.
    pub channel_id: String,
    /// Its text.
    pub content: String,
    /// The nonce sent with it.
    pub nonce: Option<String>,
    /// Components (buttons), if any.
    pub components: Option<Value>,
}

/// What the gateway connection is told to do.
pub(crate) enum Ctl {
    /// Send this frame.
    Send(String),
    /// Drop the TCP connection without a close frame.
    Drop,
}

#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) violations: Vec<String>,
    /// How many violations the test has read: the rest fail it on drop.
    checked: usize,
    pub(crate) messages: Vec<SentMessage>,
    /// Every POST to a channel's messages, 429s included.
    pub(crate) message_posts: u32,
    pub(crate) edits: Vec<(String, String)>,
    pub(crate) deletes: Vec<String>,
    pub(crate) typing: u32,
    pub(crate) commands: Option<Value>,
    pub(crate) callbacks: Vec<(String, Value)>,
    pub(crate) original_edits: Vec<(String, Value)>,
    /// Retry-after seconds for the next message posts.
    pub(crate) rate_limits: VecDeque<f64>,
    /// Channels whose message posts were answered 429, until their
    /// `retry_after` ends: a post before then is a violation.
    pub(crate) limited_until: HashMap<String, std::time::Instant>,
    /// Message posts to create and then answer with 502, as if the answer
    /// were lost on the way back.
    pub(crate) lose_answers: u32,
    /// Channels the bot may not post in (403 Missing Access).
    pub(crate) forbidden: Vec<String>,
    /// The `permissions` bit set of members in interactions.
    pub(crate) member_permissions: Option<String>,
    /// Role ids of members by user id, in guild messages and interactions.
    pub(crate) member_roles: HashMap<String, Vec<String>>,
    /// Members of guilds, as `(guild id, user id)` (other bots, for the
    /// member lookups of app manifests).
    pub(crate) members: std::collections::HashSet<(String, String)>,
    /// `GET /guilds/{id}/members/{id}` calls.
    pub(crate) member_lookups: u32,
    pub(crate) next_id: u64,
    /// Interaction id -> (token, answered).
    pub(crate) interactions: HashMap<String, (String, bool)>,
    // The gateway.
    pub(crate) session_id: Option<String>,
    pub(crate) seq: u64,
    pub(crate) log: Vec<(u64, String)>,
    /// Dispatches pushed before any session: sent after READY.
    pub(crate) unsequenced: Vec<(String, Value)>,
    pub(crate) live: Option<mpsc::UnboundedSender<Ctl>>,
    pub(crate) identifies: u32,
    /// The intents the current session identified with.
    pub(crate) intents: u64,
    pub(crate) resumes: Vec<(String, u64)>,
    /// Sessions that can no longer be resumed.
    pub(crate) expired: Vec<String>,
    /// RESUMEs answered op 9 `d: false`: (session id, sequence).
    pub(crate) refused: Vec<(String, u64)>,
}

impl Inner {
    pub(crate) fn new_id(&mut self) -> String {
        self.next_id += 1;
        (800_000_000_000_000_000 + self.next_id).to_string()
    }

    /// Sequences a dispatch and sends it when a connection is live; its
    /// sequence number, or `None` when the session's intents do not cover
    /// it (a gateway never sends it then).
    pub(crate) fn dispatch(&mut self, t: &str, d: Value) -> Option<u64> {
        if intent_of(t, &d).is_some_and(|i| self.intents & i == 0) {
            return None;
        }
        self.seq += 1;
        let frame = json!({ "op": 0, "t": t, "s": self.seq, "d": d }).to_string();
        self.log.push((self.seq, frame.clone()));
        if let Some(tx) = &self.live {
            let _ = tx.send(Ctl::Send(frame));
        }
        Some(self.seq)
    }
}

pub(crate) struct Shared {
    pub(crate) token: String,
    pub(crate) gateway_addr: SocketAddr,
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

impl Shared {
    /// Runs `f` on the state and wakes waiters.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let out = f(&mut self.lock());
        self.changed.send_modify(|n| *n += 1);
        out
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn violation(&self, v: String) {
        self.with(|s| s.violations.push(v));
    }
}

/// A fake Discord; stops when dropped.
pub struct FakeDiscord {
    shared: Arc<Shared>,
    rest_addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        // A test that never looked at what hearth broke must not pass: the
        // request got Discord's error, which hearth may have retried or
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
            "FakeDiscord dropped with violations the test never read \
             (call violations() and assert on them): {unchecked:#?}"
        );
    }
}

/// How long the `wait_*` helpers wait before panicking.
const WAIT: Duration = Duration::from_secs(20);

impl FakeDiscord {
    /// Starts REST and gateway servers accepting the bot `token`.
    ///
    /// # Panics
    /// When it cannot bind 127.0.0.1 ports.
    pub async fn start(token: &str) -> Self {
        let rest = tokio::net::TcpListener::bind("127.0.0.1:0").await;
        let gw = tokio::net::TcpListener::bind("127.0.0.1:0").await;
        let (Ok(rest), Ok(gw)) = (rest, gw) else {
            panic!("cannot bind the fake Discord's ports");
        };
        let (Ok(rest_addr), Ok(gateway_addr)) = (rest.local_addr(), gw.local_addr()) else {
            panic!("no local address");
        };
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            gateway_addr,
            inner: Mutex::default(),
            changed: watch::Sender::new(0),
        });
        let router = rest::router(shared.clone());
        let tasks = vec![
            tokio::spawn(async move {
                let _ = axum::serve(rest, router).await;
            }),
            tokio::spawn(gateway::accept(gw, shared.clone())),
        ];
        Self {
            shared,
            rest_addr,
            tasks,
        }
    }

    /// `http://127.0.0.1:<port>/api/v10`.
    pub fn api_base(&self) -> String {
        format!("http://{}/api/v10", self.rest_addr)
    }

    /// `ws://127.0.0.1:<port>`.
    pub fn gateway_url(&self) -> String {
        format!("ws://{}", self.shared.gateway_addr)
    }

    /// Pushes a dispatch (`t`, `d`) to the bot; its sequence number. Sent
    /// at once when a connection is live, replayed on RESUME otherwise;
    /// `None` when held until the first READY, or never sent because the
    /// session's intents do not cover it.
    pub fn dispatch(&self, t: &str, d: Value) -> Option<u64> {
        self.shared.with(|s| {
            if s.session_id.is_none() {
                s.unsequenced.push((t.to_owned(), d));
                None
            } else {
                s.dispatch(t, d)
            }
        })
    }

    /// Pushes a `MESSAGE_REACTION_ADD`: `user` reacting with the Unicode
    /// `emoji` to message `message` in `channel` (a DM when `guild` is
    /// `None`). Its sequence number, as [`FakeDiscord::dispatch`]: only
    /// sent when the bot asked for the guild or DM reaction intent.
    pub fn reaction(
        &self,
        channel: &str,
        guild: Option<&str>,
        message: &str,
        user: &str,
        emoji: &str,
    ) -> Option<u64> {
        let author = self.shared.lock().messages.iter().any(|m| m.id == message);
        let mut d = json!({
            "user_id": user, "channel_id": channel, "message_id": message,
            "emoji": { "id": null, "name": emoji }, "burst": false, "type": 0,
        });
        if author {
            d["message_author_id"] = json!(BOT_ID);
        }
        if let Some(g) = guild {
            d["guild_id"] = json!(g);
            let who =
                json!({ "id": user, "username": format!("user{user}"), "bot": user == BOT_ID });
            d["member"] = json!({ "user": who, "roles": self.roles_of(user) });
        }
        self.dispatch("MESSAGE_REACTION_ADD", d)
    }

    /// Pushes a `MESSAGE_CREATE` from user `author` in `channel` (a DM
    /// when `guild` is `None`); the message's id.
    pub fn message(
        &self,
        channel: &str,
        guild: Option<&str>,
        author: &str,
        bot: bool,
        content: &str,
    ) -> String {
        let id = self.shared.with(Inner::new_id);
        let mentions: Vec<Value> = if content.contains(&format!("<@{BOT_ID}>")) {
            vec![json!({ "id": BOT_ID, "username": "hearth", "bot": true })]
        } else {
            Vec::new()
        };
        let mut d = json!({
            "id": id, "channel_id": channel, "type": 0, "content": content,
            "author": { "id": author, "username": format!("user{author}"), "bot": bot },
            "mentions": mentions, "timestamp": "2026-11-23T18:00:00.000000+00:00",
        });
        if let Some(g) = guild {
            d["guild_id"] = json!(g);
            d["member"] = json!({ "roles": self.roles_of(author) });
        }
        self.dispatch("MESSAGE_CREATE", d);
        id
    }

    /// Sends message `id`'s `MESSAGE_CREATE` again, as a gateway does that
    /// replays a session from a sequence the bot had already seen; the new
    /// sequence number, or `None` when no such message was dispatched.
    pub fn redeliver_message(&self, id: &str) -> Option<u64> {
        self.shared.with(|s| {
            let d = s.log.iter().find_map(|(_, frame)| {
                let v: Value = serde_json::from_str(frame).ok()?;
                (v["t"] == "MESSAGE_CREATE" && v["d"]["id"] == id).then(|| v["d"].clone())
            })?;
            s.dispatch("MESSAGE_CREATE", d)
        })
    }

    /// Pushes an `INTERACTION_CREATE` of `kind` (2 command, 3 component)
    /// by `user` in `channel` (a guild's when `guild` is given) with
    /// `data`; its id.
    pub fn interaction(
        &self,
        kind: u8,
        channel: &str,
        guild: Option<&str>,
        user: &str,
        data: Value,
        message: Option<Value>,
    ) -> String {
        let (id, token) = self.shared.with(|s| {
            let id = s.new_id();
            let token = format!("tok-{id}");
            s.interactions.insert(id.clone(), (token.clone(), false));
            (id, token)
        });
        let who = json!({ "id": user, "username": format!("user{user}") });
        let mut d = json!({
            "id": id, "application_id": APP_ID, "type": kind, "token": token, "version": 1,
            "channel_id": channel, "data": data,
        });
        match guild {
            Some(g) => {
                d["guild_id"] = json!(g);
                let perms = self
                    .shared
                    .lock()
                    .member_permissions
                    .clone()
                    .unwrap_or_else(|| "0".into());
                let roles = self.roles_of(user);
                d["member"] = json!({ "user": who, "roles": roles, "permissions": perms });
            }
            None => d["user"] = who,
        }
        if let Some(m) = message {
            d["message"] = m;
        }
        self.dispatch("INTERACTION_CREATE", d);
        id
    }

    /// Sends a raw text frame on the live connection (a malformed payload).
    pub fn send_raw(&self, text: &str) {
        self.shared.with(|s| {
            if let Some(tx) = &s.live {
                let _ = tx.send(Ctl::Send(text.to_owned()));
            }
        });
    }

    /// Ends the current session as Discord does one past its resume window:
    /// a RESUME of it is answered op 9 `d: false`, and what is pushed next
    /// waits for a new session's READY. The live connection, if any, is
    /// dropped.
    pub fn invalidate_session(&self) {
        self.shared.with(|s| {
            if let Some(old) = s.session_id.take() {
                s.expired.push(old);
            }
            s.seq = 0;
            s.log.clear();
            if let Some(tx) = s.live.take() {
                let _ = tx.send(Ctl::Drop);
            }
        });
    }

    /// The current session's id (READY's `session_id`), if any.
    pub fn session_id(&self) -> Option<String> {
        self.shared.lock().session_id.clone()
    }

    /// The last sequence number sent in the current session.
    pub fn last_seq(&self) -> u64 {
        self.shared.lock().seq
    }

    /// True while a connection is identified or resumed.
    pub fn connected(&self) -> bool {
        self.shared.lock().live.is_some()
    }

    /// Waits until no connection is live (the bot died or was stopped).
    pub async fn wait_disconnected(&self) {
        self.wait_for("the connection to end", |s| s.live.is_none().then_some(()))
            .await;
    }

    /// RESUMEs answered op 9 `d: false`: (session id, sequence).
    pub fn refused_resumes(&self) -> Vec<(String, u64)> {
        self.shared.lock().refused.clone()
    }

    /// RESUMEs accepted: (session id, sequence).
    pub fn resumes(&self) -> Vec<(String, u64)> {
        self.shared.lock().resumes.clone()
    }

    /// Drops the live connection without a close frame.
    pub fn drop_connection(&self) {
        self.shared.with(|s| {
            if let Some(tx) = s.live.take() {
                let _ = tx.send(Ctl::Drop);
            }
        });
    }

    /// Answers the next `n` message posts with 429 and `retry_after` secs.
    pub fn rate_limit_messages(&self, n: usize, retry_after: f64) {
        self.shared
            .with(|s| s.rate_limits.extend(std::iter::repeat_n(retry_after, n)));
    }

    /// Creates the next `n` posted messages but answers 502, as when the
    /// answer is lost on the way back: a retry must not post them twice.
    pub fn lose_answers(&self, n: u32) {
        self.shared.with(|s| s.lose_answers += n);
    }

    /// The permission bit set (decimal) members have in later interactions
    /// (`"8"`: Administrator).
    pub fn set_member_permissions(&self, perms: &str) {
        self.shared
            .with(|s| s.member_permissions = Some(perms.to_owned()));
    }

    /// The role ids `user` has as a member in later guild events.
    pub fn set_member_roles(&self, user: &str, roles: &[&str]) {
        let roles = roles.iter().map(|r| (*r).to_owned()).collect();
        self.shared
            .with(|s| s.member_roles.insert(user.to_owned(), roles));
    }

    fn roles_of(&self, user: &str) -> Vec<String> {
        self.shared
            .lock()
            .member_roles
            .get(user)
            .cloned()
            .unwrap_or_default()
    }

    /// Makes `user` (another bot) a member of `guild`.
    pub fn add_member(&self, guild: &str, user: &str) {
        self.shared
            .with(|s| s.members.insert((guild.to_owned(), user.to_owned())));
    }

    /// How many member lookups hearth made.
    pub fn member_lookups(&self) -> u32 {
        self.shared.lock().member_lookups
    }

    /// Answers posts to `channel` with 403 Missing Access.
    pub fn forbid(&self, channel: &str) {
        self.shared.with(|s| s.forbidden.push(channel.to_owned()));
    }

    /// Waits until `cond` holds on the state.
    async fn wait_for<T>(&self, what: &str, cond: impl Fn(&Inner) -> Option<T>) -> T {
        let mut rx = self.shared.changed.subscribe();
        let wait = async {
            loop {
                if let Some(v) = cond(&self.shared.lock()) {
                    return v;
                }
                if rx.changed().await.is_err() {
                    panic!("fake Discord stopped");
                }
            }
        };
        match tokio::time::timeout(WAIT, wait).await {
            Ok(v) => v,
            Err(_) => panic!(
                "fake Discord: timed out waiting for {what}; violations: {:?}",
                self.violations()
            ),
        }
    }

    /// Waits until the bot has identified `n` times and is connected.
    pub async fn wait_ready(&self, n: u32) {
        self.wait_for("READY", |s| {
            (s.identifies >= n && s.live.is_some()).then_some(())
        })
        .await;
    }

    /// Waits for the `n`th RESUME; the (session id, sequence) it sent.
    pub async fn wait_resumed(&self, n: usize) -> (String, u64) {
        self.wait_for("RESUME", |s| {
            (s.live.is_some())
                .then(|| s.resumes.get(n - 1).cloned())
                .flatten()
        })
        .await
    }

    /// Waits until at least `n` messages were created; all of them.
    pub async fn wait_messages(&self, n: usize) -> Vec<SentMessage> {
        self.wait_for("messages", |s| {
            (s.messages.len() >= n).then(|| s.messages.clone())
        })
        .await
    }

    /// Waits until the bot posted a message whose content is `content`.
    pub async fn wait_message(&self, content: &str) -> SentMessage {
        self.wait_for(&format!("a message {content:?}"), |s| {
            s.messages.iter().find(|m| m.content == content).cloned()
        })
        .await
    }

    /// Waits until the bot posted a message `f` accepts (`what` names it
    /// in the panic); the first such message.
    pub async fn wait_message_where(
        &self,
        what: &str,
        f: impl Fn(&SentMessage) -> bool,
    ) -> SentMessage {
        self.wait_for(what, |s| s.messages.iter().find(|m| f(m)).cloned())
            .await
    }

    /// Waits until at least `n` interaction callbacks were received.
    pub async fn wait_callbacks(&self, n: usize) -> Vec<(String, Value)> {
        self.wait_for("interaction callbacks", |s| {
            (s.callbacks.len() >= n).then(|| s.callbacks.clone())
        })
        .await
    }

    /// Waits until the commands were registered; their definitions.
    pub async fn wait_commands(&self) -> Value {
        self.wait_for("command registration", |s| s.commands.clone())
            .await
    }

    /// Waits until at least `n` message posts were received.
    pub async fn wait_posts(&self, n: u32) {
        self.wait_for("message posts", |s| (s.message_posts >= n).then_some(()))
            .await;
    }

    /// Waits until at least `n` messages were deleted; their ids.
    pub async fn wait_deleted(&self, n: usize) -> Vec<String> {
        self.wait_for("deletions", |s| {
            (s.deletes.len() >= n).then(|| s.deletes.clone())
        })
        .await
    }

    /// Messages created so far (deleted ones left out).
    pub fn messages(&self) -> Vec<SentMessage> {
        self.shared.lock().messages.clone()
    }

    /// POSTs to channel messages so far, answered with 429 or not.
    pub fn message_posts(&self) -> u32 {
        self.shared.lock().message_posts
    }

    /// Edits of `@original` interaction responses: (token, body).
    pub fn original_edits(&self) -> Vec<(String, Value)> {
        self.shared.lock().original_edits.clone()
    }

    /// Typing indicators triggered.
    pub fn typing(&self) -> u32 {
        self.shared.lock().typing
    }

    /// IDENTIFYs received.
    pub fn identifies(&self) -> u32 {
        self.shared.lock().identifies
    }

    /// Broken expectations, one sentence each. A request that broke
    /// Discord's rules got Discord's own error (400 `Invalid Form Body`, 401,
    /// 404, or a gateway close code), not a success. Reading them marks them
    /// checked: a fake dropped with violations never read fails the test.
    pub fn violations(&self) -> Vec<String> {
        let mut s = self.shared.lock();
        s.checked = s.violations.len();
        s.violations.clone()
    }
}
