//! What the model was asked to remember: records and the `MemoryStore` trait.
//!
//! A memory belongs to one user and is either user-wide or bound to one of
//! that user's threads. Every read is scoped by the caller's user key (and
//! thread), so one user's memories never reach another user's run. This
//! module knows nothing of tools or capabilities; it only stores and finds.

use hearth_core::Timestamp;

use crate::records::AuditEvent;

pub use hearth_core::records::memory::{
    MemoryHit, MemoryRecord, MemoryScope, NewMemory, SavedMemory,
};

/// Saved memories of users, searchable by full text.
#[async_trait::async_trait]
pub trait MemoryStore: Send + Sync + 'static {
    /// Saves a memory. Idempotent: when the same user already has the same
    /// text in the same scope (user-wide, or the same thread), that memory is
    /// returned (its `last_used_at` moved to `at`) and no second row is made,
    /// so a save redone after a crash changes nothing.
    async fn save_memory(&self, memory: NewMemory) -> crate::Result<SavedMemory>;

    /// Full-text search of the memories `scope` sees, best first, at most
    /// `limit` (0 means 10; at most 100). `query` is plain user text: it is reduced
    /// to quoted words, so search syntax in it is never interpreted, and a
    /// query without words finds nothing. What a search ranks is bounded
    /// however large the memory (the crate's `TextCandidates`): a word found
    /// in more than 1,000 of the scope's memories (`COMMON_WORD_MATCHES`)
    /// only adds to the score of memories a rarer word found.
    async fn search_memories(
        &self,
        scope: &MemoryScope,
        query: &str,
        limit: u32,
    ) -> crate::Result<Vec<MemoryHit>>;

    /// Marks the `ids` of `user_key` as used at `at` (they were just found),
    /// which keeps them from expiring. Returns how many were touched.
    async fn touch_memories(
        &self,
        user_key: &str,
        ids: &[i64],
        at: Timestamp,
    ) -> crate::Result<u64>;

    /// The memories `scope` sees, newest first, at most `limit` (0 means 50;
    /// at most 1000).
    async fn list_memories(
        &self,
        scope: &MemoryScope,
        limit: u32,
    ) -> crate::Result<Vec<MemoryRecord>>;

    /// Deletes memory `id` if it belongs to `user_key`. Returns whether one
    /// was deleted.
    async fn forget_memory(&self, user_key: &str, id: i64) -> crate::Result<bool>;

    /// Every memory of `user_key`, in every scope, oldest first (for export).
    async fn export_user_memories(&self, user_key: &str) -> crate::Result<Vec<MemoryRecord>>;

    /// Deletes every memory of `user_key`, text and search index alike, and
    /// stores `audit` (the erasure: who, whose, never what) in the audit log,
    /// in one transaction. Returns how many were deleted.
    async fn delete_user_memories(&self, user_key: &str, audit: AuditEvent) -> crate::Result<u64>;

    /// Deletes every memory last used before `unused_since`. Returns how many.
    async fn purge_memories(&self, unused_since: Timestamp) -> crate::Result<u64>;

    /// Stores `vector` as the embedding of memory `id` by `model`, replacing
    /// any earlier one. Returns false when the memory is gone (forgotten
    /// while it was being embedded); that is not an error.
    async fn set_memory_embedding(
        &self,
        id: i64,
        model: &str,
        vector: &[f32],
    ) -> crate::Result<bool>;

    /// Memories with no embedding by `model` (none yet, or one by another
    /// model), oldest first, at most `limit` (at most 1000): what the
    /// background pass embeds next.
    async fn memories_to_embed(&self, model: &str, limit: u32) -> crate::Result<Vec<MemoryRecord>>;

    /// How many memories have no embedding by `model` (what
    /// [`memories_to_embed`](Self::memories_to_embed) would hand out in
    /// all): the total of `hearth memory reembed`'s progress.
    async fn count_memories_to_embed(&self, model: &str) -> crate::Result<u64>;

    /// The memories `scope` sees whose embedding by `model` is most similar
    /// (cosine) to `query`, best first, at most `keep`, each with its
    /// similarity; only those pointing the query's way at all (cosine > 0).
    /// Ties go to the newer memory. Scored in Rust, brute force, as the rows
    /// are read (see `docs/scaling.md` for the limit).
    async fn nearest_memories(
        &self,
        scope: &MemoryScope,
        model: &str,
        query: &[f32],
        keep: usize,
    ) -> crate::Result<Vec<NearMemory>>;
}

/// Search results when the caller asks for 0, and at most.
const DEFAULT_SEARCH_LIMIT: u32 = 10;
const MAX_SEARCH_LIMIT: u32 = 100;
/// Listing page when the caller asks for 0, and at most.
const DEFAULT_LIST_LIMIT: u32 = 50;
const MAX_LIST_LIMIT: u32 = 1000;
/// Memories handed to the background embedding pass at most at once.
pub(crate) const MAX_TO_EMBED: u32 = 1000;
/// Words of a search query that are used; the rest are dropped so a pasted
/// essay cannot make one search arbitrarily expensive.
const MAX_QUERY_TERMS: usize = 32;

/// The number of hits a search returns for the `limit` asked.
pub(crate) fn search_limit(limit: u32) -> u32 {
    match limit {
        0 => DEFAULT_SEARCH_LIMIT,
        n => n.min(MAX_SEARCH_LIMIT),
    }
}

/// The number of memories a listing returns for the `limit` asked.
pub(crate) fn list_limit(limit: u32) -> u32 {
    match limit {
        0 => DEFAULT_LIST_LIMIT,
        n => n.min(MAX_LIST_LIMIT),
    }
}

/// The words of a search query, the only part of it any backend searches
/// for: each run of letters and digits, at most [`MAX_QUERY_TERMS`] of them.
/// Whatever else the text holds (quotes, operators, punctuation) is dropped,
/// so no backend's query syntax can be reached from user text.
pub(crate) fn query_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .take(MAX_QUERY_TERMS)
        .collect()
}

/// A query word found in more of a scope's memories than this is common.
/// Ranking every memory that shares a common word with the query is what
/// made a search over 10^5 facts take a third of a second (BENCHMARKS.md),
/// so a search ranks the memories its rarer words find instead.
pub(crate) const COMMON_WORD_MATCHES: u32 = 1000;

/// The memories a full-text search ranks, decided from how many memories of
/// the scope each distinct query word finds (counted up to one past
/// [`COMMON_WORD_MATCHES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TextCandidates {
    /// No word finds anything.
    Nothing,
    /// Those found by these words, each in at most [`COMMON_WORD_MATCHES`]
    /// memories; the common words still count in the score where the
    /// backend's ranking can weigh them.
    Rare(Vec<String>),
    /// Every word is common: the newest [`COMMON_WORD_MATCHES`] memories the
    /// query finds.
    Newest,
}

impl TextCandidates {
    /// The candidates for words and the memories each finds.
    pub(crate) fn from_counts(counts: impl IntoIterator<Item = (String, u64)>) -> Self {
        let mut rare = Vec::new();
        let mut common = false;
        for (word, found) in counts {
            if found > u64::from(COMMON_WORD_MATCHES) {
                common = true;
            } else if found > 0 {
                rare.push(word);
            }
        }
        match (rare.is_empty(), common) {
            (false, _) => Self::Rare(rare),
            (true, true) => Self::Newest,
            (true, false) => Self::Nothing,
        }
    }
}

/// The distinct words of a search query (compared without case, as every
/// backend's full-text index folds it), in their first order.
pub(crate) fn distinct_query_words(text: &str) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    query_words(text)
        .into_iter()
        .filter(|w| seen.insert(w.to_lowercase()))
        .collect()
}

/// A memory found by meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct NearMemory {
    /// The memory.
    pub memory: MemoryRecord,
    /// Cosine similarity of its embedding and the query, in (0, 1].
    pub similarity: f64,
}

/// A vector as stored on every backend: f32 little-endian, packed.
pub fn vector_to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The vector stored as `bytes`; `None` when the length is not a whole
/// number of f32s (a damaged row, skipped rather than scored wrong).
pub fn vector_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rare_words_pick_the_candidates_and_common_ones_do_not() {
        let c = |pairs: &[(&str, u64)]| {
            TextCandidates::from_counts(pairs.iter().map(|(w, n)| ((*w).to_owned(), *n)))
        };
        let common = u64::from(COMMON_WORD_MATCHES) + 1;
        assert_eq!(
            c(&[("user", common), ("b7", 2), ("say", 0), ("car", 1000)]),
            TextCandidates::Rare(vec!["b7".into(), "car".into()])
        );
        assert_eq!(
            c(&[("user", common), ("item", common)]),
            TextCandidates::Newest
        );
        assert_eq!(c(&[("user", common), ("say", 0)]), TextCandidates::Newest);
        assert_eq!(c(&[("say", 0)]), TextCandidates::Nothing);
        assert_eq!(c(&[]), TextCandidates::Nothing);
    }

    #[test]
    fn query_words_are_counted_once_whatever_their_case() {
        assert_eq!(
            distinct_query_words("Car car, the CAR and the b7"),
            vec!["Car", "the", "and", "b7"]
        );
    }

    #[test]
    fn vectors_round_trip_as_little_endian_f32() {
        let v = vec![1.0_f32, -0.5, 3.25e-7];
        let b = vector_to_bytes(&v);
        assert_eq!(&b[..4], &1.0_f32.to_le_bytes());
        assert_eq!(vector_from_bytes(&b), Some(v));
        assert_eq!(vector_from_bytes(&b[..5]), None);
    }
}
