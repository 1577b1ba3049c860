//! The compact vectors of the users searched by meaning, held between
//! searches, so a search over 10^5 facts scores them where they lie instead
//! of reading 40 MB of rows out of SQLite each time (BENCHMARKS.md: of a
//! 39 ms search in the store, the scoring is under a third).
//!
//! Never stale: triggers count every change of a user's rows in
//! `memory_vectors` (`memory_vector_versions`, migration 25), and a search
//! reads that count before it reads anything else. What is held is used only
//! when it was read at the count the search sees. Rows read after the count
//! can only be newer than it, never older, so a held copy is at worst
//! replaced once more than needed.
//!
//! A change this process writes does not cost a read of the whole user: the
//! write reads the count before and after its change, in its transaction,
//! and once committed moves a copy held at the count before to the count
//! after, with the one vector changed in place ([`VectorCache::apply`]).
//! Every other change (another process on the file, a purge) is seen by its
//! count, as before.
//!
//! Bounded by `[memory] vector_cache_mb` (0 holds nothing), as on
//! PostgreSQL; whole users are evicted, the least recently searched first.
//! Empty until someone searches by meaning: an idle server holds nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The default bound, as on PostgreSQL: a user of 10^5 facts embedded in 384
/// dimensions takes about 40 MB.
pub(super) const DEFAULT_VECTOR_CACHE_BYTES: usize = 64 << 20;

/// Bytes charged for each held vector besides its bytes (its entry).
const ENTRY_COST: usize = std::mem::size_of::<Entry>();

/// Bytes charged for each held user besides its vectors (map slot, keys).
const USER_OVERHEAD: usize = 256;

/// A user-wide vector's thread.
const USER_WIDE: u32 = u32::MAX;

/// A change of one user's vectors that a write of this process made.
#[derive(Debug)]
pub(super) enum Change<'a> {
    /// Memory `id`, in `thread` (none: user-wide), has `bytes` as its
    /// compact vector of `model`.
    Upsert {
        id: i64,
        thread: Option<&'a str>,
        model: &'a str,
        bytes: &'a [u8],
    },
    /// Memory `id` has no vector any more.
    Remove { id: i64 },
}

/// One held vector: its memory, its thread (an index into
/// [`Held::threads`], or [`USER_WIDE`]) and where its bytes end.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: i64,
    thread: u32,
    end: u32,
}

/// One user's compact vectors of one model, as read at `version`.
#[derive(Debug, Clone)]
pub(super) struct Held {
    version: i64,
    entries: Vec<Entry>,
    threads: Vec<String>,
    bytes: Vec<u8>,
}

impl Held {
    /// Calls `f` with the id and compact bytes of each vector a search in
    /// `thread` sees: the user-wide ones and that thread's.
    pub(super) fn each_in_scope(&self, thread: Option<&str>, mut f: impl FnMut(i64, &[u8])) {
        let wanted = thread.and_then(|t| self.threads.iter().position(|h| h == t));
        let mut start = 0;
        for e in &self.entries {
            let end = e.end as usize;
            let seen = e.thread == USER_WIDE || wanted.is_some_and(|w| w as u32 == e.thread);
            if seen && let Some(bytes) = self.bytes.get(start..end) {
                f(e.id, bytes);
            }
            start = end;
        }
    }

    /// The index of the thread `thread` in [`Held::threads`], added when
    /// new; `None` past `u32::MAX` threads.
    fn thread_index(&mut self, thread: Option<&str>) -> Option<u32> {
        let Some(t) = thread else {
            return Some(USER_WIDE);
        };
        match self.threads.iter().position(|h| h == t) {
            Some(i) => u32::try_from(i).ok(),
            None => {
                let i = u32::try_from(self.threads.len()).ok()?;
                self.threads.push(t.to_owned());
                Some(i)
            }
        }
    }

    /// Removes memory `id`'s vector, when held.
    fn remove(&mut self, id: i64) {
        let at = self.entries.partition_point(|e| e.id < id);
        if self.entries.get(at).is_none_or(|e| e.id != id) {
            return;
        }
        let start = self.start_of(at);
        let end = self.entries[at].end as usize;
        self.bytes.drain(start..end);
        self.entries.remove(at);
        let len = (end - start) as u32;
        for e in &mut self.entries[at..] {
            e.end -= len;
        }
    }

    /// Sets memory `id`'s vector in `thread` to `bytes`, where a read of
    /// the table would put it (in the order of the ids): in place when held
    /// with as many bytes. Whether it could (`false`: past `u32` bytes or
    /// threads).
    fn upsert(&mut self, id: i64, thread: Option<&str>, bytes: &[u8]) -> bool {
        let Some(thread) = self.thread_index(thread) else {
            return false;
        };
        let at = self.entries.partition_point(|e| e.id < id);
        if self.entries.get(at).is_some_and(|e| e.id == id) {
            let start = self.start_of(at);
            let end = self.entries[at].end as usize;
            if end - start == bytes.len() {
                self.bytes[start..end].copy_from_slice(bytes);
                self.entries[at].thread = thread;
                return true;
            }
            self.remove(id);
        }
        let Ok(len) = u32::try_from(bytes.len()) else {
            return false;
        };
        if u32::try_from(self.bytes.len() + bytes.len()).is_err() {
            return false;
        }
        let start = self.start_of(at);
        self.bytes.splice(start..start, bytes.iter().copied());
        for e in &mut self.entries[at..] {
            e.end += len;
        }
        self.entries.insert(
            at,
            Entry {
                id,
                thread,
                end: start as u32 + len,
            },
        );
        true
    }

    /// Where the bytes of the entry at `at` start.
    fn start_of(&self, at: usize) -> usize {
        at.checked_sub(1)
            .and_then(|p| self.entries.get(p))
            .map_or(0, |e| e.end as usize)
    }

    fn cost(&self) -> usize {
        let threads: usize = self.threads.iter().map(String::len).sum();
        self.bytes.len() + self.entries.len() * ENTRY_COST + threads + USER_OVERHEAD
    }
}

/// Collects a user's vectors while they are read; gives up (and the user is
/// not held) once they would cost more than the cache may hold.
#[derive(Debug)]
pub(super) struct HeldBuilder {
    held: Held,
    thread_index: HashMap<String, u32>,
    limit: usize,
}

impl HeldBuilder {
    /// Adds a vector; false once the user no longer fits (drop the builder).
    pub(super) fn push(&mut self, id: i64, thread: Option<&str>, bytes: &[u8]) -> bool {
        let thread = match thread {
            None => USER_WIDE,
            Some(t) => match self.thread_index.get(t) {
                Some(&i) => i,
                None => {
                    let Ok(i) = u32::try_from(self.held.threads.len()) else {
                        return false;
                    };
                    self.held.threads.push(t.to_owned());
                    self.thread_index.insert(t.to_owned(), i);
                    i
                }
            },
        };
        self.held.bytes.extend_from_slice(bytes);
        let Ok(end) = u32::try_from(self.held.bytes.len()) else {
            return false;
        };
        self.held.entries.push(Entry { id, thread, end });
        self.held.bytes.len() + self.held.entries.len() * ENTRY_COST <= self.limit
    }

    /// The user as read.
    pub(super) fn finish(mut self) -> Held {
        self.held.bytes.shrink_to_fit();
        self.held.entries.shrink_to_fit();
        self.held
    }
}

/// Held users, by user key and model.
#[derive(Debug)]
pub(super) struct VectorCache {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    limit: usize,
    used: usize,
    /// Advances at every search, for least-recently-searched eviction.
    tick: u64,
    users: HashMap<(String, String), Slot>,
    /// Users read from the database, for tests.
    fills: u64,
}

#[derive(Debug)]
struct Slot {
    held: Arc<Held>,
    searched: u64,
}

impl Default for VectorCache {
    fn default() -> Self {
        Self::new(DEFAULT_VECTOR_CACHE_BYTES)
    }
}

impl VectorCache {
    /// An empty cache holding at most `limit` bytes.
    pub(super) fn new(limit: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                limit,
                used: 0,
                tick: 0,
                users: HashMap::new(),
                fills: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // What is held stays consistent under a panic: each change is one
        // map operation plus its byte count.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the bound, evicting what no longer fits.
    pub(super) fn set_limit(&self, limit: usize) {
        let mut inner = self.lock();
        inner.limit = limit;
        inner.evict_to(limit);
    }

    /// `user`'s vectors of `model` when held at `version`; a copy held at
    /// another version is dropped.
    pub(super) fn get(&self, user: &str, model: &str, version: i64) -> Option<Arc<Held>> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let key = (user.to_owned(), model.to_owned());
        match inner.users.get_mut(&key) {
            Some(slot) if slot.held.version == version => {
                slot.searched = tick;
                Some(Arc::clone(&slot.held))
            }
            Some(_) => {
                if let Some(old) = inner.users.remove(&key) {
                    inner.used = inner.used.saturating_sub(old.held.cost());
                }
                None
            }
            None => None,
        }
    }

    /// A builder for a user read at `version`, or `None` when nothing may
    /// be held.
    pub(super) fn builder(&self, version: i64) -> Option<HeldBuilder> {
        let limit = self.lock().limit;
        (limit > USER_OVERHEAD).then(|| HeldBuilder {
            held: Held {
                version,
                entries: Vec::new(),
                threads: Vec::new(),
                bytes: Vec::new(),
            },
            thread_index: HashMap::new(),
            limit: limit - USER_OVERHEAD,
        })
    }

    /// Holds `held` as `user`'s vectors of `model`, evicting the least
    /// recently searched users it needs room from.
    pub(super) fn put(&self, user: &str, model: &str, held: Held) {
        let mut inner = self.lock();
        inner.fills += 1;
        let cost = held.cost();
        if cost > inner.limit {
            return;
        }
        let key = (user.to_owned(), model.to_owned());
        if let Some(old) = inner.users.remove(&key) {
            inner.used = inner.used.saturating_sub(old.held.cost());
        }
        let room = inner.limit - cost;
        inner.evict_to(room);
        inner.tick += 1;
        let searched = inner.tick;
        inner.used += cost;
        inner.users.insert(
            key,
            Slot {
                held: Arc::new(held),
                searched,
            },
        );
    }

    /// Brings the held copies of `user` from `before` to `after` by
    /// `change`, a write of this process that moved the user's count from
    /// one to the other in one committed transaction: a copy read at
    /// `before` is then exactly the table at `after` once `change` is
    /// applied, without reading the user again. A copy at another count is
    /// dropped, unless it is already at `after` or past it (a search read
    /// the user again meanwhile).
    pub(super) fn apply(&self, user: &str, before: i64, after: i64, change: &Change<'_>) {
        let mut inner = self.lock();
        let keys: Vec<(String, String)> = inner
            .users
            .keys()
            .filter(|(u, _)| u == user)
            .cloned()
            .collect();
        for key in keys {
            let Some(slot) = inner.users.get_mut(&key) else {
                continue;
            };
            let version = slot.held.version;
            if version >= after {
                continue;
            }
            let old_cost = slot.held.cost();
            let applied = version == before && {
                let held = Arc::make_mut(&mut slot.held);
                held.version = after;
                match change {
                    Change::Remove { id } => {
                        held.remove(*id);
                        true
                    }
                    Change::Upsert {
                        id,
                        thread,
                        model,
                        bytes,
                    } if *model == key.1 => held.upsert(*id, *thread, bytes),
                    // Embedded by another model: no longer this copy's.
                    Change::Upsert { id, .. } => {
                        held.remove(*id);
                        true
                    }
                }
            };
            let new_cost = if applied { slot.held.cost() } else { 0 };
            if !applied {
                inner.users.remove(&key);
            }
            inner.used = inner.used.saturating_sub(old_cost) + new_cost;
        }
        if inner.used > inner.limit {
            let limit = inner.limit;
            inner.evict_to(limit);
        }
    }

    /// Users held, bytes held, and users read from the database so far.
    #[cfg(test)]
    pub(super) fn stats(&self) -> (usize, usize, u64) {
        let inner = self.lock();
        (inner.users.len(), inner.used, inner.fills)
    }
}

impl Inner {
    /// Evicts the least recently searched users until at most `bytes` are held.
    fn evict_to(&mut self, bytes: usize) {
        while self.used > bytes {
            let Some(oldest) = self
                .users
                .iter()
                .min_by_key(|(_, slot)| slot.searched)
                .map(|(key, _)| key.clone())
            else {
                self.used = 0;
                return;
            };
            if let Some(slot) = self.users.remove(&oldest) {
                self.used = self.used.saturating_sub(slot.held.cost());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(cache: &VectorCache, version: i64, vectors: &[(i64, Option<&str>, u8)]) -> Held {
        let mut b = cache.builder(version).unwrap();
        for &(id, thread, byte) in vectors {
            assert!(b.push(id, thread, &[byte; 4]));
        }
        b.finish()
    }

    fn seen(held: &Held, thread: Option<&str>) -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        held.each_in_scope(thread, |id, bytes| out.push((id, bytes.to_vec())));
        out
    }

    #[test]
    fn a_search_sees_the_user_wide_vectors_and_its_threads_only() {
        let cache = VectorCache::default();
        let held = user(
            &cache,
            1,
            &[(1, None, 1), (2, Some("t1"), 2), (3, Some("t2"), 3)],
        );
        assert_eq!(seen(&held, None), vec![(1, vec![1; 4])]);
        assert_eq!(
            seen(&held, Some("t1")),
            vec![(1, vec![1; 4]), (2, vec![2; 4])]
        );
        assert_eq!(
            seen(&held, Some("t2")),
            vec![(1, vec![1; 4]), (3, vec![3; 4])]
        );
        assert_eq!(seen(&held, Some("t3")), vec![(1, vec![1; 4])]);
    }

    /// Every vector held, with its thread, in order.
    fn all(held: &Held) -> Vec<(i64, Option<String>, Vec<u8>)> {
        let mut start = 0;
        held.entries
            .iter()
            .map(|e| {
                let end = e.end as usize;
                let thread =
                    (e.thread != USER_WIDE).then(|| held.threads[e.thread as usize].clone());
                let out = (e.id, thread, held.bytes[start..end].to_vec());
                start = end;
                out
            })
            .collect()
    }

    #[test]
    fn a_copy_edited_in_place_is_the_copy_a_read_would_make() {
        let cache = VectorCache::default();
        let mut held = user(&cache, 1, &[(2, None, 2), (5, Some("t1"), 5), (9, None, 9)]);
        assert!(held.upsert(1, Some("t2"), &[1; 4]), "first");
        assert!(held.upsert(7, None, &[7; 4]), "between");
        assert!(held.upsert(12, Some("t1"), &[12; 4]), "last");
        assert!(held.upsert(5, None, &[55; 4]), "again, now user-wide");
        assert!(held.upsert(9, None, &[99; 6]), "again, another length");
        held.remove(2);
        held.remove(3);
        let read = user(&cache, 1, &[]);
        let mut read = HeldBuilder {
            held: read,
            thread_index: HashMap::new(),
            limit: usize::MAX,
        };
        for (id, thread, bytes) in [
            (1, Some("t2"), vec![1; 4]),
            (5, None, vec![55; 4]),
            (7, None, vec![7; 4]),
            (9, None, vec![99; 6]),
            (12, Some("t1"), vec![12; 4]),
        ] {
            assert!(read.push(id, thread, &bytes));
        }
        assert_eq!(all(&held), all(&read.finish()));
    }

    #[test]
    fn a_write_moves_the_copy_read_just_before_it_and_drops_an_older_one() {
        let cache = VectorCache::default();
        cache.put("u", "m", user(&cache, 4, &[(1, None, 1)]));
        cache.put("u", "other", user(&cache, 4, &[(2, None, 2)]));
        cache.put("v", "m", user(&cache, 4, &[(3, None, 3)]));
        let change = Change::Upsert {
            id: 2,
            thread: None,
            model: "m",
            bytes: &[20; 4],
        };
        cache.apply("u", 4, 5, &change);
        let held = cache.get("u", "m", 5).expect("moved to 5");
        assert_eq!(seen(&held, None), vec![(1, vec![1; 4]), (2, vec![20; 4])]);
        let other = cache.get("u", "other", 5).expect("moved to 5");
        assert_eq!(seen(&other, None), vec![], "embedded by another model now");
        assert!(cache.get("v", "m", 4).is_some(), "another user's is left");

        // A copy read before another change it did not see is dropped.
        cache.apply("u", 6, 7, &Change::Remove { id: 1 });
        assert_eq!(cache.stats().0, 1, "only v's is left");
        // One read at the new count already is kept as it is.
        cache.put("u", "m", user(&cache, 9, &[(1, None, 1)]));
        cache.apply("u", 8, 9, &Change::Remove { id: 1 });
        assert_eq!(seen(&cache.get("u", "m", 9).unwrap(), None).len(), 1);
        let (_, used, _) = cache.stats();
        let held_now =
            user(&cache, 9, &[(1, None, 1)]).cost() + user(&cache, 4, &[(3, None, 3)]).cost();
        assert_eq!(used, held_now, "the bytes held are counted as edited");
    }

    #[test]
    fn a_copy_is_used_only_at_its_version() {
        let cache = VectorCache::default();
        cache.put("u", "m", user(&cache, 7, &[(1, None, 1)]));
        assert!(cache.get("u", "m", 7).is_some());
        assert!(cache.get("u", "other-model", 7).is_none());
        assert!(cache.get("u", "m", 8).is_none(), "another version");
        assert!(
            cache.get("u", "m", 7).is_none(),
            "the stale copy was dropped"
        );
        assert_eq!(cache.stats().1, 0);
    }

    #[test]
    fn the_least_recently_searched_user_goes_first_and_nothing_goes_past_the_bound() {
        let one = user(&VectorCache::default(), 1, &[(1, None, 1)]).cost();
        let cache = VectorCache::new(2 * one);
        cache.put("a", "m", user(&cache, 1, &[(1, None, 1)]));
        cache.put("b", "m", user(&cache, 1, &[(2, None, 2)]));
        assert!(cache.get("a", "m", 1).is_some());
        cache.put("c", "m", user(&cache, 1, &[(3, None, 3)]));
        assert!(
            cache.get("b", "m", 1).is_none(),
            "b was searched least recently"
        );
        assert!(cache.get("a", "m", 1).is_some());
        assert!(cache.get("c", "m", 1).is_some());
        assert!(cache.stats().1 <= 2 * one);

        cache.set_limit(0);
        assert_eq!(cache.stats().0, 0);
        assert!(cache.builder(1).is_none(), "0 holds nothing");
    }

    #[test]
    fn a_user_larger_than_the_bound_is_not_held() {
        let cache = VectorCache::new(USER_OVERHEAD + 3 * (4 + ENTRY_COST));
        let mut b = cache.builder(1).unwrap();
        assert!(b.push(1, None, &[0; 4]));
        assert!(b.push(2, None, &[0; 4]));
        assert!(b.push(3, None, &[0; 4]));
        assert!(!b.push(4, None, &[0; 4]), "the fourth does not fit");
    }
}
