//! Usage: model calls counted for cost, never their text.

use crate::Timestamp;

/// One model call as counted for budgets: when, which model, whose, and
/// the tokens reported (0 where none were).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallUsage {
    /// When it started, unix ms.
    pub at: Timestamp,
    /// `<provider>/<model>`.
    pub model: String,
    /// Its thread; `None` for incognito runs.
    pub thread_key: Option<String>,
    /// Its user; `None` for incognito runs.
    pub user_key: Option<String>,
    /// Prompt tokens, cached included.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Prompt tokens written to a cache.
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
}
