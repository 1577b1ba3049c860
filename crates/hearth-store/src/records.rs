//! Records that cross the `Store` boundary; they live in `hearth_core::records`.

pub use hearth_core::records::{
    AuditEvent, ConfirmationRecord, ConfirmationState, CreateRunOutcome, Grant, MessageHit,
    ModelUsage, NewRun, NewSession, NewToken, RUN_ENDED, RunFilter, RunFinish, RunRecord, RunStats,
    ScopeCredentialInfo, SecretInfo, SteerRecord, StepKind, StepRecord, StepStatus,
    StoredScopeCredential, ThreadActivity, ThreadState, TokenHolder, TokenRecord, UiSession,
    UsageGroup, UsageQuery, UsageRow,
};
