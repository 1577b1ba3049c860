//! A replica's in-memory copy of users' blocks of compact vectors, so a
//! search by meaning does not copy every block out of PostgreSQL each time.
//!
//! Measured on 10^5 facts of 384 dimensions (BENCHMARKS.md, "Issue 19:
//! vector search on PostgreSQL, a replica's copy of the blocks"): of a 51 ms
//! search, about 44 ms went to streaming the 40 MB of blocks (the server
//! reading them out of TOAST, the socket, the client's protocol), 3 ms to
//! scoring them. A held block is scored where it lies.
//!
//! Never stale: every search lists the ids and versions of the blocks of
//! its scope (a cheap index read; `memory_blocks.version` changes on every
//! rewrite, migration 0014) in the same snapshot as everything else it
//! reads, scores a held block only when its version is the listed one, and
//! fetches the others. The tail (vectors not packed yet) is read fresh
//! every time. So a vector saved, embedded again or forgotten on another
//! replica is seen by the next search here, as without the cache.
//!
//! Bounded by `[memory] vector_cache_mb` (0 turns it off); whole users are
//! evicted, the least recently searched first. Empty until someone searches
//! by meaning: an idle replica holds nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The default bound: a user of 10^5 facts embedded in 384 dimensions
/// takes about 40 MB (a byte per dimension and 20 bytes per vector).
pub const DEFAULT_VECTOR_CACHE_BYTES: usize = 64 << 20;

/// Bytes charged for each held block besides its entries (its map slot,
/// `Arc`, thread key): small next to the 50 KB of a full block.
const BLOCK_OVERHEAD: usize = 128;

/// A block as a search lists it, before reading its entries.
#[derive(Debug, Clone)]
pub(super) struct Listed {
    pub(super) id: i64,
    pub(super) version: i64,
    pub(super) thread_key: Option<String>,
    /// The length of its entries.
    pub(super) bytes: usize,
}

/// A held block: its entries as of `version`.
#[derive(Debug)]
pub(super) struct Held {
    version: i64,
    thread_key: Option<String>,
    /// As stored in `memory_blocks.entries` (read with `each_entry`).
    pub(super) entries: Vec<u8>,
}

impl Held {
    fn cost(&self) -> usize {
        self.entries.len() + BLOCK_OVERHEAD
    }
}

/// What a search reads from where.
#[derive(Debug)]
pub(super) struct Plan {
    /// Blocks held at their listed version: scored from memory.
    pub(super) held: Vec<Arc<Held>>,
    /// Blocks to fetch from the database, with what their listing said.
    pub(super) missing: Vec<Listed>,
    /// Whether the fetched blocks are to be handed to [`VectorCache::keep`]
    /// (they fit under the bound).
    pub(super) keep: bool,
}

/// The blocks held for one user and embedding model.
#[derive(Debug, Default)]
struct UserBlocks {
    blocks: HashMap<i64, Arc<Held>>,
    bytes: usize,
    /// The [`State::clock`] of its last search.
    used: u64,
}

impl UserBlocks {
    fn remove(&mut self, id: i64) -> usize {
        let freed = self.blocks.remove(&id).map_or(0, |b| b.cost());
        self.bytes -= freed;
        freed
    }
}

#[derive(Debug)]
struct State {
    capacity: usize,
    /// Bytes held over every user.
    bytes: usize,
    /// Counts searches, for the least recently searched user.
    clock: u64,
    /// By user key and model.
    users: HashMap<(String, String), UserBlocks>,
    /// Blocks fetched from the database since the start (for tests).
    fetched: u64,
}

impl State {
    /// Drops users, least recently searched first (never `spare`), while
    /// more than the bound is held.
    fn evict(&mut self, spare: Option<&(String, String)>) {
        while self.bytes > self.capacity {
            let oldest = self
                .users
                .iter()
                .filter(|(k, _)| Some(*k) != spare)
                .min_by_key(|(_, u)| u.used)
                .map(|(k, _)| k.clone());
            let Some(key) = oldest.or_else(|| spare.cloned()) else {
                return;
            };
            if let Some(user) = self.users.remove(&key) {
                self.bytes -= user.bytes;
            }
        }
    }
}

/// See the module's documentation.
#[derive(Debug)]
pub(super) struct VectorCache {
    state: Mutex<State>,
}

impl VectorCache {
    /// An empty cache holding at most `capacity` bytes (0: nothing).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State {
                capacity,
                bytes: 0,
                clock: 0,
                users: HashMap::new(),
                fetched: 0,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; were it poisoned, the
        // state is still whole (each change is made before the next).
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the bound, dropping users until it holds.
    pub(super) fn set_capacity(&self, capacity: usize) {
        let mut state = self.state();
        state.capacity = capacity;
        state.evict(None);
    }

    /// For a search of `user`'s `model` vectors whose scope (user-wide, and
    /// `thread` when given) lists `listed`: the blocks held at their listed
    /// version and those to fetch. Held blocks of the scope that are not
    /// listed as held (rewritten or deleted since) are dropped.
    pub(super) fn plan(
        &self,
        user: &str,
        model: &str,
        thread: Option<&str>,
        listed: Vec<Listed>,
    ) -> Plan {
        let mut state = self.state();
        state.fetched += listed.len() as u64;
        if state.capacity == 0 {
            return Plan {
                held: Vec::new(),
                missing: listed,
                keep: false,
            };
        }
        state.clock += 1;
        let clock = state.clock;
        let key = (user.to_owned(), model.to_owned());
        let State {
            users,
            bytes,
            capacity,
            fetched,
            ..
        } = &mut *state;
        let (mut held, mut missing) = (Vec::new(), Vec::new());
        let mut holding = 0;
        if let Some(entry) = users.get_mut(&key) {
            entry.used = clock;
            let versions: HashMap<i64, i64> = listed.iter().map(|b| (b.id, b.version)).collect();
            let stale: Vec<i64> = entry
                .blocks
                .iter()
                .filter(|(id, b)| {
                    let in_scope = b.thread_key.is_none() || b.thread_key.as_deref() == thread;
                    in_scope && versions.get(id) != Some(&b.version)
                })
                .map(|(id, _)| *id)
                .collect();
            for id in stale {
                *bytes -= entry.remove(id);
            }
            for block in listed {
                match entry.blocks.get(&block.id) {
                    Some(h) => held.push(h.clone()),
                    None => missing.push(block),
                }
            }
            holding = entry.bytes;
            // A user is held only with blocks, so the users held stay
            // bounded by the bytes.
            if entry.blocks.is_empty() {
                users.remove(&key);
            }
        } else {
            missing = listed;
        }
        *fetched -= held.len() as u64;
        let wanted: usize = missing.iter().map(|b| b.bytes + BLOCK_OVERHEAD).sum();
        Plan {
            held,
            keep: holding + wanted <= *capacity,
            missing,
        }
    }

    /// Holds blocks a search fetched, as `(listing, entries)`, then drops
    /// other users (the least recently searched first) to keep the bound;
    /// this user too if it alone passes it.
    pub(super) fn keep(&self, user: &str, model: &str, blocks: Vec<(Listed, Vec<u8>)>) {
        if blocks.is_empty() {
            return;
        }
        let mut state = self.state();
        if state.capacity == 0 {
            return;
        }
        let key = (user.to_owned(), model.to_owned());
        let State {
            users,
            bytes,
            clock,
            ..
        } = &mut *state;
        let entry = users.entry(key.clone()).or_default();
        entry.used = *clock;
        for (listed, entries) in blocks {
            *bytes -= entry.remove(listed.id);
            let held = Held {
                version: listed.version,
                thread_key: listed.thread_key,
                entries,
            };
            entry.bytes += held.cost();
            *bytes += held.cost();
            entry.blocks.insert(listed.id, Arc::new(held));
        }
        state.evict(Some(&key));
    }

    /// Bytes held, users held, and blocks fetched since the start.
    #[cfg(test)]
    pub(super) fn stats(&self) -> (usize, usize, u64) {
        let state = self.state();
        (state.bytes, state.users.len(), state.fetched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(id: i64, version: i64, thread: Option<&str>, bytes: usize) -> Listed {
        Listed {
            id,
            version,
            thread_key: thread.map(str::to_owned),
            bytes,
        }
    }

    /// Plans a search and keeps what it fetched (entries of the listed
    /// size, filled with the block's id); returns the ids it fetched.
    fn search(cache: &VectorCache, user: &str, thread: Option<&str>, l: &[Listed]) -> Vec<i64> {
        let plan = cache.plan(user, "m", thread, l.to_vec());
        let ids = plan.missing.iter().map(|b| b.id).collect();
        if plan.keep {
            let fetched = plan
                .missing
                .into_iter()
                .map(|b| {
                    let entries = vec![u8::try_from(b.id).unwrap(); b.bytes];
                    (b, entries)
                })
                .collect();
            cache.keep(user, "m", fetched);
        }
        ids
    }

    #[test]
    fn a_held_block_is_used_only_at_its_listed_version() {
        let cache = VectorCache::new(1 << 20);
        let blocks = [listed(1, 10, None, 100), listed(2, 20, None, 100)];
        assert_eq!(search(&cache, "u", None, &blocks), vec![1, 2]);
        assert_eq!(search(&cache, "u", None, &blocks), Vec::<i64>::new());
        // Block 2 rewritten (a new version), block 3 packed.
        let now = [
            listed(1, 10, None, 100),
            listed(2, 21, None, 100),
            listed(3, 30, None, 100),
        ];
        let plan = cache.plan("u", "m", None, now.to_vec());
        assert_eq!(plan.held.len(), 1);
        assert_eq!(plan.held[0].entries, vec![1; 100]);
        let missing: Vec<i64> = plan.missing.iter().map(|b| b.id).collect();
        assert_eq!(missing, vec![2, 3]);
        // The old version of block 2 is gone from memory already.
        assert_eq!(cache.stats().0, 100 + BLOCK_OVERHEAD);
    }

    #[test]
    fn a_deleted_block_is_dropped_and_other_threads_blocks_stay() {
        let cache = VectorCache::new(1 << 20);
        let all = [listed(1, 1, None, 100), listed(2, 2, Some("t"), 100)];
        assert_eq!(search(&cache, "u", Some("t"), &all), vec![1, 2]);
        // A user-wide search does not list thread t's block; it stays.
        assert!(search(&cache, "u", None, &all[..1]).is_empty());
        assert_eq!(cache.stats().0, 2 * (100 + BLOCK_OVERHEAD));
        // Block 1 deleted: a search of thread t lists only block 2.
        assert!(search(&cache, "u", Some("t"), &all[1..]).is_empty());
        assert_eq!(cache.stats().0, 100 + BLOCK_OVERHEAD);
    }

    #[test]
    fn a_user_without_blocks_holds_no_entry() {
        let cache = VectorCache::new(1 << 20);
        for n in 0..100 {
            assert!(search(&cache, &format!("u{n}"), None, &[]).is_empty());
        }
        assert_eq!(cache.stats().1, 0);
        search(&cache, "u", None, &[listed(1, 1, None, 10)]);
        assert_eq!(cache.stats().1, 1);
        // Its only block deleted: the user goes too.
        search(&cache, "u", None, &[]);
        assert_eq!(cache.stats(), (0, 0, 1));
    }

    #[test]
    fn users_are_evicted_least_recently_searched_first() {
        let block = 1000;
        let cache = VectorCache::new(2 * (block + BLOCK_OVERHEAD));
        let one = |id| [listed(id, id, None, block)];
        search(&cache, "a", None, &one(1));
        search(&cache, "b", None, &one(2));
        // "a" searched again: "b" is now the older.
        assert!(search(&cache, "a", None, &one(1)).is_empty());
        search(&cache, "c", None, &one(3));
        let (bytes, users, _) = cache.stats();
        assert_eq!((bytes, users), (2 * (block + BLOCK_OVERHEAD), 2));
        assert!(search(&cache, "a", None, &one(1)).is_empty());
        assert!(search(&cache, "c", None, &one(3)).is_empty());
        assert_eq!(search(&cache, "b", None, &one(2)), vec![2]);
    }

    #[test]
    fn a_user_larger_than_the_bound_is_not_held_and_zero_holds_nothing() {
        let cache = VectorCache::new(1000);
        let big = [listed(1, 1, None, 600), listed(2, 2, None, 600)];
        assert_eq!(search(&cache, "u", None, &big), vec![1, 2]);
        assert_eq!(search(&cache, "u", None, &big), vec![1, 2]);
        assert_eq!(cache.stats().0, 0);
        let off = VectorCache::new(0);
        let small = [listed(1, 1, None, 10)];
        assert_eq!(search(&off, "u", None, &small), vec![1]);
        assert_eq!(search(&off, "u", None, &small), vec![1]);
        assert_eq!(off.stats().0, 0);
        // Lowering the bound drops what no longer fits.
        let cache = VectorCache::new(1 << 20);
        search(&cache, "u", None, &small);
        assert!(cache.stats().0 > 0);
        cache.set_capacity(0);
        assert_eq!(cache.stats(), (0, 0, 1));
    }
}
