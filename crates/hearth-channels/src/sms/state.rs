//! What the SMS channel keeps in the store beside the outbox, as channel
//! state (`channel_cursors`, never pruned, copied with the store): which
//! numbers texted `STOP` (until `START`), and the short codes of
//! confirmations asked of a number.

use hearth_core::now_ms;
use hearth_runtime::surfaces::{OutboxStore, StoreError};
use sha2::{Digest, Sha256};

/// Letters and digits that cannot be mistaken for each other on a phone
/// keyboard (no 0/O, 1/I/L).
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Characters of a confirmation code.
pub(super) const CODE_LEN: usize = 5;

fn opt_out_key(number: &str) -> String {
    format!("optout:{number}")
}

fn code_key(number: &str, code: &str) -> String {
    format!("confirm:{number}:{code}")
}

/// True while `number` has texted `STOP` and not `START` since.
pub(super) async fn opted_out(store: &dyn OutboxStore, number: &str) -> Result<bool, StoreError> {
    Ok(store
        .cursor("sms", &opt_out_key(number))
        .await?
        .is_some_and(|v| v.starts_with("stop")))
}

/// Records `STOP` (or `START`) from `number`, with when.
pub(super) async fn set_opted_out(
    store: &dyn OutboxStore,
    number: &str,
    stopped: bool,
) -> Result<(), StoreError> {
    let word = if stopped { "stop" } else { "start" };
    store
        .set_cursor("sms", &opt_out_key(number), &format!("{word} {}", now_ms()))
        .await
}

/// The short code of the confirmation with `token`: the same every time
/// (a retried delivery sends the same code), and no clue to the token.
pub(super) fn confirm_code(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest
        .iter()
        .take(CODE_LEN)
        .map(|b| char::from(CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()]))
        .collect()
}

/// Remembers that `code`, texted by `number`, answers the confirmation
/// with `token`.
pub(super) async fn remember_code(
    store: &dyn OutboxStore,
    number: &str,
    code: &str,
    token: &str,
) -> Result<(), StoreError> {
    store
        .set_cursor("sms", &code_key(number, code), token)
        .await
}

/// The token `code` answers when `number` texts it, if it was sent to
/// that number and not used up.
pub(super) async fn code_token(
    store: &dyn OutboxStore,
    number: &str,
    code: &str,
) -> Result<Option<String>, StoreError> {
    Ok(store
        .cursor("sms", &code_key(number, code))
        .await?
        .filter(|t| !t.is_empty()))
}

/// Forgets `code` once its confirmation is answered or gone, so the token
/// does not stay in the store.
pub(super) async fn forget_code(
    store: &dyn OutboxStore,
    number: &str,
    code: &str,
) -> Result<(), StoreError> {
    store.set_cursor("sms", &code_key(number, code), "").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_short_stable_and_unambiguous() {
        let a = confirm_code("token-a");
        assert_eq!(a, confirm_code("token-a"));
        assert_ne!(a, confirm_code("token-b"));
        assert_eq!(a.len(), CODE_LEN);
        assert!(a.bytes().all(|b| CODE_ALPHABET.contains(&b)));
    }
}
