//! Confirmations of write-class tool calls: tokens, and the hub through which
//! an answer wakes the run that waits for it.
//!
//! The store is the source of truth (a token's hash, its state, its expiry);
//! the hub only holds what must not be stored (the plaintext token, shown in
//! envelopes until the process ends) and wakes waiting runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Notify;

/// How long a confirmation stays answerable.
pub const CONFIRMATION_TTL: Duration = Duration::from_secs(5 * 60);

/// Random bytes per token: 160 bits, above the 128 asked for, and a whole
/// number of base32 characters (32).
const TOKEN_BYTES: usize = 20;

/// RFC 4648 base32 alphabet, lower-cased: tokens are typed back by people
/// (`confirm <token>`), and lower case reads better in chat.
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A new confirmation token: 160 random bits in base32.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(base32(&bytes))
}

/// The stored form of a token: SHA-256, hex.
pub fn hash_token(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    hex
}

/// True when `s` could be a token (so `confirm <s>` is worth looking up).
pub fn looks_like_token(s: &str) -> bool {
    s.len() == TOKEN_BYTES * 8 / 5 && s.bytes().all(|b| BASE32.contains(&b))
}

/// Unpadded base32 of a byte string whose length is a multiple of 5.
fn base32(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 8 / 5);
    for chunk in bytes.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        for i in (0..8).rev() {
            out.push(char::from(BASE32[((n >> (i * 5)) & 31) as usize]));
        }
    }
    out
}

/// Runs of this process waiting for an answer.
#[derive(Default)]
pub struct ConfirmationHub {
    waiting: Mutex<HashMap<String, Waiting>>,
}

struct Waiting {
    thread_key: String,
    token: Option<String>,
    wake: Arc<Notify>,
}

impl ConfirmationHub {
    fn waiting(&self) -> MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `run_id` as waiting; `token` is the plaintext when this
    /// process made it. Returns what wakes it; the entry goes when the
    /// returned guard drops.
    pub(crate) fn register(
        self: &Arc<Self>,
        run_id: &str,
        thread_key: &str,
        token: Option<String>,
    ) -> WaitGuard {
        let wake = Arc::new(Notify::new());
        self.waiting().insert(
            run_id.to_owned(),
            Waiting {
                thread_key: thread_key.to_owned(),
                token,
                wake: wake.clone(),
            },
        );
        WaitGuard {
            hub: self.clone(),
            run_id: run_id.to_owned(),
            wake,
        }
    }

    /// The plaintext token of the run's pending confirmation, while this
    /// process knows it.
    /// Sets the plaintext token shown in `run_id`'s envelope while it waits.
    pub(crate) fn set_token(&self, run_id: &str, token: Option<String>) {
        if let Some(w) = self.waiting().get_mut(run_id) {
            w.token = token;
        }
    }

    pub fn token(&self, run_id: &str) -> Option<String> {
        self.waiting().get(run_id).and_then(|w| w.token.clone())
    }

    /// Runs of `thread_key` waiting here.
    pub fn waiting_on(&self, thread_key: &str) -> Vec<String> {
        self.waiting()
            .iter()
            .filter(|(_, w)| w.thread_key == thread_key)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// True when some run of `thread_key` waits here.
    pub fn any_waiting_on(&self, thread_key: &str) -> bool {
        self.waiting().values().any(|w| w.thread_key == thread_key)
    }

    /// Wakes the run so it reads its confirmation's new state.
    pub fn wake(&self, run_id: &str) {
        if let Some(w) = self.waiting().get(run_id) {
            w.wake.notify_one();
        }
    }
}

/// A run's registration in the hub; dropping it (answered, cancelled, or the
/// run stopped) removes the entry.
pub(crate) struct WaitGuard {
    hub: Arc<ConfirmationHub>,
    run_id: String,
    pub(crate) wake: Arc<Notify>,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        self.hub.waiting().remove(&self.run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_base32() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(looks_like_token(&a));
        assert!(!looks_like_token("hello"));
        assert!(!looks_like_token(&a.to_uppercase()));
    }

    #[test]
    fn base32_matches_rfc4648() {
        // RFC 4648 test vector "fooba" -> "MZXW6YTB".
        assert_eq!(base32(b"fooba"), "mzxw6ytb");
        assert_eq!(base32(&[0u8; 5]), "aaaaaaaa");
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[tokio::test]
    async fn hub_keeps_tokens_while_waiting_and_wakes() {
        let hub = Arc::new(ConfirmationHub::default());
        let guard = hub.register("run_1", "api:t", Some("tok".into()));
        assert_eq!(hub.token("run_1").as_deref(), Some("tok"));
        assert_eq!(hub.waiting_on("api:t"), vec!["run_1".to_owned()]);
        let notified = guard.wake.notified();
        hub.wake("run_1");
        notified.await;
        drop(guard);
        assert_eq!(hub.token("run_1"), None);
        assert!(!hub.any_waiting_on("api:t"));
    }
}
