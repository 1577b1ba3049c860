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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hearth_core::Message;

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
    /// Id of the summary it follows (`None`: never compacted).
    pub summary_id: Option<i64>,
    /// The messages after the summary, oldest first, and their ids.
    pub messages: Vec<Message>,
    pub ids: Vec<i64>,
}

/// Recently read contexts by thread, newest last.
#[derive(Debug, Default)]
pub(crate) struct ContextCache {
    epoch: AtomicU64,
    entries: Mutex<VecDeque<(String, Cached)>>,
    /// Contexts out with their readers: the thread, the epoch and summary
    /// they were read under.
    lent: Mutex<VecDeque<(String, u64, Option<i64>)>>,
    /// Rows decoded by reads, for tests.
    #[cfg(test)]
    pub decoded: AtomicU64,
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
        self.lent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// Takes the thread's cached context out, if it was read in `epoch`
    /// after the summary `summary_id` (the reader puts it back extended, so
    /// it is moved rather than copied).
    pub fn take(&self, thread_key: &str, epoch: u64, summary_id: Option<i64>) -> Option<Cached> {
        let mut entries = self.lock();
        let at = entries.iter().position(|(k, _)| k == thread_key)?;
        let (_, cached) = entries.remove(at)?;
        (cached.epoch == epoch && cached.summary_id == summary_id).then_some(cached)
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

    /// Notes that `thread_key`'s context was read in `epoch` after the
    /// summary `summary_id` and handed out.
    pub fn lend(&self, thread_key: &str, epoch: u64, summary_id: Option<i64>) {
        let mut lent = self
            .lent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        lent.retain(|(k, _, _)| k != thread_key);
        if lent.len() >= THREADS * 4 {
            lent.pop_front();
        }
        lent.push_back((thread_key.to_owned(), epoch, summary_id));
    }

    /// Caches the context a reader hands back, under what it was read with
    /// (refused when it was not lent, or a deletion committed since).
    pub fn give_back(&self, thread_key: &str, messages: Vec<hearth_core::Message>, ids: Vec<i64>) {
        let note = {
            let mut lent = self
                .lent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let at = lent.iter().position(|(k, _, _)| k == thread_key);
            at.and_then(|at| lent.remove(at))
        };
        let Some((_, epoch, summary_id)) = note else {
            return;
        };
        if messages.len() != ids.len() || !ids.windows(2).all(|w| w[0] < w[1]) {
            return;
        }
        self.put(
            thread_key,
            Cached {
                epoch,
                summary_id,
                messages,
                ids,
            },
        );
    }

    /// Counts rows decoded by a read (tests only).
    pub fn count_decoded(&self, _rows: usize) {
        #[cfg(test)]
        self.decoded.fetch_add(_rows as u64, Ordering::Relaxed);
    }

    /// Threads held (tests only).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
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
