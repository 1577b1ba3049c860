//! Records that cross the `Store` boundary; they live in `hearth_core::records`.

pub use hearth_core::records::{
    AuditEvent, ConfirmationRecord, ConfirmationState, CreateRunOutcome, Grant, MessageHit,
    ModelUsage, NewRun, NewSession, NewToken, RUN_ENDED, RunFilter, RunFinish, RunRecord, RunStats,
    ScopeCredentialInfo, SecretInfo, SteerRecord, StepKind, StepRecord, StepStatus,
    StoredScopeCredential, ThreadActivity, ThreadState, TokenHolder, TokenRecord, UiSession,
    UsageGroup, UsageQuery, UsageRow,
};

/// How a run is stored claimed as it is created: by `owner` until
/// `lease_until`, with `model` (empty: held, for its worker to prepare and
/// claim again) and `mode`; `assumes_defaults` when they were chosen from
/// the defaults without the thread's settings read
/// ([`Store::create_claimed_run_assuming_defaults`](crate::Store::create_claimed_run_assuming_defaults)).
#[derive(Debug, Clone, Copy)]
pub struct RunClaim<'a> {
    /// The replica that claims it.
    pub owner: &'a str,
    /// Its lease's end.
    pub lease_until: hearth_core::Timestamp,
    /// `<provider>/<model>`, or empty.
    pub model: &'a str,
    /// The permission mode it runs in, when known.
    pub mode: Option<&'a str>,
    /// The model and mode were chosen from the defaults.
    pub assumes_defaults: bool,
}
