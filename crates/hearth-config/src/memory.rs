//! `[memory]`: how saved memories are found.

use serde::{Deserialize, Serialize};

/// `[memory]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// `<provider>/<model>` that embeds memories, which turns on search by
    /// meaning; unset, memory is found by its words only. The provider must
    /// have an embeddings API hearth speaks (type `openai`, `openai_compat`
    /// or `gemini`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<String>,
    /// Megabytes of memory hearth (each replica, on PostgreSQL) may use to
    /// keep users' compact vectors between searches by meaning (default 64;
    /// 0 keeps none, and each search reads them from the database). A user
    /// of 100,000 facts embedded in 384 dimensions takes about 40 MB. Held
    /// only once someone searches by meaning, whole users evicted least
    /// recently searched first; every search checks what it holds against
    /// the database, so it never answers from stale vectors.
    pub vector_cache_mb: u32,
}

/// [`MemoryConfig::vector_cache_mb`] when not set.
pub const DEFAULT_VECTOR_CACHE_MB: u32 = 64;

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            embeddings: None,
            vector_cache_mb: DEFAULT_VECTOR_CACHE_MB,
        }
    }
}
