//! The decoded context of the threads that talk most, kept between runs.
//!
//! Every run reads its thread's context (the messages after the newest
//! summary). A thread that keeps talking has hundreds of them, and decoding
//! them all again for each message was half of what such a run cost. A
//! thread's messages are only ever appended (ids grow: `AUTOINCREMENT` and one
//! writer) or deleted (`/new`, clearing the history), and a summary covers a
//! prefix; so a cached context stays right as long as no deletion happened and
//! the newest summary is the same, and the next read only decodes the rows
//! added since. Deletions bump `epoch` once committed, which drops every entry.
//!
//! A read moves the cached messages out to the caller (no copy) and notes
//! what they were read under; the run hands them back when it is done
//! (`HistoryStore::keep_context`), and they are cached again under that note.
//!
//! On PostgreSQL each replica keeps its own, and another replica may append
//! to a thread or delete its messages. Appends need nothing more: a thread's
//! messages are written by its runs' ends, one run at a time, so they commit
//! in the order of their ids and the rows after the last cached id are the
//! ones added since. A deletion is always of a thread's whole history, so
//! the read checks, in the same statement, that the first cached row still
//! exists (`postgres/history.rs`), and reads the whole context when not.
//!
//! A run that gave its context back adds the messages its end wrote, with
//! the ids the end gave them (`extend`, PostgreSQL: the end's statement
//! returns them). The next message's insert says which row is the thread's
//! newest (`HistorySeen::Newest`); when it is the newest held, nothing was
//! written since, and the run starts from what is held without a read.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hearth_core::Message;

use crate::history::StoredSummary;

/// Threads kept: enough for the conversations active at once on a personal
/// gateway; a thread that falls out is decoded in full at its next run.
const THREADS: usize = 16;
/// Messages kept over all threads (a bound on the memory the cache holds).
const MESSAGES: usize = 8_192;

/// One thread's context as last read.
#[derive(Debug, Clone)]
pub(crate) struct Cached {
    /// `epoch` when it was read.
    pub epoch: u64,
    /// The summary it follows (`None`: never compacted).
    pub summary: Option<StoredSummary>,
    /// The messages after the summary, oldest first, and their ids.
    pub messages: Vec<Message>,
    pub ids: Vec<i64>,
    /// The run that handed it back, whose end may add the messages it
    /// wrote ([`ContextCache::extend`]); `None` once it did, or could not.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "only PostgreSQL's ends extend what is held")
    )]
    pub kept_by: Option<String>,
}

impl Cached {
    /// Id of the summary it follows.
    pub fn summary_id(&self) -> Option<i64> {
        self.summary.as_ref().map(|s| s.id)
    }

    /// The newest row of the thread it holds: its last message, or its
    /// summary when that was written after them.
    #[cfg(feature = "postgres")]
    pub fn newest(&self) -> Option<i64> {
        self.ids.last().copied().max(self.summary_id())
    }
}

/// What a context lent out was read under: its thread, the epoch and the
/// summary it follows.
type Lent = (String, u64, Option<StoredSummary>);

/// Recently read contexts by thread, newest last.
#[derive(Debug, Default)]
pub(crate) struct ContextCache {
    epoch: AtomicU64,
    entries: Mutex<VecDeque<(String, Cached)>>,
    /// Contexts out with their readers.
    lent: Mutex<VecDeque<Lent>>,
    /// Rows decoded by reads, for tests.
    #[cfg(test)]
    pub decoded: AtomicU64,
    /// Reads made in the database, for tests.
    #[cfg(test)]
    pub reads: AtomicU64,
}

impl ContextCache {
    /// The current epoch; read before the database, so a deletion committed
    /// meanwhile makes the result uncacheable.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Called once a deletion of messages has committed.
    pub fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.lock().clear();
        self.lent().clear();
    }

    /// Takes the thread's cached context out, if it was read in `epoch`
    /// after the summary `summary_id` (the reader puts it back extended, so
    /// it is moved rather than copied).
    pub fn take(&self, thread_key: &str, epoch: u64, summary_id: Option<i64>) -> Option<Cached> {
        let mut entries = self.lock();
        let at = entries.iter().position(|(k, _)| k == thread_key)?;
        let (_, cached) = entries.remove(at)?;
        (cached.epoch == epoch && cached.summary_id() == summary_id).then_some(cached)
    }

    /// Takes the thread's cached context out if it was read in `epoch`,
    /// whatever summary it followed: for a reader that learns the newest
    /// summary with the rows added since, in one read, and drops what a
    /// newer summary covers itself (PostgreSQL).
    #[cfg(feature = "postgres")]
    pub fn take_any(&self, thread_key: &str, epoch: u64) -> Option<Cached> {
        let mut entries = self.lock();
        let at = entries.iter().position(|(k, _)| k == thread_key)?;
        let (_, cached) = entries.remove(at)?;
        (cached.epoch == epoch).then_some(cached)
    }

    /// Keeps `cached` as the thread's context unless a deletion committed
    /// since it was read, or it is empty (a new thread: nothing to save).
    fn put(&self, thread_key: &str, cached: Cached) {
        if cached.messages.is_empty() || cached.messages.len() > MESSAGES {
            return;
        }
        let mut entries = self.lock();
        if cached.epoch != self.epoch() {
            return;
        }
        entries.retain(|(k, _)| k != thread_key);
        let mut total: usize = cached.messages.len();
        total += entries.iter().map(|(_, c)| c.messages.len()).sum::<usize>();
        while entries.len() >= THREADS || total > MESSAGES {
            let Some((_, old)) = entries.pop_front() else {
                break;
            };
            total -= old.messages.len();
        }
        entries.push_back((thread_key.to_owned(), cached));
    }

    /// Notes that `thread_key`'s context was read in `epoch` after
    /// `summary` and handed out.
    pub fn lend(&self, thread_key: &str, epoch: u64, summary: Option<StoredSummary>) {
        let mut lent = self.lent();
        lent.retain(|(k, _, _)| k != thread_key);
        if lent.len() >= THREADS * 4 {
            lent.pop_front();
        }
        lent.push_back((thread_key.to_owned(), epoch, summary));
    }

    /// Notes that the run holding `thread_key`'s context out wrote
    /// `summary`, which replaces a prefix of it: the run hands back what
    /// follows the summary (`HistoryStore::keep_context`).
    #[cfg(feature = "postgres")]
    pub fn summarized(&self, thread_key: &str, summary: StoredSummary) {
        if let Some(note) = self.lent().iter_mut().find(|(k, _, _)| k == thread_key) {
            note.2 = Some(summary);
        }
    }

    /// Caches the context the run `run_id` hands back, under what it was
    /// read with (refused when it was not lent, or a deletion committed
    /// since).
    pub fn give_back(
        &self,
        thread_key: &str,
        run_id: &str,
        messages: Vec<hearth_core::Message>,
        ids: Vec<i64>,
    ) {
        let note = {
            let mut lent = self.lent();
            let at = lent.iter().position(|(k, _, _)| k == thread_key);
            at.and_then(|at| lent.remove(at))
        };
        let Some((_, epoch, summary)) = note else {
            return;
        };
        if messages.len() != ids.len() || !ids.windows(2).all(|w| w[0] < w[1]) {
            return;
        }
        self.put(
            thread_key,
            Cached {
                epoch,
                summary,
                messages,
                ids,
                kept_by: Some(run_id.to_owned()),
            },
        );
    }

    /// Whether a context handed back by `run_id` waits for its end.
    #[cfg(feature = "postgres")]
    pub fn kept_by(&self, run_id: &str) -> bool {
        self.lock()
            .iter()
            .any(|(_, c)| c.kept_by.as_deref() == Some(run_id))
    }

    /// Adds the messages the end of `run_id` wrote, with the ids it gave
    /// them, to the context that run handed back: what a read after the end
    /// would have added. Nothing when no context waits for that run, a
    /// deletion committed since, or the ids are not all newer than what is
    /// held (the entry is then dropped).
    #[cfg(feature = "postgres")]
    pub fn extend(&self, run_id: &str, messages: Vec<Message>, ids: Vec<i64>) {
        let mut entries = self.lock();
        let Some(at) = entries
            .iter()
            .position(|(_, c)| c.kept_by.as_deref() == Some(run_id))
        else {
            return;
        };
        let epoch = self.epoch();
        let total: usize = entries.iter().map(|(_, c)| c.messages.len()).sum();
        let Some((_, cached)) = entries.get_mut(at) else {
            return;
        };
        cached.kept_by = None;
        let newest = cached.newest();
        let fits = cached.epoch == epoch
            && messages.len() == ids.len()
            && ids.windows(2).all(|w| w[0] < w[1])
            && ids.first().is_none_or(|first| Some(*first) > newest)
            && total + messages.len() <= MESSAGES;
        if fits {
            cached.messages.extend(messages);
            cached.ids.extend(ids);
        } else {
            entries.remove(at);
        }
    }

    /// Counts rows decoded by a read (tests only).
    pub fn count_decoded(&self, _rows: usize) {
        #[cfg(test)]
        self.decoded.fetch_add(_rows as u64, Ordering::Relaxed);
    }

    /// Counts a read made in the database (tests only).
    #[cfg(feature = "postgres")]
    pub fn count_read(&self) {
        #[cfg(test)]
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Threads held (tests only).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lent(&self) -> std::sync::MutexGuard<'_, VecDeque<Lent>> {
        self.lent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, Cached)>> {
        // The entries are plain data: one left by a panicking reader is whole.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Invalidates the cache when dropped. A write that deletes messages returns
/// one with its result: the writer hands results over (or drops them, when
/// the caller is gone) only after the commit, so the cache is dropped after
/// the deletion is visible to readers, never before.
pub(crate) struct InvalidateOnDrop(pub Arc<ContextCache>);

impl Drop for InvalidateOnDrop {
    fn drop(&mut self) {
        self.0.invalidate();
    }
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use hearth_core::{Message, Role};

    use super::*;

    fn said(texts: &[&str]) -> Vec<Message> {
        texts
            .iter()
            .map(|t| Message::text(Role::User, *t))
            .collect()
    }

    /// What is held of t1 after `run_1` handed back two messages (ids 1, 2).
    fn handed_back() -> ContextCache {
        let cache = ContextCache::default();
        cache.lend("t1", cache.epoch(), None);
        cache.give_back("t1", "run_1", said(&["u0", "a0"]), vec![1, 2]);
        cache
    }

    fn held(cache: &ContextCache) -> Option<Vec<i64>> {
        cache.take_any("t1", cache.epoch()).map(|c| c.ids)
    }

    #[test]
    fn only_the_end_of_the_run_that_handed_it_back_extends_it() {
        let cache = handed_back();
        assert!(cache.kept_by("run_1") && !cache.kept_by("run_2"));
        cache.extend("run_2", said(&["u1", "a1"]), vec![3, 4]);
        cache.extend("run_1", said(&["u1", "a1"]), vec![3, 4]);
        assert!(!cache.kept_by("run_1"), "once");
        cache.extend("run_1", said(&["u2"]), vec![5]);
        let held = cache.take_any("t1", cache.epoch()).unwrap();
        assert_eq!(held.ids, [1, 2, 3, 4]);
        assert_eq!(held.newest(), Some(4));
    }

    #[test]
    fn an_end_that_does_not_follow_what_is_held_drops_it() {
        for (ids, n) in [(vec![2, 3], 2), (vec![4, 3], 2), (vec![3], 2)] {
            let cache = handed_back();
            cache.extend("run_1", said(&["x", "y"][..n]), ids.clone());
            assert_eq!(held(&cache), None, "{ids:?}");
        }
        let cache = handed_back();
        cache.invalidate();
        cache.extend("run_1", said(&["u1"]), vec![3]);
        assert_eq!(held(&cache), None, "a deletion since");
    }

    #[test]
    fn a_summary_written_by_the_reader_is_held_with_what_follows_it() {
        let cache = ContextCache::default();
        cache.lend("t1", cache.epoch(), None);
        let summary = StoredSummary {
            id: 9,
            text: "s".into(),
            covers_to: 4,
        };
        cache.summarized("t1", summary.clone());
        cache.give_back("t1", "run_1", said(&["u5", "a5"]), vec![5, 6]);
        let held = cache.take_any("t1", cache.epoch()).unwrap();
        assert_eq!(held.summary, Some(summary));
        assert_eq!(held.newest(), Some(9), "the summary, written after them");
    }
}
