//! The gateway session kept in the store (cursor `session` of channel
//! `discord`): its id, the sequence number of the last event handled and
//! READY's `resume_gateway_url`. The replica that starts the gateway next
//! (another one after the holder died, or the same process restarted)
//! RESUMEs that session, so Discord replays the events sent while no one
//! was connected; a fresh IDENTIFY would miss them.
//!
//! The sequence is stored after the events up to it were handled, at most
//! every [`EVERY`] (not a write per event), again every [`REFRESH`] while
//! nothing happens (so a takeover can tell the session was alive) and at a
//! clean stop. A resume may therefore replay events already handled: a
//! message is recognised by its idempotency key (`discord:<message id>`),
//! an interaction by its id (`first_sight`), so neither acts twice.

use std::sync::Arc;
use std::time::Duration;

use hearth_core::now_ms;
use hearth_runtime::surfaces::OutboxStore;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use twilight_gateway::{Session, Shard};

/// The store's cursor: channel `discord`, this name.
const NAME: &str = "session";

/// How long after it was last stored a session is worth resuming. Discord
/// does not publish how long it keeps one; past this a RESUME is not even
/// tried (Discord would answer op 9), and before it a refused RESUME costs
/// one round trip before the IDENTIFY.
pub(super) const RESUMABLE_FOR: Duration = Duration::from_secs(5 * 60);

/// At most one write of the session in this time (the last one at a stop
/// is not held back).
const EVERY: Duration = Duration::from_secs(2);

/// While no event comes, the session is stored again this often, so that
/// the replica taking over sees it was alive until lately.
const REFRESH: Duration = Duration::from_secs(60);

/// The session as stored (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Cursor {
    /// READY's `session_id`.
    pub(super) session_id: String,
    /// The sequence number of the last event handled.
    pub(super) seq: u64,
    /// READY's `resume_gateway_url`, where a RESUME goes.
    pub(super) resume_url: String,
    /// The bot's user id (empty when not known yet): a session of another
    /// bot (the token changed) is not resumed.
    #[serde(default)]
    pub(super) bot_id: String,
    /// When it was stored (ms since the epoch).
    #[serde(default)]
    pub(super) saved_at: i64,
}

impl Cursor {
    /// The session twilight resumes from this cursor.
    pub(super) fn session(&self) -> Session {
        Session::new(self.seq, self.session_id.clone())
    }

    /// Why this cursor cannot be resumed at `now`, or `None`.
    fn unusable(&self, now: i64) -> Option<String> {
        let id_ok = !self.session_id.is_empty()
            && self.session_id.len() <= 256
            && self.session_id.bytes().all(|b| b.is_ascii_graphic());
        if !id_ok {
            return Some("its session id is malformed".into());
        }
        if !url_ok(&self.resume_url) {
            return Some("its resume URL is not a ws:// or wss:// URL".into());
        }
        let age = Duration::from_millis(u64::try_from(now - self.saved_at).unwrap_or(0));
        (age > RESUMABLE_FOR).then(|| {
            format!(
                "it was stored {} s ago, longer than the {} s a session is resumed after",
                age.as_secs(),
                RESUMABLE_FOR.as_secs()
            )
        })
    }
}

/// True for a URL twilight can connect to (it builds
/// `<url>/?v=10&encoding=json` and refuses nothing itself).
fn url_ok(url: &str) -> bool {
    let Ok(uri) = format!("{url}/?v=10&encoding=json").parse::<http::Uri>() else {
        return false;
    };
    matches!(uri.scheme_str(), Some("ws" | "wss")) && uri.host().is_some_and(|h| !h.is_empty())
}

/// The stored session when it may still be resumed; `None` (and why, in
/// the log) when there is none, it cannot be read or it is too old.
pub(super) async fn load(store: &dyn OutboxStore) -> Option<Cursor> {
    let raw = match store.cursor("discord", NAME).await {
        Ok(Some(raw)) if !raw.is_empty() => raw,
        Ok(_) => return None,
        Err(e) => {
            warn!(channel = "discord", error = %e, "cannot read the stored gateway session; identifying afresh");
            return None;
        }
    };
    let cursor: Cursor = match serde_json::from_str(&raw) {
        Ok(c) => c,
        Err(e) => {
            warn!(channel = "discord", error = %e, "the stored gateway session is unreadable; identifying afresh");
            return None;
        }
    };
    if let Some(why) = cursor.unusable(now_ms()) {
        info!(
            channel = "discord",
            why, "not resuming the stored gateway session; identifying afresh"
        );
        return None;
    }
    Some(cursor)
}

/// Keeps the store's copy of the session up to date from the shard (see
/// the module's doc), on a task of its own so no event waits for a write.
pub(super) struct Keeper {
    latest: watch::Sender<Option<Cursor>>,
    task: JoinHandle<()>,
}

impl Keeper {
    /// Starts keeping, from `first` (the session resumed, if any). `stop`
    /// ends the pause between writes, so the last one is not held back.
    pub(super) fn start(
        store: Arc<dyn OutboxStore>,
        first: Option<Cursor>,
        stop: CancellationToken,
    ) -> Self {
        // Compared without the time it was stored (a noted one has none).
        let written = first.map(|c| Cursor { saved_at: 0, ..c });
        let (latest, seen) = watch::channel(written.clone());
        let task = tokio::spawn(keep(store, seen, written, stop));
        Self { latest, task }
    }

    /// Notes the shard's session after the events it has received so far
    /// were handled, as a session of bot `bot`. A session twilight dropped
    /// (op 9) is not noted: the stored one stays until a new session is
    /// made, and is not refreshed.
    pub(super) fn note(&self, shard: &Shard, bot: Option<&str>) {
        let Some(session) = shard.session() else {
            return;
        };
        self.latest.send_if_modified(|latest| {
            let same = latest
                .as_ref()
                .is_some_and(|c| c.session_id == session.id() && c.seq == session.sequence());
            if same {
                return false;
            }
            // twilight forgets the resume URL when a reconnect fails, and a
            // RESUMED does not repeat it: the session's own is kept.
            let resume_url = match (shard.resume_url(), latest.as_ref()) {
                (Some(url), _) => url.to_owned(),
                (None, Some(c)) if c.session_id == session.id() => c.resume_url.clone(),
                (None, _) => return false,
            };
            *latest = Some(Cursor {
                session_id: session.id().to_owned(),
                seq: session.sequence(),
                resume_url,
                bot_id: bot.unwrap_or_default().to_owned(),
                saved_at: 0,
            });
            true
        });
    }

    /// Stores the last session noted and ends.
    pub(super) async fn finish(self) {
        drop(self.latest);
        let _ = self.task.await;
    }
}

async fn keep(
    store: Arc<dyn OutboxStore>,
    mut seen: watch::Receiver<Option<Cursor>>,
    mut written: Option<Cursor>,
    stop: CancellationToken,
) {
    loop {
        let (ended, refresh) = tokio::select! {
            r = seen.changed() => (r.is_err(), false),
            () = tokio::time::sleep(REFRESH) => (false, true),
        };
        let latest = seen.borrow_and_update().clone();
        if let Some(cursor) = latest
            && (refresh || written.as_ref() != Some(&cursor))
        {
            save(store.as_ref(), &cursor).await;
            written = Some(cursor);
        }
        if ended {
            return;
        }
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}

async fn save(store: &dyn OutboxStore, cursor: &Cursor) {
    let stored = Cursor {
        saved_at: now_ms(),
        ..cursor.clone()
    };
    let value = match serde_json::to_string(&stored) {
        Ok(v) => v,
        Err(e) => {
            warn!(channel = "discord", error = %e, "cannot encode the gateway session");
            return;
        }
    };
    if let Err(e) = store.set_cursor("discord", NAME, &value).await {
        // A replica taking over resumes from an older event (the replay is
        // deduplicated) or, past the resume window, identifies afresh.
        warn!(channel = "discord", error = %e, "cannot store the gateway session");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(saved_at: i64) -> Cursor {
        Cursor {
            session_id: "abc123".into(),
            seq: 7,
            resume_url: "wss://gateway-us-east1-b.discord.gg".into(),
            bot_id: "42".into(),
            saved_at,
        }
    }

    #[test]
    fn a_recent_well_formed_session_is_resumed_and_an_old_or_odd_one_is_not() {
        let now = 1_800_000_000_000;
        assert_eq!(cursor(now - 10_000).unusable(now), None);
        // Another replica's clock a little ahead.
        assert_eq!(cursor(now + 2_000).unusable(now), None);
        let old = cursor(now - 301_000).unusable(now).unwrap_or_default();
        assert!(old.contains("301 s ago"), "{old}");
        assert!(cursor(0).unusable(now).is_some(), "no time stored");
        for url in [
            "",
            "https://gateway.discord.gg",
            "wss://",
            "wss://gate way",
            "not a url",
        ] {
            let c = Cursor {
                resume_url: url.into(),
                ..cursor(now)
            };
            assert!(c.unusable(now).is_some(), "{url:?} accepted");
        }
        for id in ["", "a b", "x\n"] {
            let c = Cursor {
                session_id: id.into(),
                ..cursor(now)
            };
            assert!(c.unusable(now).is_some(), "{id:?} accepted");
        }
        let c = Cursor {
            resume_url: "ws://127.0.0.1:4000/resume".into(),
            ..cursor(now)
        };
        assert_eq!(c.unusable(now), None);
    }

    #[test]
    fn the_stored_form_is_plain_json() {
        let json = serde_json::to_string(&cursor(5)).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"session_id":"abc123","seq":7,"resume_url":"wss://gateway-us-east1-b.discord.gg","bot_id":"42","saved_at":5}"#
        );
        let back: Result<Cursor, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(cursor(5)));
    }
}
