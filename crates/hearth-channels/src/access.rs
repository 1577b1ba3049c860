//! Who may talk to the assistant on a channel: users listed in the config,
//! users the owner approved through pairing, or anyone where the channel is
//! open. A stranger in a private conversation is offered a pairing code once
//! and gets no model call.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::{Timestamp, now_ms};
use hearth_store::{PairingOutcome, PairingRecord, Store};

use crate::error::ChannelError;
use crate::payload::Payload;

/// How long a pairing code stays valid.
pub const PAIRING_TTL: Duration = Duration::from_secs(3600);
/// Pending pairing requests per channel; more strangers are told nothing.
pub const MAX_PENDING: u32 = 3;
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
    /// A stranger already told their code, or one the channel has no room
    /// for: nothing is sent.
    Ignored,
}

/// One channel's access rules.
#[derive(Clone)]
pub struct Access {
    channel: &'static str,
    config_allowed: Arc<BTreeSet<String>>,
    open: bool,
    store: Arc<dyn Store>,
}

impl Access {
    /// Rules for `channel`: `allowed` user keys from the config, and whether
    /// private conversations are open to anyone.
    pub fn new(
        channel: &'static str,
        allowed: impl IntoIterator<Item = String>,
        open: bool,
        store: Arc<dyn Store>,
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
            display_name: display_name.chars().take(64).collect(),
            target: target.to_owned(),
            requested_at: now,
            expires_at: now + ttl_ms(),
        };
        let notice = Payload::notice(pairing_notice(&rec.code)).to_json();
        match self.store.request_pairing(rec, MAX_PENDING, notice).await? {
            PairingOutcome::Created(rec) => {
                tracing::info!(channel = self.channel, user_key = %rec.user_key, "pairing requested");
                Ok(Admission::PairingOffered(rec))
            }
            PairingOutcome::Existing(_) | PairingOutcome::TooMany => Ok(Admission::Ignored),
        }
    }
}

fn ttl_ms() -> Timestamp {
    i64::try_from(PAIRING_TTL.as_millis()).unwrap_or(i64::MAX)
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
}
