//! The gateway connection. twilight-gateway's shard does the protocol:
//! IDENTIFY with our intents, heartbeats (a zombie connection is dropped),
//! RESUME to READY's `resume_gateway_url` after a drop or op 7, a fresh
//! IDENTIFY after op 9, reconnects with backoff. This loop reads the raw
//! dispatches, parses the few hearth uses (a malformed one is logged and
//! skipped) and restarts the shard with backoff when Discord closes it for
//! good (bad token, disallowed intents). The session is kept in the store
//! ([`session`]): a gateway started where one was recently connected (a
//! takeover by another replica, a restart) RESUMEs it, so the events sent
//! meanwhile are replayed rather than missed.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Method;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};
use twilight_gateway::error::ReceiveMessageErrorType;
use twilight_gateway::{ConfigBuilder, Intents, Message, Shard, ShardId, ShardState};

use super::session::{self, Cursor, Keeper};
use super::types::{Application, Frame, Guild, Interaction, Ready};
use super::{Dc, Identity, commands, inbound, interactions, is_snowflake};
use crate::backoff::Backoff;
use crate::kit::settle;

/// twilight's built-in gateway address: no proxy URL is set for it, so
/// resumes go to READY's `resume_gateway_url` as Discord asks.
const DEFAULT_GATEWAY: &str = "wss://gateway.discord.gg";

/// Guild metadata, guild and DM messages, their text, and reactions to
/// them (a 👍 or 👎 on an answer rates its run).
fn intents() -> Intents {
    Intents::GUILDS
        | Intents::GUILD_MESSAGES
        | Intents::DIRECT_MESSAGES
        | Intents::MESSAGE_CONTENT
        | Intents::GUILD_MESSAGE_REACTIONS
        | Intents::DIRECT_MESSAGE_REACTIONS
}

#[derive(Deserialize)]
struct GatewayBot {
    url: String,
}

/// Waits `d` unless stopped first; false when stopped.
async fn pause(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}

pub(super) async fn run(dc: Dc, stop: CancellationToken) {
    let (token, api) = match (&dc.token, &dc.kit.api) {
        (Ok(t), Ok(api)) => (t.0.clone(), api.clone()),
        (Err(why), _) | (_, Err(why)) => return dc.kit.cannot_start(why),
    };
    let mut resume = session::load(dc.kit.store.as_ref()).await;
    if resume.is_some() && dc.kit.me.get().is_none() {
        // A resumed session has no READY, which says who the bot is.
        let asked = tokio::select! {
            () = stop.cancelled() => return,
            r = whoami(&dc, &api) => r,
        };
        if let Err(e) = asked {
            info!(channel = "discord", error = %e, "cannot learn who the bot is over REST; identifying afresh instead of resuming");
            resume = None;
        }
    }
    if let (Some(c), Some(me)) = (&resume, dc.kit.me.get())
        && !c.bot_id.is_empty()
        && c.bot_id != me.user_id
    {
        info!(
            channel = "discord",
            "the stored gateway session is another bot's (the token changed); identifying afresh"
        );
        resume = None;
    }
    if let Some(c) = &resume {
        info!(
            channel = "discord",
            seq = c.seq,
            "resuming the stored gateway session"
        );
    }
    let keeper = Keeper::start(dc.kit.store.clone(), resume.clone(), stop.clone());
    connect(&dc, token, &api, resume, &keeper, &stop).await;
    // The last event handled, for whichever replica connects next.
    keeper.finish().await;
}

/// Asks Discord who the bot is (`GET /applications/@me`), as READY would.
async fn whoami(dc: &Dc, api: &super::api::Api) -> Result<(), super::api::ApiError> {
    let app: Application = api
        .call(Method::GET, "/applications/@me", "applications/@me", None)
        .await?;
    let Some(bot) = app
        .bot
        .filter(|b| is_snowflake(&b.id) && is_snowflake(&app.id))
    else {
        return Err(super::api::ApiError::Malformed(
            "GET /applications/@me names no bot user, or malformed ids".into(),
        ));
    };
    identified(
        dc,
        Identity {
            user_id: bot.id,
            app_id: app.id,
        },
    );
    Ok(())
}

/// Connects and reads the gateway until `stop`, starting from the session
/// `resume` (if any); a shard made again after Discord closed the last one
/// for good identifies afresh.
async fn connect(
    dc: &Dc,
    token: String,
    api: &super::api::Api,
    mut resume: Option<Cursor>,
    keeper: &Keeper,
    stop: &CancellationToken,
) {
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(600));
    loop {
        let url = if dc.config.gateway_url.trim().is_empty() {
            match api
                .call::<GatewayBot>(Method::GET, "/gateway/bot", "gateway/bot", None)
                .await
            {
                Ok(g) => g.url,
                Err(super::api::ApiError::Refused {
                    status: status @ (401 | 403),
                    message,
                    ..
                }) => {
                    // Discord's words often start with the status already.
                    let said = if message.starts_with(&status.to_string()) {
                        message
                    } else {
                        format!("{status} {message}")
                    };
                    let delay = refused(dc, &said, &mut backoff);
                    if !pause(stop, delay).await {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    warn!(channel = "discord", error = %e, "GET /gateway/bot failed; retrying with backoff");
                    dc.kit.health.failed(format!("GET /gateway/bot: {e}"));
                    if !pause(stop, backoff.next_delay()).await {
                        return;
                    }
                    continue;
                }
            }
        } else {
            dc.config.gateway_url.trim().to_owned()
        };
        let url = url.trim_end_matches('/').to_owned();
        // Loading the TLS roots may panic inside twilight; a channel must
        // never take hearth down.
        let from = resume.take();
        let built = std::panic::catch_unwind(|| {
            let mut b = ConfigBuilder::new(token.clone(), intents());
            if url != DEFAULT_GATEWAY {
                b = b.proxy_url(url.clone());
            }
            if let Some(c) = &from {
                b = b.session(c.session()).resume_url(c.resume_url.clone());
            }
            b.build()
        });
        let Ok(config) = built else {
            error!(
                channel = "discord",
                "cannot set up TLS for the Discord gateway; retrying"
            );
            dc.kit.health.failed("cannot set up TLS for the gateway");
            if !pause(stop, backoff.next_delay()).await {
                return;
            }
            continue;
        };
        let mut shard = Shard::with_config(ShardId::ONE, config);
        let Some(why) = serve(dc, &mut shard, stop, &mut backoff, keeper).await else {
            return;
        };
        let delay = if why == fatal_reason(Some(4004)) {
            refused(dc, "gateway close 4004 Authentication failed", &mut backoff)
        } else {
            error!(channel = "discord", reason = %why, "Discord closed the gateway for good; retrying with backoff");
            dc.kit.health.failed(why);
            backoff.next_delay()
        };
        if !pause(stop, delay).await {
            return;
        }
    }
}

/// Notes that Discord refused the bot token (`said`: its status and words):
/// what to check, on the log and the channel's health; the delay before the
/// next try, slow once refused three times in a row.
fn refused(dc: &super::Discord, said: &str, backoff: &mut Backoff) -> Duration {
    let delay = backoff.refused();
    let source = crate::advice::token_source(
        dc.config.token_env.as_deref(),
        dc.config.token_secret.as_deref(),
    );
    let why = crate::advice::token_refused(
        "Discord",
        "bot token",
        said,
        &source,
        crate::advice::DISCORD_FIX,
    );
    let why = crate::advice::with_retry(why, backoff.slow_pace());
    error!(channel = "discord", error = %why, "Discord refused the bot token");
    dc.kit.health.failed(why);
    delay
}

/// What a fatal close code means for the owner.
fn fatal_reason(code: Option<u16>) -> String {
    match code {
        Some(4004) => "authentication failed (4004): check the bot token".into(),
        Some(4013) => "invalid intents (4013)".into(),
        Some(4014) => "disallowed intents (4014): enable the Message Content intent for the bot in the Discord developer portal".into(),
        Some(c) => format!("gateway closed with code {c}"),
        None => "gateway closed".into(),
    }
}

/// Reads the shard until `stop` (`None`) or until it is closed for good
/// (the reason).
async fn serve(
    dc: &Dc,
    shard: &mut Shard,
    stop: &CancellationToken,
    backoff: &mut Backoff,
    keeper: &Keeper,
) -> Option<String> {
    let mut last_close = None;
    loop {
        // What the shard was doing when the next frame came (an op 9 says
        // more once it is known whether it answered a RESUME).
        let was = shard.state();
        let item = tokio::select! {
            () = stop.cancelled() => return None,
            item = shard.next() => item,
        };
        match item {
            None => return Some(fatal_reason(last_close)),
            Some(Err(e)) => match e.kind() {
                ReceiveMessageErrorType::Deserializing { event } => {
                    // The payload may hold user text: its size only.
                    warn!(
                        channel = "discord",
                        bytes = event.len(),
                        "skipping a malformed gateway payload"
                    );
                }
                _ => {
                    warn!(channel = "discord", error = %e, "gateway connection failed; reconnecting");
                    dc.kit.health.failed(format!("gateway: {e}"));
                }
            },
            Some(Ok(Message::Close(frame))) => {
                last_close = frame.map(|f| f.code);
                info!(
                    channel = "discord",
                    code = last_close.unwrap_or_default(),
                    "gateway connection closed; resuming"
                );
            }
            Some(Ok(Message::Text(json))) => {
                match dispatch(dc, &json).await {
                    Seen::Dispatch => backoff.reset(),
                    Seen::InvalidSession { resumable } => invalid_session(was, resumable),
                    Seen::Other => {}
                }
                // Handled (a message stored, an interaction under way).
                keeper.note(shard, dc.kit.me.get().map(|m| m.user_id.as_str()));
            }
        }
    }
}

/// What a gateway frame was.
pub(super) enum Seen {
    /// A dispatch (op 0), handled.
    Dispatch,
    /// Invalid Session (op 9): `d` says whether the session may be resumed.
    InvalidSession { resumable: bool },
    /// Anything else (twilight answers it).
    Other,
}

/// Says why the shard connects again after an op 9 that came while it
/// was in state `was`: twilight resumes when `resumable`, or identifies
/// afresh.
fn invalid_session(was: ShardState, resumable: bool) {
    match (was, resumable) {
        (_, true) => info!(
            channel = "discord",
            "Discord asked for the gateway session to be resumed again (op 9)"
        ),
        (ShardState::Resuming, false) => info!(
            channel = "discord",
            "Discord refused to resume the gateway session (op 9); identifying afresh: \
             events sent while no one was connected are missed"
        ),
        (_, false) => info!(
            channel = "discord",
            "Discord ended the gateway session (op 9); identifying afresh"
        ),
    }
}

/// Handles one gateway frame.
pub(super) async fn dispatch(dc: &Dc, json: &str) -> Seen {
    let frame: Frame = match serde_json::from_str(json) {
        Ok(f) => f,
        Err(e) => {
            warn!(channel = "discord", error = %e, bytes = json.len(), "skipping a malformed gateway payload");
            return Seen::Other;
        }
    };
    if frame.op == 9 {
        return Seen::InvalidSession {
            resumable: frame.d.as_bool().unwrap_or(false),
        };
    }
    if frame.op != 0 {
        return Seen::Other;
    }
    let kind = frame.t.unwrap_or_default();
    let parsed = match kind.as_str() {
        "READY" => serde_json::from_value::<Ready>(frame.d).map(|r| ready(dc, r)),
        "RESUMED" => {
            info!(channel = "discord", "gateway session resumed");
            dc.kit.health.ok();
            Ok(())
        }
        "GUILD_CREATE" => serde_json::from_value::<Guild>(frame.d).map(|g| {
            if let Some(owner) = g.owner_id {
                dc.owners
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(g.id, owner);
            }
        }),
        "MESSAGE_CREATE" => match serde_json::from_value(frame.d) {
            Ok(m) => {
                if let Err(e) = settle("discord", inbound::message(dc, m).await) {
                    // Nothing to acknowledge on Discord: say it loudly.
                    error!(channel = "discord", error = %e, "could not take a Discord message");
                    dc.kit.health.failed(format!("taking a message: {e}"));
                    return Seen::Dispatch;
                }
                Ok(())
            }
            Err(e) => Err(e),
        },
        "MESSAGE_REACTION_ADD" => match serde_json::from_value(frame.d) {
            Ok(r) => {
                if let Err(e) = inbound::reaction(dc, r).await {
                    // Only a rating is lost: no need to mark the channel down.
                    warn!(channel = "discord", error = %e, "could not take a reaction");
                }
                Ok(())
            }
            Err(e) => Err(e),
        },
        "INTERACTION_CREATE" => serde_json::from_value::<Interaction>(frame.d).map(|i| {
            // Interactions must be answered within 3 s and do not depend
            // on each other's order.
            tokio::spawn(interactions::handle(dc.clone(), i));
        }),
        other => {
            debug!(channel = "discord", event = other, "ignoring a dispatch");
            Ok(())
        }
    };
    match parsed {
        Ok(()) => dc.kit.health.event(),
        Err(e) => {
            warn!(channel = "discord", event = %kind, error = %e, "skipping a malformed dispatch")
        }
    }
    Seen::Dispatch
}

fn ready(dc: &Dc, r: Ready) {
    info!(channel = "discord", bot = %r.user.username, "Discord bot connected");
    identified(
        dc,
        Identity {
            user_id: r.user.id,
            app_id: r.application.id,
        },
    );
    dc.kit.health.ok();
}

/// Notes who the bot is (from READY, or asked before a RESUME).
fn identified(dc: &Dc, me: Identity) {
    let first = dc.kit.me.set(me).is_ok();
    // Once per process: a re-IDENTIFY does not change the commands.
    if first && dc.config.sync_commands {
        tokio::spawn(commands::sync(dc.clone()));
    }
}
