//! Records that cross the store's boundary and the runtime's API: hearth-store
//! defines the traits that read and write them, and re-exports them where
//! they used to live. Times are unix milliseconds.

pub mod history;
pub mod jobs;
pub mod memory;
pub mod outbox;
pub mod retention;
pub mod router;
pub mod usage;

use crate::{Message, RunStatus, Timestamp};
use serde::{Deserialize, Serialize};

/// A run to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// `run_...`, from `crate::new_run_id`.
    pub run_id: String,
    /// The thread.
    pub thread_key: String,
    /// The sender.
    pub user_key: String,
    /// The surface it came from.
    pub source: String,
    /// The message text.
    pub input: String,
    /// Idempotency key, unique per thread when given.
    pub idempotency_key: Option<String>,
    /// Acceptance time.
    pub created_at: Timestamp,
    /// The permission scope the run is checked in (`None`: the thread's
    /// channel decides, else `global`).
    pub scope: Option<String>,
    /// The sender's platform role ids (grants to `role:<id>` apply).
    pub roles: Vec<String>,
    /// The run whose `delegate` call started this one (a sub-agent).
    pub parent_run_id: Option<String>,
}

/// What `create_run` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateRunOutcome {
    /// The run was stored now.
    Created(RunRecord),
    /// The idempotency key was already used on the thread: this is that run.
    Existing(RunRecord),
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// Id.
    pub run_id: String,
    /// Arrival order across the store (monotonic); the scheduler orders by it.
    pub seq: i64,
    /// Thread.
    pub thread_key: String,
    /// Sender.
    pub user_key: String,
    /// Surface.
    pub source: String,
    /// Message text.
    pub input: String,
    pub idempotency_key: Option<String>,
    pub status: RunStatus,
    /// Answer text once succeeded.
    pub output: Option<String>,
    /// Error code once failed.
    pub error_code: Option<String>,
    /// Error message once failed.
    pub error_message: Option<String>,
    /// `<provider>/<model>` once started: the one it was started with, and
    /// once finished the one that produced the answer.
    pub model: Option<String>,
    /// The model the run was asked to use, kept only when failover or the
    /// router made another one answer (`model` then names that one).
    pub requested_model: Option<String>,
    /// Lease holder while running.
    pub lease_owner: Option<String>,
    /// Lease expiry while running.
    pub lease_until: Option<Timestamp>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Id of the run's terminal event in its live event stream, once finished.
    pub last_event_seq: Option<u64>,
    /// The permission scope it was asked in; `None` for runs stored before
    /// scopes were (and for runs with no scope of their own).
    pub scope: Option<String>,
    /// The sender's platform role ids when it was asked.
    pub roles: Vec<String>,
    /// The permission mode it started with (`deny` ... `bypass`), recorded
    /// by its first claim and kept through recovery; `None` before it
    /// started (and for runs stored before modes were).
    pub mode: Option<String>,
    /// The run whose `delegate` call started this one (a sub-agent).
    pub parent_run_id: Option<String>,
}

/// Filter for `list_runs`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunFilter {
    /// Only this thread.
    pub thread_key: Option<String>,
    /// Only this status.
    pub status: Option<RunStatus>,
    /// At most this many (the store caps it at 1000).
    pub limit: u32,
    /// Only runs accepted before this run (a page's cursor: the last run
    /// of the page before). A run id the store does not hold gives none.
    pub before: Option<String>,
    /// Only this user's runs.
    pub user_key: Option<String>,
    /// Only runs from this source (`api`, `telegram`, `job`, ...).
    pub source: Option<String>,
    /// Only runs answered by this model (`<provider>/<model>`).
    pub model: Option<String>,
    /// Only runs accepted at or after this time.
    pub since: Option<Timestamp>,
    /// Only runs accepted before this time.
    pub until: Option<Timestamp>,
}

/// One thread's activity, for listing threads (`list_threads`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadActivity {
    /// The thread.
    pub thread_key: String,
    /// How many runs it has.
    pub runs: u64,
    /// When its newest run was accepted.
    pub last_run_at: Timestamp,
}

/// A message found by searching every thread's history for words
/// (`search_messages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageHit {
    /// The message's id (newer messages have larger ids; the cursor of the
    /// next page).
    pub id: i64,
    /// Its thread.
    pub thread_key: String,
    /// `user`, `assistant`, ...
    pub role: String,
    /// Its stored content.
    pub content: String,
    /// When it was stored.
    pub created_at: Timestamp,
}

/// Aggregate health of the runs asked in one scope over a window (see
/// `RunStore::run_stats`): counts and timings only, nothing per user.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunStats {
    /// Runs by status, for the statuses that occur, in `RunStatus::ALL` order.
    pub by_status: Vec<(RunStatus, u64)>,
    /// Median time from acceptance to the end of finished runs, in ms
    /// (`None` when none finished).
    pub latency_p50_ms: Option<u64>,
    /// 95th percentile of the same (nearest rank).
    pub latency_p95_ms: Option<u64>,
    /// The most called tools with their call counts, most called first
    /// (ties by name).
    pub top_tools: Vec<(String, u64)>,
}

impl RunStats {
    /// Runs of every status.
    pub fn total(&self) -> u64 {
        self.by_status.iter().map(|(_, n)| n).sum()
    }
}

/// Kind of a journal step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A model call.
    Llm,
    /// A tool call.
    Tool,
    /// A model call that summarized the oldest turns of the thread; its
    /// payload's `detail` holds `tokens_before` and `tokens_after`.
    Compaction,
    /// The router's choice of model (its `detail` in the payload).
    Route,
}

impl StepKind {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Llm => "llm",
            Self::Tool => "tool",
            Self::Compaction => "compaction",
            Self::Route => "route",
        }
    }

    /// True for steps that are model calls (counted in usage).
    pub fn is_model_call(self) -> bool {
        match self {
            Self::Llm | Self::Compaction => true,
            Self::Tool | Self::Route => false,
        }
    }
}

/// Status of a journal step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Begun, no outcome recorded yet.
    Started,
    /// Finished normally.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Cut off mid-way (the run was cancelled while a write-class call ran):
    /// it may or may not have taken effect, and is never repeated.
    Unknown,
}

impl StepStatus {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}

/// One journaled step of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// The run.
    pub run_id: String,
    /// 0-based position in the run.
    pub index: u32,
    /// Model or tool call.
    pub kind: StepKind,
    /// Model reference or tool name.
    pub name: String,
    /// Outcome so far.
    pub status: StepStatus,
    /// Begun at.
    pub started_at: Timestamp,
    /// Ended at, once ended.
    pub finished_at: Option<Timestamp>,
    /// Token usage of a model call (JSON of `crate::Usage`), if any.
    pub tokens: Option<serde_json::Value>,
    /// What recovery needs to resume: for a model call the assistant message it
    /// produced, for a tool call its call id, arguments and output. Internal:
    /// never shown in traces.
    pub payload: serde_json::Value,
}

/// How a run ends, with the messages it adds to its thread.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFinish {
    /// The run.
    pub run_id: String,
    /// `succeeded`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// The answer.
    pub output: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Messages appended to the thread, in order (user message, tool exchanges,
    /// the answer).
    pub messages: Vec<Message>,
    /// Steps to journal in the same transaction (e.g. the last model call).
    pub steps: Vec<StepRecord>,
    /// Runs to create in the same transaction: messages steered into this run
    /// that it never showed the model, queued as follow-ups so none is lost.
    pub follow_ups: Vec<NewRun>,
    /// When.
    pub finished_at: Timestamp,
    /// Id of the terminal event the live stream gives this end.
    pub last_event_seq: Option<u64>,
    /// Replies owed to a chat channel for this end (the answer, the clean-up
    /// of a progress message), queued in the same transaction.
    pub outbox: Vec<outbox::NewOutboxItem>,
    /// What this run taught the router (added to its arms' counts in the
    /// same transaction, so a kill cannot split them from the run's end).
    pub arm_observations: Vec<router::ArmStats>,
    /// The model that produced the answer, when one did; it replaces the
    /// run's `model` (`None` keeps it).
    pub model: Option<String>,
    /// The model the run was asked to use, when it differs from `model`
    /// (stored as the run's `requested_model`; `None` leaves it unset).
    pub requested_model: Option<String>,
    /// Ended by a process that is not executing the run (a cancel answered
    /// by another replica). On a shared store the unexpired lease of the
    /// replica that executes it stays on the ended run until that replica
    /// has stopped it and lets go, so the thread's next run cannot start
    /// while this one still runs there.
    pub executed_elsewhere: bool,
}

/// How `usage` groups its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    /// By provider name.
    Provider,
    /// By `<provider>/<model>`.
    Model,
    /// By UTC day, `YYYY-MM-DD`.
    Day,
}

/// A usage query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    /// From (inclusive), unix ms.
    pub since: Option<Timestamp>,
    /// Until (exclusive), unix ms.
    pub until: Option<Timestamp>,
    /// Grouping.
    pub group_by: UsageGroup,
}

/// One group of model calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    /// The group: provider, `<provider>/<model>` or `YYYY-MM-DD`.
    pub key: String,
    /// Calls, failed ones included.
    pub calls: u64,
    /// Sum of reported prompt tokens.
    pub input_tokens: u64,
    /// Sum of reported completion tokens.
    pub output_tokens: u64,
    /// Sum of reported cached prompt tokens.
    pub cached_tokens: u64,
    /// Calls whose provider reported no usage at all.
    pub untracked_calls: u64,
    /// The same per model, so callers can price a group that mixes models.
    pub by_model: Vec<ModelUsage>,
}

/// Token sums of one model within a usage group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelUsage {
    /// `<provider>/<model>`.
    pub model: String,
    pub calls: u64,
    /// Calls with no usage reported.
    pub untracked_calls: u64,
    /// Prompt tokens, cached included.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Prompt tokens written to the cache.
    pub cache_write_tokens: u64,
    /// Reasoning tokens as reported.
    pub reasoning_tokens: u64,
}

/// A message steered into a run, stored before it was acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerRecord {
    /// Increasing id; the engine records which ids it has shown the model.
    pub id: i64,
    /// The run it was steered into.
    pub run_id: String,
    /// The message.
    pub text: String,
    /// When it was accepted.
    pub created_at: Timestamp,
}

/// A thread's runtime settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadState {
    /// The thread.
    pub thread_key: String,
    /// Model override, `<provider>/<model>`.
    pub model: Option<String>,
    /// Thinking level; `off` by default.
    pub thinking: String,
    /// Incognito flag.
    pub incognito: bool,
    /// Messages in its history.
    pub message_count: u64,
    /// The permission mode set on the thread (`None`: the configured
    /// default), as stored: an expired one is still here.
    pub mode: Option<String>,
    /// When the mode set on the thread lapses, if it does.
    pub mode_expires_at: Option<Timestamp>,
}

impl ThreadState {
    /// Whether the thread has settings of its own that choose a run's
    /// model, thinking or mode otherwise than the defaults do. PostgreSQL's
    /// insert of a run stored assuming the defaults applies the same rule
    /// (`hearth-store` migration 0021): change both together.
    pub fn has_own_settings(&self) -> bool {
        self.model.is_some() || self.mode.is_some() || self.thinking != "off"
    }
}

/// What [`Store::new_session`](crate::Store::new_session) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NewSession {
    /// True when the named run was unfinished and is now `cancelled`.
    pub cancelled: bool,
    /// Messages deleted from the thread's history.
    pub cleared_messages: u64,
}

/// A token to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    /// Public id (`tok_...`).
    pub id: String,
    /// A label chosen by the operator.
    pub name: String,
    /// SHA-256 hex of the secret.
    pub hash_hex: String,
    /// Created.
    pub created_at: Timestamp,
    /// The user the token acts as; `None`: an operator token.
    pub user_key: Option<String>,
}

/// Who holds an unrevoked token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHolder {
    /// The token's name.
    pub name: String,
    /// The user it acts as; `None`: an operator token.
    pub user_key: Option<String>,
}

/// A dashboard login: a session (known by the hash of its id, which only
/// the browser's cookie holds) of an API token (known by its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiSession {
    /// SHA-256 hex of the session id.
    pub id_hash: String,
    /// SHA-256 hex of the API token it was opened with.
    pub token_hash: String,
    /// The CSRF token of its forms.
    pub csrf: String,
    /// Opened.
    pub created_at: Timestamp,
    /// Ends.
    pub expires_at: Timestamp,
}

/// A stored token (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Public id.
    pub id: String,
    /// Label.
    pub name: String,
    /// Created.
    pub created_at: Timestamp,
    /// Revoked, if so.
    pub revoked_at: Option<Timestamp>,
    /// The user it acts as; `None`: an operator token.
    pub user_key: Option<String>,
}

/// A stored secret's metadata (never its value, sealed or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretInfo {
    /// The secret's name.
    pub name: String,
    /// First stored.
    pub created_at: Timestamp,
    /// Last replaced.
    pub updated_at: Timestamp,
}

/// A community's provider key as it may be shown: which provider and when
/// it was set, never the key (sealed or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeCredentialInfo {
    /// The provider it is for (a name under `[llm.providers]`).
    pub provider: String,
    /// When it was last set.
    pub set_at: Timestamp,
}

/// A community's provider key as stored: sealed, or removed (the scope
/// had one; its runs then fail unless `[llm] community_fallback`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredScopeCredential {
    /// The sealed key; `None` once removed.
    pub sealed: Option<Vec<u8>>,
    /// When it was last set.
    pub set_at: Timestamp,
    /// When it was removed, if it was.
    pub removed_at: Option<Timestamp>,
}

/// A permission grant: `subject` holds `capability` in `scope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `user:<user_key>` or `role:<id>`.
    pub subject: String,
    /// A capability name or `preset:<name>`.
    pub capability: String,
    /// `global` or a channel's space (`discord:guild:<id>`, ...).
    pub scope: String,
    /// When it was granted.
    pub granted_at: Timestamp,
    /// Who granted it (an actor id, never a secret).
    pub granted_by: String,
}

/// One audit log entry: ids only, never message text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// When it happened.
    pub at: Timestamp,
    /// Who acted (`operator`, a user key, ...).
    pub actor: String,
    /// What was attempted (`grant.add`, `tool.call`, ...).
    pub action: String,
    /// What it was attempted on (a subject, a tool name, ...).
    pub target: String,
    /// How it ended (`ok`, `denied`, ...).
    pub outcome: String,
    /// The capability involved, if any.
    pub capability: Option<String>,
    /// The scope involved, if any.
    pub scope: Option<String>,
}

/// Where a confirmation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmationState {
    /// Waiting for the user.
    Pending,
    /// The user said yes: the call may run.
    Approved,
    /// The user said no (or sent another message instead).
    Denied,
    /// Nobody answered in time.
    Expired,
}

impl ConfirmationState {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "denied" => Self::Denied,
            "expired" => Self::Expired,
            _ => return None,
        })
    }
}

/// Who `resolved_by` names when a run ended (succeeded, failed or was
/// cancelled) with its question unanswered: the store marks such a
/// confirmation `expired` in the write that ends the run.
pub const RUN_ENDED: &str = "hearth:run_ended";

/// A write-class tool call waiting for (or past) the user's answer. The
/// token itself is never stored, only its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmationRecord {
    /// SHA-256 hex of the token.
    pub token_hash: String,
    /// The run that asked.
    pub run_id: String,
    /// The tool call it is about.
    pub call_id: String,
    /// The run's thread.
    pub thread_key: String,
    /// Who may answer (besides holders of `confirmations.resolve_any`).
    pub user_key: String,
    pub tool: String,
    /// One line saying what the call would do.
    pub summary: String,
    /// When it was asked.
    pub created_at: Timestamp,
    /// After this, it counts as denied.
    pub expires_at: Timestamp,
    /// Where it stands.
    pub state: ConfirmationState,
    /// Who answered: a user key, or `hearth:<reason>` when hearth decided.
    pub resolved_by: Option<String>,
    /// When it was answered.
    pub resolved_at: Option<Timestamp>,
}
