//! Usage: model calls counted for cost, never their text.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{ModelUsage, StepRecord, UsageQuery, UsageRow};

pub use hearth_core::records::usage::CallUsage;

/// Model calls counted for usage and cost.
#[async_trait::async_trait]
pub trait UsageStore: Send + Sync + 'static {
    /// Model calls grouped for usage and cost.
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>>;

    /// Counts model calls of runs stored elsewhere (incognito) in usage,
    /// without their thread or user: only provider, model, tokens, timing.
    /// Steps that are not finished model calls are skipped.
    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()>;

    /// Every model call from `since` (inclusive) on, oldest first: what
    /// budget pools rebuild their use from at start.
    async fn calls_since(&self, since: Timestamp) -> Result<Vec<CallUsage>>;

    /// Counts one model call made outside any run (an embedding of memory):
    /// a usage row with `purpose`, under the call's own id, so usage and
    /// budgets rebuilt at start see it. Recording the same id twice keeps
    /// the first.
    async fn record_model_call(&self, call: ModelCall) -> Result<()>;
}

/// A model call outside a run, as [`UsageStore::record_model_call`] stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    /// The call's own id (stored where a run's id goes), e.g. `emb_<uuid>`.
    pub call_id: String,
    /// When it started, unix ms.
    pub at: Timestamp,
    /// The provider's configured name.
    pub provider: String,
    /// The model.
    pub model: String,
    /// What it was for, e.g. `embedding`.
    pub purpose: String,
    /// Whose it was; `None` for nobody's.
    pub user_key: Option<String>,
    /// Its thread, when one.
    pub thread_key: Option<String>,
    /// Prompt tokens reported.
    pub input_tokens: Option<u64>,
    /// How long it took, ms.
    pub latency_ms: i64,
    /// The error's kind when it failed; `None` when it succeeded.
    pub error_kind: Option<String>,
}

/// Adds one model's sums to the usage rows being built from rows sorted by
/// group key: a new key opens a group, and each group totals its models.
pub(crate) fn add_model_usage(out: &mut Vec<UsageRow>, key: String, m: ModelUsage) {
    if out.last().is_none_or(|r| r.key != key) {
        out.push(UsageRow {
            key,
            calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            untracked_calls: 0,
            by_model: Vec::new(),
        });
    }
    if let Some(r) = out.last_mut() {
        r.calls += m.calls;
        r.input_tokens += m.input_tokens;
        r.output_tokens += m.output_tokens;
        r.cached_tokens += m.cached_tokens;
        r.untracked_calls += m.untracked_calls;
        r.by_model.push(m);
    }
}
