//! Summaries of client-supplied history. A client of the OpenAI surface
//! resends the whole conversation with every request, and hearth stores no
//! summary of it; without a cache each request would summarize the same
//! old turns again, paying for it every time.
//!
//! A summary is kept in memory under a SHA-256 of exactly the supplied
//! messages it replaces (every field of each, in order), the user who sent
//! them and the model that compacts for the run. A later request whose
//! history starts with the same messages takes the summary instead of them,
//! and compacts on from there if it must.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use hearth_core::{Content, Message, Role};
use sha2::{Digest, Sha256};

/// Summaries kept at most; the one used least recently goes first.
const CAPACITY: usize = 256;

/// A content hash.
type Key = [u8; 32];

/// Summaries of supplied history by the hash of what they replace.
#[derive(Default)]
pub(super) struct SummaryCache {
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    /// Summary and when it was last used (a counter).
    map: HashMap<Key, (String, u64)>,
    clock: u64,
}

impl SummaryCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self, key: &Key) -> Option<String> {
        let mut e = self.lock();
        e.clock += 1;
        let now = e.clock;
        e.map.get_mut(key).map(|(summary, used)| {
            *used = now;
            summary.clone()
        })
    }

    fn put(&self, key: Key, summary: String) {
        let mut e = self.lock();
        e.clock += 1;
        let now = e.clock;
        if e.map.len() >= CAPACITY && !e.map.contains_key(&key) {
            let oldest = e
                .map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                e.map.remove(&oldest);
            }
        }
        e.map.insert(key, (summary, now));
    }

    /// The summary replacing the longest run of whole turns at the start of
    /// `history`, if one is cached: it and the number of messages it
    /// replaces. `prefixes` are `history`'s (see [`Prefixes::of`]).
    pub(super) fn longest(&self, prefixes: &Prefixes) -> Option<(String, usize)> {
        prefixes
            .bounds
            .iter()
            .rev()
            .find_map(|(at, key)| self.get(key).map(|s| (s, *at)))
    }

    /// Keeps `summary` as the one replacing the first `covered` messages of
    /// the history `prefixes` describe (nothing when `covered` is not where
    /// a turn starts).
    pub(super) fn remember(&self, prefixes: &Prefixes, covered: usize, summary: &str) {
        if let Some((_, key)) = prefixes.bounds.iter().find(|(at, _)| *at == covered) {
            self.put(*key, summary.to_owned());
        }
    }
}

/// The hashes of a supplied history's leading whole turns.
pub(super) struct Prefixes {
    /// (n, the key of the first n messages), for each n where a turn
    /// starts (a user message) and for the whole history, ascending.
    bounds: Vec<(usize, Key)>,
    /// Messages of the history the run's summary replaces so far.
    pub(super) covered: usize,
}

impl Prefixes {
    /// The prefixes of `history` as `user` supplied it for a run compacted
    /// by `model`: a summary is never shared across users or models.
    pub(super) fn of(user: &str, model: &str, history: &[Message]) -> Self {
        let mut h = Sha256::new();
        field(&mut h, user.as_bytes());
        field(&mut h, model.as_bytes());
        let mut bounds = Vec::new();
        for (i, m) in history.iter().enumerate() {
            if i > 0 && m.role == Role::User {
                bounds.push((i, h.clone().finalize().into()));
            }
            message(&mut h, m);
        }
        if !history.is_empty() {
            bounds.push((history.len(), h.finalize().into()));
        }
        Self { bounds, covered: 0 }
    }
}

/// Hashes one message, every field length-prefixed so no two messages (or
/// runs of messages) hash alike by running into each other.
fn message(h: &mut Sha256, m: &Message) {
    h.update([match m.role {
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    }]);
    h.update((m.content.len() as u64).to_le_bytes());
    for c in &m.content {
        match c {
            Content::Text { text } => {
                h.update([1]);
                field(h, text.as_bytes());
            }
            Content::Thinking {
                text,
                signature,
                provider,
            } => {
                h.update([2]);
                field(h, text.as_bytes());
                optional(h, signature.as_deref());
                optional(h, provider.as_deref());
            }
            Content::ToolCall {
                id,
                name,
                arguments,
            } => {
                h.update([3]);
                field(h, id.as_bytes());
                field(h, name.as_bytes());
                field(h, arguments.as_bytes());
            }
            Content::ToolResult { call_id, output } => {
                h.update([4]);
                field(h, call_id.as_bytes());
                field(h, output.as_bytes());
            }
        }
    }
}

fn optional(h: &mut Sha256, value: Option<&str>) {
    match value {
        Some(v) => {
            h.update([1]);
            field(h, v.as_bytes());
        }
        None => h.update([0]),
    }
}

fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(texts: &[&str]) -> Vec<Message> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                Message::text(role, *t)
            })
            .collect()
    }

    #[test]
    fn the_longest_cached_prefix_of_whole_turns_is_found() {
        let cache = SummaryCache::default();
        let h = turns(&["a", "b", "c", "d", "e", "f"]);
        let p = Prefixes::of("u", "p/m", &h);
        let at: Vec<usize> = p.bounds.iter().map(|(n, _)| *n).collect();
        assert_eq!(at, [2, 4, 6], "where turns start, and the whole");
        assert_eq!(cache.longest(&p), None);
        cache.remember(&p, 2, "s2");
        cache.remember(&p, 3, "not a turn boundary");
        cache.remember(&p, 4, "s4");
        assert_eq!(cache.longest(&p), Some(("s4".into(), 4)));
        // A longer history that starts the same finds the same summary.
        let longer = turns(&["a", "b", "c", "d", "e", "f", "g", "h"]);
        assert_eq!(
            cache.longest(&Prefixes::of("u", "p/m", &longer)),
            Some(("s4".into(), 4))
        );
    }

    #[test]
    fn a_summary_is_not_shared_by_other_content_users_or_models() {
        let cache = SummaryCache::default();
        let h = turns(&["a", "b", "c", "d"]);
        cache.remember(&Prefixes::of("u", "p/m", &h), 2, "s");
        for (user, model, texts) in [
            ("v", "p/m", ["a", "b", "c", "d"]),
            ("u", "p/n", ["a", "b", "c", "d"]),
            ("u", "p/m", ["a", "B", "c", "d"]),
            ("u", "p/m", ["ab", "", "c", "d"]),
        ] {
            let p = Prefixes::of(user, model, &turns(&texts));
            assert_eq!(cache.longest(&p), None, "{user} {model} {texts:?}");
        }
    }

    #[test]
    fn the_cache_is_bounded_and_keeps_what_is_used() {
        let cache = SummaryCache::default();
        let h = turns(&["a", "b"]);
        let first = Prefixes::of("user 0", "p/m", &h);
        cache.remember(&first, 2, "s0");
        for i in 1..CAPACITY + 10 {
            // The first one keeps being used, so it stays.
            assert!(cache.longest(&first).is_some(), "{i}");
            cache.remember(&Prefixes::of(&format!("user {i}"), "p/m", &h), 2, "s");
        }
        assert_eq!(cache.lock().map.len(), CAPACITY);
        assert!(cache.longest(&first).is_some());
        let evicted = Prefixes::of("user 1", "p/m", &h);
        assert_eq!(cache.longest(&evicted), None);
    }
}
