//! The fake gateway: one WebSocket connection at a time, speaking
//! Discord's JSON gateway protocol (v10, no compression).

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_websockets::{CloseCode, Message, ServerBuilder, WebSocketStream};

use super::{APP_ID, BOT_ID, Ctl, EXPECTED_INTENTS, Shared};

/// Short, so heartbeats happen during tests.
const HEARTBEAT_MS: u64 = 5000;

pub(super) async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(serve(stream, shared.clone()));
    }
}

async fn send(ws: &mut WebSocketStream<TcpStream>, v: &Value) -> bool {
    ws.send(Message::text(v.to_string())).await.is_ok()
}

async fn close(ws: &mut WebSocketStream<TcpStream>, code: u16, reason: &str) {
    if let Ok(code) = CloseCode::try_from(code) {
        let _ = ws.send(Message::close(Some(code), reason)).await;
    }
}

fn token_ok(shared: &Shared, token: Option<&str>) -> bool {
    let t = token.unwrap_or("");
    t == shared.token || t.strip_prefix("Bot ") == Some(shared.token.as_str())
}

async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    serve_connection(stream, &shared).await;
    // Its receiver is gone: a session with no connection (the bot died or
    // was stopped) keeps what is sent to it for a RESUME.
    shared.with(|s| {
        if s.live
            .as_ref()
            .is_some_and(mpsc::UnboundedSender::is_closed)
        {
            s.live = None;
        }
    });
}

async fn serve_connection(stream: TcpStream, shared: &Arc<Shared>) {
    let shared = shared.clone();
    let Ok((req, mut ws)) = ServerBuilder::new().accept(stream).await else {
        shared.violation("gateway: a connection that is not a WebSocket upgrade".into());
        return;
    };
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    if !query.contains("v=10") || !query.contains("encoding=json") {
        shared.violation(format!(
            "gateway: connected without v=10&encoding=json: {query:?}"
        ));
    }
    if !send(
        &mut ws,
        &json!({ "op": 10, "d": { "heartbeat_interval": HEARTBEAT_MS } }),
    )
    .await
    {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Ctl>();
    let mut tx = Some(tx);
    loop {
        tokio::select! {
            ctl = rx.recv() => match ctl {
                Some(Ctl::Send(frame)) => {
                    if ws.send(Message::text(frame)).await.is_err() {
                        return;
                    }
                }
                // Dropping the socket without a close frame: an abnormal
                // closure the client must resume from.
                Some(Ctl::Drop) | None => return,
            },
            msg = ws.next() => {
                let Some(Ok(msg)) = msg else { return };
                if msg.is_close() {
                    return;
                }
                let Some(text) = msg.as_text() else { continue };
                let Ok(frame) = serde_json::from_str::<Value>(text) else {
                    shared.violation(format!("gateway: a frame that is not JSON: {text:?}"));
                    close(&mut ws, 4002, "Error while decoding payload.").await;
                    return;
                };
                match frame["op"].as_u64() {
                    Some(1) => {
                        // `d`: the last sequence number received, or null.
                        let last = shared.lock().seq;
                        match &frame["d"] {
                            Value::Null => {}
                            d if d.as_u64().is_some_and(|n| n <= last) => {}
                            d => shared.violation(format!(
                                "gateway: a heartbeat with d = {d}, not null or a sequence up to {last}"
                            )),
                        }
                        if !send(&mut ws, &json!({ "op": 11 })).await {
                            return;
                        }
                    }
                    Some(2) => {
                        let d = &frame["d"];
                        if !token_ok(&shared, d["token"].as_str()) {
                            shared.violation("gateway: IDENTIFY with a wrong token".into());
                            close(&mut ws, 4004, "Authentication failed.").await;
                            return;
                        }
                        // Bits above DIRECT_MESSAGE_POLLS (1 << 25) are no intent.
                        let Some(intents) = d["intents"].as_u64().filter(|i| *i < 1 << 26) else {
                            shared.violation(format!("gateway: IDENTIFY with intents {}", d["intents"]));
                            close(&mut ws, 4013, "Invalid intent(s).").await;
                            return;
                        };
                        // Discord takes any valid set and then sends only the
                        // events it covers; hearth must ask for what it reads.
                        if intents != EXPECTED_INTENTS {
                            shared.violation(format!(
                                "gateway: IDENTIFY with intents {intents}, not {EXPECTED_INTENTS}"
                            ));
                        }
                        if d["properties"]["os"].as_str().is_none() {
                            shared.violation("gateway: IDENTIFY without properties.os".into());
                            close(&mut ws, 4002, "Error while decoding payload.").await;
                            return;
                        }
                        let Some(tx) = tx.take() else {
                            shared.violation("gateway: a second IDENTIFY on one connection".into());
                            close(&mut ws, 4005, "Already authenticated.").await;
                            return;
                        };
                        identified(&shared, tx, intents);
                    }
                    Some(6) => {
                        let d = &frame["d"];
                        let Some(conn) = tx.take() else {
                            shared.violation("gateway: RESUME after IDENTIFY".into());
                            close(&mut ws, 4005, "Already authenticated.").await;
                            return;
                        };
                        if !token_ok(&shared, d["token"].as_str()) {
                            shared.violation("gateway: RESUME with a wrong token".into());
                            close(&mut ws, 4004, "Authentication failed.").await;
                            return;
                        }
                        if !path.starts_with("/resume") {
                            shared.violation(format!("gateway: RESUME not sent to resume_gateway_url (path {path:?})"));
                        }
                        let (Some(session), Some(seq)) = (d["session_id"].as_str(), d["seq"].as_u64()) else {
                            shared.violation(format!(
                                "gateway: RESUME without a string session_id and an integer seq: {d}"
                            ));
                            close(&mut ws, 4002, "Error while decoding payload.").await;
                            return;
                        };
                        if let Err(back) = resumed(&shared, conn, session.to_owned(), seq) {
                            // Not resumable: the client may IDENTIFY (here
                            // or on a new connection).
                            tx = Some(back);
                            if !send(&mut ws, &json!({ "op": 9, "d": false })).await {
                                return;
                            }
                        }
                    }
                    other => {
                        shared.violation(format!("gateway: unexpected opcode {other:?}"));
                        close(&mut ws, 4001, "Unknown opcode.").await;
                        return;
                    }
                }
            }
        }
    }
}

/// A new session with `intents`: READY, then what was pushed before it.
/// The previous session can no longer be resumed.
fn identified(shared: &Shared, tx: mpsc::UnboundedSender<Ctl>, intents: u64) {
    let resume_url = format!("ws://{}/resume", shared.gateway_addr);
    shared.with(|s| {
        if let Some(old) = s.session_id.take() {
            s.expired.push(old);
        }
        s.identifies += 1;
        s.intents = intents;
        let session = format!("session-{}", s.identifies);
        s.session_id = Some(session.clone());
        s.seq = 0;
        s.log.clear();
        s.live = Some(tx);
        s.dispatch(
            "READY",
            json!({
                "v": 10, "session_id": session, "resume_gateway_url": resume_url,
                "user": { "id": BOT_ID, "username": "hearth", "bot": true },
                "application": { "id": APP_ID, "flags": 0 },
                "guilds": [], "shard": [0, 1],
            }),
        );
        for (t, d) in std::mem::take(&mut s.unsequenced) {
            s.dispatch(&t, d);
        }
    });
}

/// A RESUME: replays what the client missed, then RESUMED; the sender
/// back when the session cannot be resumed (Discord answers op 9 `d:
/// false`): one that ended, or one never issued (a violation: the client
/// made it up).
fn resumed(
    shared: &Shared,
    tx: mpsc::UnboundedSender<Ctl>,
    session: String,
    seq: u64,
) -> Result<(), mpsc::UnboundedSender<Ctl>> {
    shared.with(|s| {
        if s.session_id.as_deref() != Some(session.as_str()) {
            if !s.expired.contains(&session) {
                s.violations.push(format!(
                    "gateway: RESUME of a session never issued: {session:?}"
                ));
            }
            s.refused.push((session, seq));
            return Err(tx);
        }
        if seq > s.seq {
            s.violations.push(format!(
                "gateway: RESUME with seq {seq} beyond the last sent {}",
                s.seq
            ));
        }
        s.resumes.push((session, seq));
        for (_, frame) in s.log.iter().filter(|(n, _)| *n > seq) {
            let _ = tx.send(Ctl::Send(frame.clone()));
        }
        s.live = Some(tx);
        s.dispatch("RESUMED", json!({}));
        Ok(())
    })
}
