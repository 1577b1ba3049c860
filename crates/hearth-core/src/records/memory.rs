//! What the model was asked to remember: records and the `MemoryStore` trait.
//!
//! A memory belongs to one user and is either user-wide or bound to one of
//! that user's threads. Every read is scoped by the caller's user key (and
//! thread), so one user's memories never reach another user's run. This
//! module knows nothing of tools or capabilities; it only stores and finds.

use crate::Timestamp;

/// One saved memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRecord {
    /// Store-assigned id, what citations name (`[memory:<id>]`).
    pub id: i64,
    /// The user it belongs to.
    pub user_key: String,
    /// `None` for a user-wide memory, else the only thread that sees it.
    pub thread_key: Option<String>,
    /// What to remember.
    pub text: String,
    /// The run that saved it, if known.
    pub run_id: Option<String>,
    /// When it was first saved.
    pub created_at: Timestamp,
    /// When it was last saved again or found by a search (retention counts
    /// from here).
    pub last_used_at: Timestamp,
}

/// A memory to save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMemory {
    /// The user it belongs to.
    pub user_key: String,
    /// `None` for user-wide, else the thread it is bound to.
    pub thread_key: Option<String>,
    /// What to remember.
    pub text: String,
    /// The run that saves it.
    pub run_id: Option<String>,
    /// When.
    pub at: Timestamp,
}

/// The outcome of [`MemoryStore::save_memory`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedMemory {
    /// The stored memory (the earlier one when the same text was saved before).
    pub memory: MemoryRecord,
    /// False when an identical memory already existed.
    pub created: bool,
}

/// Which memories a search or listing may see: the user's user-wide ones,
/// plus those bound to `thread_key` when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryScope {
    /// The user whose memories are read.
    pub user_key: String,
    /// The thread whose thread-bound memories are also visible.
    pub thread_key: Option<String>,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub memory: MemoryRecord,
    /// Relevance (negated BM25): higher is better; only comparable within
    /// one search.
    pub score: f64,
}
