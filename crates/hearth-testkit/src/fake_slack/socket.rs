//! The fake's Socket Mode server: connections opened with a ticket from
//! `apps.connections.open`, `hello` first, envelopes pushed by the test,
//! acknowledgements checked (known `envelope_id`, within 3 s, once), and
//! unacknowledged envelopes redelivered with a higher `retry_attempt` when
//! the client connects again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_websockets::{Message, ServerBuilder};

use super::{FakeSlack, Inner, Shared, TEAM};

/// Slack wants acknowledgements within this.
const ACK_WITHIN: Duration = Duration::from_secs(3);

/// What the test asks of the open connection.
enum Command {
    /// Send this text frame.
    Send(String),
    /// Close the TCP connection without a close frame.
    Drop,
}

struct Envelope {
    kind: String,
    payload: Value,
    retry_attempt: u32,
    /// When it was last sent (none: waiting for a connection).
    sent_at: Option<Instant>,
}

/// The Socket Mode side of the fake's state.
#[derive(Default)]
pub(crate) struct SocketState {
    tickets_issued: u64,
    tickets_used: Vec<u64>,
    connections: usize,
    next_envelope: u64,
    unacked: BTreeMap<String, Envelope>,
    acked: Vec<String>,
    current: Option<mpsc::UnboundedSender<Command>>,
}

impl SocketState {
    pub(crate) fn issue_ticket(&mut self) -> u64 {
        self.tickets_issued += 1;
        self.tickets_issued
    }

    fn frame(id: &str, e: &Envelope) -> String {
        json!({
            "envelope_id": id,
            "type": e.kind,
            "payload": e.payload,
            "accepts_response_payload": e.kind != "events_api",
            "retry_attempt": e.retry_attempt,
            "retry_reason": if e.retry_attempt > 0 { "timeout" } else { "" },
        })
        .to_string()
    }

    /// Sends everything unacknowledged on the current connection, marking
    /// redeliveries.
    fn flush(&mut self) {
        let Some(tx) = self.current.clone() else {
            return;
        };
        let now = Instant::now();
        for (id, e) in &mut self.unacked {
            if e.sent_at.is_some() {
                e.retry_attempt += 1;
            }
            e.sent_at = Some(now);
            let _ = tx.send(Command::Send(Self::frame(id, e)));
        }
    }
}

pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((tcp, _)) = listener.accept().await {
        tokio::spawn(connection(tcp, shared.clone()));
    }
}

async fn connection(tcp: tokio::net::TcpStream, shared: Arc<Shared>) {
    let (req, mut ws) = match ServerBuilder::new().accept(tcp).await {
        Ok(x) => x,
        Err(e) => {
            shared.violation(format!("a Socket Mode handshake failed: {e}"));
            return;
        }
    };
    let ticket = req
        .uri()
        .query()
        .and_then(|q| q.strip_prefix("ticket="))
        .and_then(|t| t.parse::<u64>().ok());
    let (tx, mut rx) = mpsc::unbounded_channel();
    {
        let mut s = shared.lock();
        let ok = ticket
            .is_some_and(|t| t <= s.socket.tickets_issued && !s.socket.tickets_used.contains(&t));
        if !ok {
            s.violations.push(format!(
                "a WebSocket was opened with {:?}, not a fresh URL from apps.connections.open",
                req.uri()
            ));
        }
        if let Some(t) = ticket {
            s.socket.tickets_used.push(t);
        }
        s.socket.connections += 1;
        let hello = json!({
            "type": "hello", "num_connections": 1,
            "debug_info": { "host": "fake-slack", "approximate_connection_time": 18060 },
            "connection_info": { "app_id": "AFAKE" },
        });
        let _ = tx.send(Command::Send(hello.to_string()));
        s.socket.current = Some(tx.clone());
        s.socket.flush();
    }
    shared.changed.notify_waiters();
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Command::Send(text)) => {
                    if ws.send(Message::text(text)).await.is_err() {
                        break;
                    }
                }
                Some(Command::Drop) | None => break,
            },
            frame = ws.next() => match frame {
                Some(Ok(msg)) => {
                    if let Some(text) = msg.as_text() {
                        on_ack(&shared, text);
                    } else if msg.is_close() {
                        break;
                    }
                }
                Some(Err(_)) | None => break,
            },
        }
    }
    {
        let mut s = shared.lock();
        if s.socket
            .current
            .as_ref()
            .is_some_and(|c| c.same_channel(&tx))
        {
            s.socket.current = None;
        }
    }
    shared.changed.notify_waiters();
}

fn on_ack(shared: &Shared, text: &str) {
    let mut s = shared.lock();
    let id = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("envelope_id")?.as_str().map(str::to_owned));
    let Some(id) = id else {
        s.violations.push(format!(
            "the client sent a frame that is not an acknowledgement: {text}"
        ));
        drop(s);
        shared.changed.notify_waiters();
        return;
    };
    match s.socket.unacked.remove(&id) {
        Some(e) => {
            if e.sent_at.is_some_and(|t| t.elapsed() > ACK_WITHIN) {
                s.violations
                    .push(format!("envelope {id} acknowledged after more than 3 s"));
            }
            s.socket.acked.push(id);
        }
        None if s.socket.acked.contains(&id) => {
            s.violations
                .push(format!("envelope {id} acknowledged twice"));
        }
        None => s
            .violations
            .push(format!("acknowledgement of unknown envelope {id}")),
    }
    drop(s);
    shared.changed.notify_waiters();
}

fn push(inner: &mut Inner, kind: &str, payload: Value) -> String {
    inner.socket.next_envelope += 1;
    let id = format!("env-{:04}", inner.socket.next_envelope);
    inner.socket.unacked.insert(
        id.clone(),
        Envelope {
            kind: kind.to_owned(),
            payload,
            retry_attempt: 0,
            sent_at: None,
        },
    );
    inner.socket.flush_one(&id);
    id
}

impl SocketState {
    fn flush_one(&mut self, id: &str) {
        let Some(tx) = self.current.clone() else {
            return;
        };
        if let Some(e) = self.unacked.get_mut(id) {
            e.sent_at = Some(Instant::now());
            let _ = tx.send(Command::Send(Self::frame(id, e)));
        }
    }
}

/// An `event_callback` around `event`, as Slack wraps events.
pub fn event_callback(event_id: &str, event: Value) -> Value {
    json!({
        "token": "verification-token-unused",
        "team_id": TEAM,
        "api_app_id": "AFAKE",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_800_000_000,
        "authorizations": [{ "team_id": TEAM, "user_id": super::BOT_USER, "is_bot": true }],
    })
}

impl FakeSlack {
    /// Delivers `event` (a `message`, `app_mention`, ...) as an
    /// `events_api` envelope with `event_id`; the envelope's id.
    pub fn push_event(&self, event_id: &str, event: Value) -> String {
        self.push_envelope("events_api", event_callback(event_id, event))
    }

    /// Delivers an envelope of `kind` (`events_api`, `slash_commands`,
    /// `interactive`); its id. Sent at once when a client is connected,
    /// else on the next connection.
    pub fn push_envelope(&self, kind: &str, payload: Value) -> String {
        let id = push(&mut self.shared.lock(), kind, payload);
        self.shared.changed.notify_waiters();
        id
    }

    /// Sends a raw text frame (malformed envelopes) on the open connection.
    pub fn send_raw(&self, text: &str) {
        if let Some(tx) = &self.shared.lock().socket.current {
            let _ = tx.send(Command::Send(text.to_owned()));
        }
    }

    /// Asks the client to reconnect (`disconnect`, reason `refresh_requested`).
    pub fn disconnect(&self) {
        self.send_raw(
            &json!({ "type": "disconnect", "reason": "refresh_requested", "debug_info": { "host": "fake-slack" } })
                .to_string(),
        );
    }

    /// Drops the open connection without a close frame.
    pub fn drop_connection(&self) {
        let mut s = self.shared.lock();
        if let Some(tx) = s.socket.current.take() {
            let _ = tx.send(Command::Drop);
        }
    }

    /// WebSocket connections opened so far.
    pub fn connections(&self) -> usize {
        self.shared.lock().socket.connections
    }

    /// Waits until at least `n` connections were opened and one is open.
    ///
    /// # Panics
    /// After `within` without.
    pub async fn wait_connected(&self, n: usize, within: Duration) {
        let ok = self
            .wait(within, |s| {
                (s.socket.connections >= n && s.socket.current.is_some()).then_some(())
            })
            .await;
        assert!(
            ok.is_some(),
            "waited {within:?} for Socket Mode connection {n}; {} opened; violations: {:?}",
            self.connections(),
            self.violations()
        );
    }

    /// Waits until envelope `id` is acknowledged.
    ///
    /// # Panics
    /// After `within` without.
    pub async fn wait_acked(&self, id: &str, within: Duration) {
        let ok = self
            .wait(within, |s| {
                s.socket.acked.iter().any(|a| a == id).then_some(())
            })
            .await;
        assert!(
            ok.is_some(),
            "envelope {id} not acknowledged within {within:?}; violations: {:?}",
            self.violations()
        );
    }

    /// Envelopes not acknowledged yet.
    pub fn unacked(&self) -> Vec<String> {
        self.shared.lock().socket.unacked.keys().cloned().collect()
    }
}
