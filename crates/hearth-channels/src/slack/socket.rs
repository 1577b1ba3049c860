//! Socket Mode: `apps.connections.open` (app-level token) gives a
//! single-use WebSocket URL; Slack says `hello`, then sends envelopes
//! (`events_api`, `slash_commands`, `interactive`), each acknowledged with
//! `{"envelope_id"}` once what it carries is stored (unacknowledged ones
//! come again with a higher `retry_attempt`). `disconnect` means: open a
//! new connection now; a dropped one is reopened with backoff.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_websockets::{ClientBuilder, Message};
use tracing::{debug, info, warn};

use super::Sl;
use super::types::{Connection, Frame, SlashCommand};
use crate::backoff::Backoff;

/// Quiet this long, the connection is probed with a ping; quiet twice as
/// long, it is taken as dead and reopened.
const QUIET: Duration = Duration::from_secs(60);

/// How a connection ended.
enum Ended {
    /// hearth is stopping.
    Stopped,
    /// Slack asked for a new connection.
    Disconnect,
    /// It failed or was dropped.
    Dropped(String),
}

pub(super) async fn run(slack: Sl, stop: CancellationToken) {
    let (api, app_token) = match (&slack.kit.api, &slack.app_token) {
        (Ok(api), Ok(token)) => (api.clone(), token.clone()),
        (Err(why), _) | (_, Err(why)) => return slack.kit.cannot_start(why),
    };
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        if stop.is_cancelled() {
            return;
        }
        if let Err(e) = slack.identify().await {
            let delay = match slack.refused(&e.to_string(), false, &mut backoff) {
                Some(delay) => delay,
                None => {
                    warn!(channel = "slack", error = %e, "auth.test failed; retrying with backoff");
                    slack.kit.health.failed(e.to_string());
                    backoff.next_delay()
                }
            };
            if !pause(&stop, delay).await {
                return;
            }
            continue;
        }
        let open = api
            .call_as::<Connection>(&app_token, "apps.connections.open", &json!({}))
            .await;
        let url = match open {
            Ok(c) => c.url,
            Err(e) => {
                let delay = match slack.refused(&e.to_string(), true, &mut backoff) {
                    Some(delay) => delay,
                    None => {
                        warn!(channel = "slack", error = %e, "apps.connections.open failed; retrying with backoff");
                        slack
                            .kit
                            .health
                            .failed(format!("apps.connections.open: {e}"));
                        backoff.next_delay()
                    }
                };
                if !pause(&stop, delay).await {
                    return;
                }
                continue;
            }
        };
        match serve(&slack, &url, &stop, &mut backoff).await {
            Ended::Stopped => return,
            Ended::Disconnect => info!(channel = "slack", "Slack asked for a new connection"),
            Ended::Dropped(why) => {
                warn!(channel = "slack", error = %why, "the Socket Mode connection dropped; reconnecting with backoff");
                slack.kit.health.failed(format!("socket: {why}"));
                if !pause(&stop, backoff.next_delay()).await {
                    return;
                }
            }
        }
    }
}

/// Waits `d` unless stopped first; false when stopped.
async fn pause(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}

/// One connection, until it ends. Envelopes are handled in the order they
/// arrive (so one conversation's messages stay in order), each acked as
/// soon as it is stored.
async fn serve(slack: &Sl, url: &str, stop: &CancellationToken, backoff: &mut Backoff) -> Ended {
    let builder = match ClientBuilder::new().uri(url) {
        Ok(b) => b,
        Err(e) => return Ended::Dropped(format!("bad WebSocket URL from Slack: {e}")),
    };
    let mut ws = match builder.connect().await {
        Ok((ws, _)) => ws,
        Err(e) => return Ended::Dropped(format!("connect: {e}")),
    };
    let mut probed = false;
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => {
                let _ = ws.close().await;
                return Ended::Stopped;
            }
            next = tokio::time::timeout(QUIET, ws.next()) => next,
        };
        let msg = match next {
            Err(_) if probed => return Ended::Dropped("no frame for two minutes".into()),
            Err(_) => {
                probed = true;
                if let Err(e) = ws.send(Message::ping("hearth")).await {
                    return Ended::Dropped(e.to_string());
                }
                continue;
            }
            Ok(None) => return Ended::Dropped("closed".into()),
            Ok(Some(Err(e))) => return Ended::Dropped(e.to_string()),
            Ok(Some(Ok(msg))) => msg,
        };
        probed = false;
        if msg.is_close() {
            return Ended::Dropped("closed by Slack".into());
        }
        let Some(text) = msg.as_text() else {
            continue;
        };
        match on_frame(slack, text, backoff).await {
            Step::Continue => {}
            Step::Ack(envelope_id) => {
                let ack = json!({ "envelope_id": envelope_id }).to_string();
                if let Err(e) = ws.send(Message::text(ack)).await {
                    return Ended::Dropped(format!("ack: {e}"));
                }
                slack.kit.health.event();
            }
            Step::Disconnect => return Ended::Disconnect,
        }
    }
}

/// What the connection does after a frame.
enum Step {
    Continue,
    Ack(String),
    Disconnect,
}

async fn on_frame(slack: &Sl, text: &str, backoff: &mut Backoff) -> Step {
    let frame: Frame = match serde_json::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            warn!(channel = "slack", error = %e, "skipping a malformed Socket Mode frame");
            // Acked when its id can be read: redelivering cannot fix it.
            return serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("envelope_id")?.as_str().map(str::to_owned))
                .map_or(Step::Continue, Step::Ack);
        }
    };
    match frame.kind.as_str() {
        "hello" => {
            info!(channel = "slack", "Slack Socket Mode connected");
            slack.kit.health.ok();
            backoff.reset();
            return Step::Continue;
        }
        "disconnect" => {
            debug!(channel = "slack", reason = ?frame.reason, "disconnect frame");
            return Step::Disconnect;
        }
        _ => {}
    }
    let Some(envelope_id) = frame.envelope_id else {
        debug!(channel = "slack", kind = %frame.kind, "ignoring a frame without an envelope");
        return Step::Continue;
    };
    let payload = frame.payload.unwrap_or(Value::Null);
    let handled = match frame.kind.as_str() {
        "events_api" => super::inbound::handle(slack, payload).await,
        "interactive" => super::interactive::handle(slack, payload).await,
        "slash_commands" => match serde_json::from_value::<SlashCommand>(payload) {
            Ok(cmd) => super::commands::command(slack, cmd).await,
            Err(e) => {
                warn!(channel = "slack", error = %e, "skipping a malformed slash command");
                Ok(())
            }
        },
        other => {
            debug!(
                channel = "slack",
                kind = other,
                "ignoring an envelope of another kind"
            );
            Ok(())
        }
    };
    match crate::kit::settle("slack", handled) {
        Ok(()) => Step::Ack(envelope_id),
        Err(e) => {
            // Not acknowledged: Slack sends it again.
            warn!(channel = "slack", error = %e, retry_attempt = frame.retry_attempt.unwrap_or(0), "could not store an envelope; Slack will send it again");
            slack.kit.health.failed(format!("storing events: {e}"));
            Step::Continue
        }
    }
}
