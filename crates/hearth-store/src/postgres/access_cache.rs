//! Who may do what (API tokens and grants), held between reads while the
//! replica hears of every change to it.
//!
//! Every request asks about tokens (a loopback server without any is open;
//! a request with a token is answered as its holder), and every run reads
//! its user's grants when it starts. On PostgreSQL each question was a round
//! trip, most of a run's reads. Both change seldom (`hearth token`, `hearth
//! grants`, a confirmation answered "always", from any process on any
//! machine), and every change notifies `hearth_access` (statement triggers,
//! migration 0020), so a replica holds the count of live tokens, the holders
//! and the grants it read, and drops them all when told.
//!
//! What is held is used only while a listening connection is up: a change
//! made while none is up would go unheard. Each notification, and each time
//! a listener connects or is lost, moves the epoch; a value read from the
//! database is kept only when the epoch did not move while it was read, and
//! used only under the epoch it was kept in. So a change is seen by this
//! replica once its notification arrives (a request or run that comes in
//! between is answered as if it came just before the change, as one in
//! flight at the change is). A change made by this replica is seen by its
//! next read, without waiting to be told.
//!
//! Nothing is held longer than [`MAX_AGE`] either: a listening connection
//! can stop hearing without being told so (an idle TCP connection dropped
//! by a firewall or a NAT sends nothing back), and a revoked token must not
//! keep working on a replica until the connection is found dead. So a
//! revocation takes effect within the notification's delivery, and within a
//! second at worst. Under load that is one read of each a second, instead of
//! one per request and per run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::records::{Grant, TokenHolder};

/// Entries kept at most in each map; past it the map is emptied (a new read
/// each costs one round trip, and a replica sees few tokens and users at a
/// time).
const MAX_ENTRIES: usize = 1024;

/// How long anything is held at most, heard of or not.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(1);

/// What this replica holds, and whether it may use it.
#[derive(Debug, Default)]
pub(crate) struct AccessCache {
    /// Moves on every change heard and every listener connected or lost.
    epoch: AtomicU64,
    /// Listening connections up now; nothing held is used without one.
    listening: AtomicUsize,
    held: Mutex<Held>,
}

/// What was read under one epoch, since `since`.
#[derive(Debug)]
struct Held {
    epoch: u64,
    since: Instant,
    count: Option<u64>,
    holders: HashMap<String, TokenHolder>,
    /// By [`grants_key`].
    grants: HashMap<String, Vec<Grant>>,
}

impl Held {
    fn new(epoch: u64) -> Self {
        Held {
            epoch,
            since: Instant::now(),
            count: None,
            holders: HashMap::new(),
            grants: HashMap::new(),
        }
    }

    /// Whether what is held may be used under `epoch`.
    fn current(&self, epoch: u64) -> bool {
        self.epoch == epoch && self.since.elapsed() < MAX_AGE
    }
}

impl Default for Held {
    fn default() -> Self {
        Held::new(0)
    }
}

/// The key of the grants of `subjects` in `scopes` (ids hold no NUL).
pub(crate) fn grants_key(subjects: &[String], scopes: &[String]) -> String {
    let mut key = subjects.join("\0");
    key.push('\u{1}');
    key.push_str(&scopes.join("\0"));
    key
}

impl AccessCache {
    /// The epoch to read under: `None` when what is read may not be kept
    /// (no listener is up).
    pub(crate) fn read_at(&self) -> Option<u64> {
        (self.listening.load(Ordering::Acquire) > 0).then(|| self.epoch.load(Ordering::Acquire))
    }

    /// What `pick` finds in what is held for the current epoch.
    fn find<T>(&self, pick: impl FnOnce(&Held) -> Option<T>) -> Option<T> {
        let epoch = self.read_at()?;
        let held = self.held.lock().ok()?;
        if !held.current(epoch) {
            return None;
        }
        pick(&held)
    }

    /// The count of live tokens, when held.
    pub(crate) fn count(&self) -> Option<u64> {
        self.find(|held| held.count)
    }

    /// The holder of the token hashed `hash_hex`, when held (an unknown
    /// token is never held: it is asked of the database).
    pub(crate) fn holder(&self, hash_hex: &str) -> Option<TokenHolder> {
        self.find(|held| held.holders.get(hash_hex).cloned())
    }

    /// The grants under `key` ([`grants_key`]), when held.
    pub(crate) fn grants(&self, key: &str) -> Option<Vec<Grant>> {
        self.find(|held| held.grants.get(key).cloned())
    }

    /// Keeps `count`, read after [`read_at`](Self::read_at) gave `read_at`.
    pub(crate) fn keep_count(&self, read_at: Option<u64>, count: u64) {
        self.keep(read_at, |held| held.count = Some(count));
    }

    /// Keeps the holder of `hash_hex`, read after `read_at`.
    pub(crate) fn keep_holder(&self, read_at: Option<u64>, hash_hex: &str, holder: &TokenHolder) {
        self.keep(read_at, |held| {
            bounded(&mut held.holders).insert(hash_hex.to_owned(), holder.clone());
        });
    }

    /// Keeps the grants under `key`, read after `read_at`.
    pub(crate) fn keep_grants(&self, read_at: Option<u64>, key: String, grants: &[Grant]) {
        self.keep(read_at, |held| {
            bounded(&mut held.grants).insert(key, grants.to_vec());
        });
    }

    fn keep(&self, read_at: Option<u64>, put: impl FnOnce(&mut Held)) {
        let Some(read_at) = read_at else { return };
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        // Checked under the lock: a change heard after this check moves the
        // epoch past `read_at`, so what is put here is not used.
        if self.read_at() != Some(read_at) {
            return;
        }
        if !held.current(read_at) {
            *held = Held::new(read_at);
        }
        put(&mut held);
    }

    /// A token or a grant was created, changed or deleted somewhere.
    pub(crate) fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// A listening connection is up: changes from now on are heard. The
    /// returned guard says when it is lost.
    pub(crate) fn listening(self: &Arc<Self>) -> Listening {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.listening.fetch_add(1, Ordering::AcqRel);
        Listening(Arc::clone(self))
    }
}

/// `map`, emptied when full.
fn bounded<V>(map: &mut HashMap<String, V>) -> &mut HashMap<String, V> {
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map
}

/// One listening connection being up; dropped when it is lost.
pub(crate) struct Listening(Arc<AccessCache>);

impl Drop for Listening {
    fn drop(&mut self) {
        // First: a reader that sees the count still up must also see the
        // epoch moved.
        self.0.epoch.fetch_add(1, Ordering::AcqRel);
        self.0.listening.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(name: &str) -> TokenHolder {
        TokenHolder {
            name: name.to_owned(),
            user_key: None,
        }
    }

    fn grant(capability: &str) -> Grant {
        Grant {
            subject: "user:1".into(),
            capability: capability.into(),
            scope: "global".into(),
            granted_at: 1,
            granted_by: "user:1".into(),
        }
    }

    #[test]
    fn nothing_is_held_without_a_listener() {
        let cache = Arc::new(AccessCache::default());
        cache.keep_count(cache.read_at(), 2);
        cache.keep_holder(cache.read_at(), "h", &holder("ci"));
        cache.keep_grants(cache.read_at(), "k".into(), &[grant("shell")]);
        assert_eq!(cache.count(), None);
        assert_eq!(cache.holder("h"), None);
        assert_eq!(cache.grants("k"), None);
    }

    #[test]
    fn what_was_read_is_held_until_a_change_is_heard() {
        let cache = Arc::new(AccessCache::default());
        let up = cache.listening();
        cache.keep_count(cache.read_at(), 2);
        cache.keep_holder(cache.read_at(), "h", &holder("ci"));
        cache.keep_grants(cache.read_at(), "k".into(), &[grant("shell")]);
        cache.keep_grants(cache.read_at(), "none".into(), &[]);
        assert_eq!(cache.count(), Some(2));
        assert_eq!(cache.holder("h"), Some(holder("ci")));
        assert_eq!(cache.holder("other"), None);
        assert_eq!(cache.grants("k"), Some(vec![grant("shell")]));
        assert_eq!(cache.grants("none"), Some(Vec::new()));
        assert_eq!(cache.grants("other"), None);
        cache.changed();
        assert_eq!(cache.count(), None);
        assert_eq!(cache.holder("h"), None);
        assert_eq!(cache.grants("k"), None);
        drop(up);
    }

    #[test]
    fn a_value_read_across_a_change_is_not_kept() {
        let cache = Arc::new(AccessCache::default());
        let _up = cache.listening();
        let read_at = cache.read_at();
        cache.changed();
        cache.keep_count(read_at, 0);
        cache.keep_grants(read_at, "k".into(), &[]);
        assert_eq!(cache.count(), None);
        assert_eq!(cache.grants("k"), None);
    }

    #[test]
    fn a_lost_listener_drops_what_is_held() {
        let cache = Arc::new(AccessCache::default());
        let first = cache.listening();
        let second = cache.listening();
        cache.keep_count(cache.read_at(), 1);
        // One listener still hears every change.
        drop(second);
        cache.keep_count(cache.read_at(), 1);
        assert_eq!(cache.count(), Some(1));
        drop(first);
        assert_eq!(cache.count(), None);
        assert_eq!(cache.read_at(), None);
        // Connected again: what was held before is not used.
        let _again = cache.listening();
        assert_eq!(cache.count(), None);
    }

    #[test]
    fn nothing_is_held_past_its_age() {
        let cache = Arc::new(AccessCache::default());
        let _up = cache.listening();
        cache.keep_count(cache.read_at(), 3);
        assert_eq!(cache.count(), Some(3));
        if let Ok(mut held) = cache.held.lock()
            && let Some(before) = held.since.checked_sub(MAX_AGE)
        {
            held.since = before;
        }
        assert_eq!(cache.count(), None);
        cache.keep_count(cache.read_at(), 4);
        assert_eq!(cache.count(), Some(4));
    }

    #[test]
    fn entries_are_bounded() {
        let cache = Arc::new(AccessCache::default());
        let _up = cache.listening();
        for i in 0..=MAX_ENTRIES {
            cache.keep_holder(cache.read_at(), &format!("h{i}"), &holder("t"));
        }
        let held = cache.held.lock().map(|h| h.holders.len()).unwrap_or(0);
        assert!(held <= MAX_ENTRIES, "{held} holders held");
        assert_eq!(cache.holder(&format!("h{MAX_ENTRIES}")), Some(holder("t")));
    }

    #[test]
    fn grants_keys_keep_subjects_and_scopes_apart() {
        let a = grants_key(&["a".into(), "b".into()], &["c".into()]);
        let b = grants_key(&["a".into()], &["b".into(), "c".into()]);
        assert_ne!(a, b);
    }
}
