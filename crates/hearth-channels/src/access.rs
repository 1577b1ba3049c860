//! Who may talk to the assistant on a channel: users listed in the config,
//! users the owner approved through pairing, or anyone where the channel is
//! open. A stranger in a private conversation is offered a pairing code once
//! and gets no model call.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::records::outbox::{PairingLimits, PairingOutcome, PairingRecord};
use hearth_core::{Timestamp, now_ms};
use hearth_runtime::surfaces::AccessStore;

use crate::error::ChannelError;
use crate::payload::Payload;

/// How long a pairing code stays valid.
pub const PAIRING_TTL: Duration = Duration::from_secs(3600);
/// Pending pairing requests a channel keeps (one per user: asking again
/// while a code is pending sends nothing; after it expired, a new code
/// replaces it). A request beyond them replaces the oldest, so strangers
/// who keep asking cannot lock a newcomer out; the owner sees the most
/// recent ones.
pub const MAX_PENDING: u32 = 50;
/// How long a user whose request the owner denied is ignored (no new
/// code, no message). Shorter than the retention of channel records
/// (7 days), which keeps the denial this long.
pub const DENIED_COOLDOWN: Duration = Duration::from_secs(24 * 3600);
/// Letters and digits that cannot be mistaken for each other (no 0/O, 1/I/L).
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Characters in a pairing code.
pub const CODE_LEN: usize = 8;

/// What to do with a message from a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Let it through to the runtime.
    Allowed,
    /// A stranger: a pairing code was queued for them (durably).
    PairingOffered(PairingRecord),
    /// A stranger already told their code, or one the owner denied within
    /// [`DENIED_COOLDOWN`]: nothing is sent.
    Ignored,
}

/// One channel's access rules.
#[derive(Clone)]
pub struct Access {
    channel: &'static str,
    config_allowed: Arc<BTreeSet<String>>,
    open: bool,
    store: Arc<dyn AccessStore>,
}

impl Access {
    /// Rules for `channel`: `allowed` user keys from the config, and whether
    /// private conversations are open to anyone.
    pub fn new(
        channel: &'static str,
        allowed: impl IntoIterator<Item = String>,
        open: bool,
        store: Arc<dyn AccessStore>,
    ) -> Self {
        Self {
            channel,
            config_allowed: Arc::new(allowed.into_iter().collect()),
            open,
            store,
        }
    }

    /// User keys listed in the config.
    pub fn config_allowed(&self) -> impl Iterator<Item = &String> {
        self.config_allowed.iter()
    }

    /// True when `user_key` is listed in the config or was paired.
    pub async fn is_allowed(&self, user_key: &str) -> Result<bool, ChannelError> {
        if self.config_allowed.contains(user_key) {
            return Ok(true);
        }
        Ok(self.store.is_allowed(self.channel, user_key).await?)
    }

    /// Admits a private message from `user_key`, or offers pairing.
    /// `target` is where to tell them (their private conversation).
    pub async fn admit_private(
        &self,
        user_key: &str,
        display_name: &str,
        target: &str,
    ) -> Result<Admission, ChannelError> {
        if self.open || self.is_allowed(user_key).await? {
            return Ok(Admission::Allowed);
        }
        let now = now_ms();
        let rec = PairingRecord {
            code: new_code()?,
            channel: self.channel.to_owned(),
            user_key: user_key.to_owned(),
            display_name: shown_name(display_name),
            target: target.to_owned(),
            requested_at: now,
            expires_at: now + ttl_ms(),
        };
        let notice = Payload::notice(pairing_notice(&rec.code)).to_json();
        let limits = PairingLimits {
            max_pending: MAX_PENDING,
            denied_cooldown_ms: millis(DENIED_COOLDOWN),
        };
        match self.store.request_pairing(rec, limits, notice).await? {
            PairingOutcome::Created(rec) => {
                tracing::info!(channel = self.channel, user_key = %rec.user_key, "pairing requested");
                Ok(Admission::PairingOffered(rec))
            }
            PairingOutcome::Existing(_) => Ok(Admission::Ignored),
            PairingOutcome::CoolingDown { until } => {
                tracing::debug!(channel = self.channel, user_key = %user_key, until = %hearth_core::rfc3339(until), "pairing request of a denied user ignored");
                Ok(Admission::Ignored)
            }
        }
    }
}

/// A stranger's chosen name as the owner is shown it: at most 64
/// characters, each control character (an escape sequence's start, a
/// newline, a NUL) a space, since the name reaches the owner's terminal and
/// every store.
fn shown_name(display_name: &str) -> String {
    let name: String = display_name
        .chars()
        .take(64)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    name.trim().to_owned()
}

fn ttl_ms() -> Timestamp {
    millis(PAIRING_TTL)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// What a stranger is told.
pub fn pairing_notice(code: &str) -> String {
    format!(
        "This assistant is private. To talk to it, ask its owner to approve your pairing code:\n\n{code}\n\n(hearth pair approve {code}). The code expires in one hour."
    )
}

/// What an approved user is told.
pub const APPROVED_NOTICE: &str = "You are approved: this assistant now answers your messages.";

/// A fresh pairing code.
pub fn new_code() -> Result<String, ChannelError> {
    let mut bytes = [0u8; CODE_LEN];
    getrandom::fill(&mut bytes).map_err(|e| ChannelError::Platform {
        channel: "pairing",
        method: "random code".into(),
        detail: e.to_string(),
    })?;
    Ok(bytes
        .iter()
        .map(|b| char::from(CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()]))
        .collect())
}

/// True when `s` could be a pairing code (so bad input gets a clear 404).
pub fn looks_like_code(s: &str) -> bool {
    s.len() == CODE_LEN && s.bytes().all(|b| CODE_ALPHABET.contains(&b))
}

#[cfg(test)]
mod tests {
    use hearth_store::{SqliteStore, Store};

    use super::*;

    #[test]
    fn codes_are_eight_unambiguous_characters() {
        let a = new_code().unwrap();
        let b = new_code().unwrap();
        assert_eq!(a.len(), CODE_LEN);
        assert!(looks_like_code(&a) && looks_like_code(&b));
        assert_ne!(a, b);
        assert!(!a.contains(['0', 'O', '1', 'I', 'L']));
        assert!(!looks_like_code("ABCDEFG0"));
        assert!(!looks_like_code("abcdefgh"));
        assert!(pairing_notice(&a).contains(&a));
    }

    fn access(store: &Arc<dyn Store>) -> Access {
        Access::new("telegram", Vec::new(), false, store.clone())
    }

    async fn ask(access: &Access, user: u32) -> Admission {
        let key = format!("telegram:user:{user}");
        access
            .admit_private(&key, "Someone", &user.to_string())
            .await
            .unwrap()
    }

    async fn queued(store: &Arc<dyn Store>) -> usize {
        store.list_outbox(None, 1_000).await.unwrap().len()
    }

    /// Three strangers holding a request each (renewing it every hour) once
    /// took every place a channel had; now a newcomer still gets a code, and
    /// a crowd of strangers leaves the channel its most recent requests.
    #[tokio::test]
    async fn strangers_holding_requests_do_not_lock_a_newcomer_out() {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
        let access = access(&store);
        for user in 1..=3 {
            assert!(matches!(
                ask(&access, user).await,
                Admission::PairingOffered(_)
            ));
        }
        assert!(
            matches!(ask(&access, 4).await, Admission::PairingOffered(_)),
            "a fourth stranger was refused a code"
        );
        // Asking again while a code is pending sends nothing more.
        assert_eq!(ask(&access, 4).await, Admission::Ignored);
        assert_eq!(queued(&store).await, 4);

        for user in 5..=(MAX_PENDING + 10) {
            assert!(matches!(
                ask(&access, user).await,
                Admission::PairingOffered(_)
            ));
        }
        let pending = store.pending_pairings(now_ms()).await.unwrap();
        assert_eq!(pending.len(), MAX_PENDING as usize);
        assert!(
            pending
                .iter()
                .any(|p| p.user_key == format!("telegram:user:{}", MAX_PENDING + 10)),
            "the newest request is kept"
        );
        assert!(
            !pending.iter().any(|p| p.user_key == "telegram:user:1"),
            "the oldest request gave way"
        );
    }

    /// A stranger chooses their own name, and the owner reads it in a
    /// terminal (`hearth pair list`): a name holding escape sequences once
    /// reached it as they were (a title set, the screen cleared, on some
    /// terminals the clipboard written), and a NUL failed the request on
    /// PostgreSQL, whose text cannot hold one.
    #[tokio::test]
    async fn a_strangers_name_is_kept_without_control_characters() {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
        let access = access(&store);
        let name = "Eve\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\nApproved\0!\t";
        let Admission::PairingOffered(rec) = access
            .admit_private("telegram:user:9", name, "9")
            .await
            .unwrap()
        else {
            panic!("no code offered");
        };
        assert_eq!(rec.display_name, "Eve ]52;c;aGk=  [2J Approved !");
        let pending = store.pending_pairings(now_ms()).await.unwrap();
        assert_eq!(pending[0].display_name, rec.display_name);
        // Only control characters go: any other letter stays.
        let Admission::PairingOffered(rec) = access
            .admit_private("telegram:user:10", "Zoë 山田 🙂", "10")
            .await
            .unwrap()
        else {
            panic!("no code offered");
        };
        assert_eq!(rec.display_name, "Zoë 山田 🙂");
    }

    /// A user the owner turned down is not offered a new code (nor sent
    /// anything) for a day.
    #[tokio::test]
    async fn a_denied_user_cannot_ask_again_during_the_cool_down() {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
        let access = access(&store);
        let Admission::PairingOffered(rec) = ask(&access, 7).await else {
            panic!("no code offered");
        };
        assert!(
            store
                .deny_pairing(&rec.code, now_ms())
                .await
                .unwrap()
                .is_some()
        );
        let before = queued(&store).await;
        assert_eq!(
            ask(&access, 7).await,
            Admission::Ignored,
            "asked again at once"
        );
        assert_eq!(
            queued(&store).await,
            before,
            "a denied user was sent something"
        );
        assert!(store.pending_pairings(now_ms()).await.unwrap().is_empty());
        // Someone else is not affected.
        assert!(matches!(
            ask(&access, 8).await,
            Admission::PairingOffered(_)
        ));
    }
}
