//! Request and response bodies of the API that are not core types.

use std::collections::BTreeMap;

use hearth_core::DeliveryMode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::schemas::{Capability, Grantable, Key, Scope, Source, Subject, UsageTime};

/// `POST /v1/messages`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageRequest {
    /// The message; required, not only white space.
    #[schema(
        min_length = 1,
        pattern = r"[^\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
    )]
    pub text: String,
    /// Default `api:default`.
    #[schema(value_type = Option<Key>)]
    pub thread_key: Option<String>,
    /// Default `api:user:anonymous`.
    #[schema(value_type = Option<Key>)]
    pub user_key: Option<String>,
    /// Default `api`; not `direct`.
    #[schema(value_type = Option<Source>)]
    pub source: Option<String>,
    /// Default `follow_up`.
    pub delivery_mode: Option<DeliveryMode>,
    /// Same key on the same thread returns the same run. With the
    /// `Idempotency-Key` header too, both must be equal
    /// (`idempotency_mismatch`).
    #[schema(value_type = Option<Key>)]
    pub idempotency_key: Option<String>,
    /// Wait for the run to finish (default false).
    pub wait: Option<bool>,
    /// Default 60, at most 600; a whole number (`5.0` is 5).
    #[schema(minimum = 0, maximum = 600)]
    #[serde(default, deserialize_with = "crate::schemas::whole_u64")]
    pub wait_timeout_secs: Option<u64>,
}

/// `GET /healthz`
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: &'static str,
    /// hearth's version.
    pub version: &'static str,
}

/// `GET /readyz`
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    /// `ready` or `not_ready`.
    pub status: &'static str,
    /// The store's backend: `sqlite` or `postgres`.
    pub store: &'static str,
    /// This replica's id (its lease owner id).
    pub replica: String,
    /// Each check's result.
    pub checks: BTreeMap<String, String>,
}

/// `GET /v1/runs`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<hearth_core::RunEnvelope>,
}

/// Query of `GET /v1/threads`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ThreadsQuery {
    /// At most this many (default 50).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// One thread of `GET /v1/threads`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ThreadSummary {
    /// The thread.
    pub thread_key: String,
    /// How many runs it has.
    pub runs: u64,
    /// When its newest run was accepted (RFC 3339).
    #[schema(format = DateTime)]
    pub last_run_at: String,
}

/// `GET /v1/threads`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ThreadList {
    /// The threads that have runs, the most recently active first.
    pub threads: Vec<ThreadSummary>,
}

/// Query of `GET /v1/runs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunQuery {
    /// Only this thread.
    #[param(value_type = Option<Key>)]
    pub thread_key: Option<String>,
    /// Only this status.
    #[param(value_type = Option<hearth_core::RunStatus>)]
    pub status: Option<String>,
    /// At most this many (default 50).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// One step of `GET /v1/runs/{run_id}/trace`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceStep {
    /// Position in the run.
    pub index: u32,
    /// `llm`, `tool`, `route`, `compaction`, or `delegate` (a `delegate`
    /// call that started a sub-agent).
    pub kind: String,
    /// Model or tool name.
    pub name: String,
    /// `started`, `succeeded`, `failed`.
    pub status: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub started_at: String,
    /// RFC 3339, once finished.
    #[schema(format = DateTime)]
    pub finished_at: Option<String>,
    /// Token usage of a model call.
    #[schema(value_type = Option<Object>)]
    pub tokens: Option<serde_json::Value>,
    /// What a `compaction` step did (`{"tokens_before","tokens_after"}`), how
    /// a `route` step chose, or why a failed model call failed
    /// (`{"kind","message"}`, the provider's error with secrets redacted);
    /// for a tool call the run's permission mode and what it decided
    /// (`{"mode","decision"}`, decision `ran`, `asked`, `refused` or
    /// `not_offered`); for a `delegate` step the sub-agent
    /// (`{"child_run_id","model","status","steps","cost_usd"}`); `null` for
    /// answered model calls.
    #[schema(value_type = Option<Object>)]
    pub detail: Option<serde_json::Value>,
}

/// Query of `GET /v1/threads/{thread_key}/history`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// At most this many (default 50).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Only messages older than this one: the `next_before` of the previous page.
    #[param(minimum = 1)]
    pub before: Option<i64>,
}

/// One stored message of a thread.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryMessage {
    /// Its id (opaque; a page cursor).
    pub id: String,
    /// `user`, `assistant`, `tool` or `summary`.
    pub role: String,
    /// Its text; `null` for tool calls and results.
    pub text: Option<String>,
    /// The run that wrote it.
    pub run_id: Option<String>,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// True when a summary replaces it in what the model is sent (for a
    /// summary: a newer summary does). It stays stored all the same.
    pub compacted: bool,
}

/// `GET /v1/threads/{thread_key}/history`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct History {
    /// Newest first.
    pub messages: Vec<HistoryMessage>,
    /// `before` for the next (older) page; `null` on the last one.
    pub next_before: Option<String>,
}

impl From<hearth_core::records::history::HistoryPage> for History {
    fn from(p: hearth_core::records::history::HistoryPage) -> Self {
        Self {
            messages: p
                .messages
                .into_iter()
                .map(|m| HistoryMessage {
                    id: m.id.to_string(),
                    role: m.role,
                    text: m.text,
                    run_id: m.run_id,
                    created_at: hearth_core::rfc3339(m.created_at),
                    compacted: m.compacted,
                })
                .collect(),
            next_before: p.next_before.map(|b| b.to_string()),
        }
    }
}

/// `GET /v1/runs/{run_id}/trace`
#[derive(Debug, Serialize, ToSchema)]
pub struct Trace {
    /// The run.
    pub run_id: String,
    /// Its steps.
    pub steps: Vec<TraceStep>,
}

/// Capabilities of a model.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Capabilities {
    /// Tool calling.
    pub tools: bool,
    /// Several tool calls in one answer.
    pub parallel_tool_calls: bool,
    /// Streamed answers.
    pub streaming: bool,
    /// Reports token usage.
    pub usage_metrics: bool,
    /// JSON output mode.
    pub json_mode: bool,
    /// Reasoning control.
    pub thinking: bool,
    /// Context window in tokens that compaction works against.
    #[serde(default)]
    pub context_window: u32,
    /// True when the window is not known and `[agent]
    /// default_context_tokens` is assumed.
    #[serde(default)]
    pub context_window_assumed: bool,
}

/// One model of `GET /v1/models`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModelInfo {
    /// `<provider>/<model>`.
    pub id: String,
    /// Provider name.
    pub provider: String,
    /// What it can do.
    pub capabilities: Capabilities,
}

/// `GET /v1/models`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Models {
    /// The default model.
    pub default: String,
    /// Known models.
    pub models: Vec<ModelInfo>,
}

/// `GET /v1/threads/{thread_key}` and `.../runtime`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ThreadRuntime {
    /// The thread.
    pub thread_key: String,
    /// Effective model.
    pub model: String,
    /// Thinking level.
    pub thinking: String,
    /// Incognito flag.
    pub incognito: bool,
    /// Stored messages.
    pub message_count: u64,
    /// The permission mode in force (a lapsed one has fallen back).
    pub mode: Mode,
    /// When the mode lapses (RFC 3339); `null` when it does not.
    #[schema(format = DateTime)]
    pub mode_expires_at: Option<String>,
}

impl From<hearth_runtime::ThreadRuntime> for ThreadRuntime {
    fn from(t: hearth_runtime::ThreadRuntime) -> Self {
        Self {
            thread_key: t.thread_key,
            model: t.model,
            thinking: t.thinking,
            incognito: t.incognito,
            message_count: t.message_count,
            mode: t.mode.into(),
            mode_expires_at: t.mode_expires_at.map(hearth_core::rfc3339),
        }
    }
}

/// A permission mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// No tools are offered.
    Deny,
    /// Only read-class tools; the model answers with a plan.
    Plan,
    /// Every write-class call asks first.
    Ask,
    /// Calls of `[permissions] edit_tools` run without asking.
    AcceptEdits,
    /// Every allowed write runs without asking, but `always_ask` ones.
    Auto,
    /// Nothing asks; lapses to `ask`.
    Bypass,
}

impl From<hearth_core::PermissionMode> for Mode {
    fn from(m: hearth_core::PermissionMode) -> Self {
        use hearth_core::PermissionMode as P;
        match m {
            P::Deny => Self::Deny,
            P::Plan => Self::Plan,
            P::Ask => Self::Ask,
            P::AcceptEdits => Self::AcceptEdits,
            P::Auto => Self::Auto,
            P::Bypass => Self::Bypass,
        }
    }
}

/// `PUT /v1/threads/{thread_key}/mode`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMode {
    /// `deny`, `plan`, `ask`, `accept_edits`, `auto` or `bypass` (another
    /// value is 400 `invalid_mode`).
    pub mode: String,
    /// Seconds until the mode lapses (back to the default; `bypass` to
    /// `ask`, and at most `[permissions] bypass_minutes` in any case).
    #[schema(minimum = 1, maximum = 31536000)]
    pub expires_in_secs: Option<u64>,
}

/// The answer of `PUT /v1/threads/{thread_key}/mode`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModeSet {
    /// The mode now in force.
    pub mode: Mode,
    /// When it lapses (RFC 3339); `null` when it does not.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
}

/// `PUT /v1/threads/{thread_key}/model`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetModel {
    /// `<provider>/<model>` of a configured provider (another is 400
    /// `unknown_model`).
    #[schema(min_length = 3, pattern = "^[^/]+/.+$")]
    pub model: String,
}

/// `PUT /v1/threads/{thread_key}/thinking`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetThinking {
    /// `off`, `low`, `medium`, `high`.
    #[schema(value_type = ThinkingLevelName)]
    pub level: String,
}

/// A thinking level, as the API spells it.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum ThinkingLevelName {
    /// No reasoning requested.
    Off,
    /// A little.
    Low,
    /// Some.
    Medium,
    /// A lot.
    High,
}

/// How `GET /v1/usage` groups model calls.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum UsageGroupBy {
    /// By provider name (the default).
    Provider,
    /// By `<provider>/<model>`.
    Model,
    /// By UTC day, `YYYY-MM-DD`.
    Day,
}

/// `POST /v1/confirmations/{token}`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmRequest {
    /// Who answers: the user who asked, or a holder of `confirmations.resolve_any`.
    #[schema(value_type = Key)]
    pub user_key: String,
    /// True to run the action, false to refuse it.
    pub approve: bool,
}

/// `PUT /v1/threads/{thread_key}/incognito`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetIncognito {
    /// On or off.
    pub enabled: bool,
}

/// Query of `GET /v1/usage`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageParams {
    /// From: RFC 3339, `today`, or an age such as `7d`.
    #[param(value_type = Option<UsageTime>)]
    pub since: Option<String>,
    /// Until (exclusive), same forms.
    #[param(value_type = Option<UsageTime>)]
    pub until: Option<String>,
    /// `provider` (default), `model` or `day`.
    #[param(value_type = Option<UsageGroupBy>)]
    pub group_by: Option<String>,
}

/// One group of `GET /v1/usage`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageRow {
    /// Provider, `<provider>/<model>` or `YYYY-MM-DD`.
    pub key: String,
    /// Model calls, failed ones included.
    pub calls: u64,
    /// Prompt tokens, cached included.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Estimated USD from list prices; null when a model is not priced.
    pub cost_usd: Option<f64>,
    /// Calls whose provider reported no usage.
    pub untracked_calls: u64,
}

/// `GET /v1/usage`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageRows {
    /// Groups, by key.
    pub rows: Vec<UsageRow>,
}

/// Query of `GET /v1/tools`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolsParams {
    /// A channel (`api`, `telegram`, ...): its effective list.
    pub channel: Option<String>,
}

/// One tool of `GET /v1/tools`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolInfo {
    /// Wire name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// `read` or `write`.
    #[schema(pattern = "^(read|write)$")]
    pub class: &'static str,
    /// The capability a user needs, if any.
    pub capability: Option<&'static str>,
    /// `builtin`, `mcp:<server>` or `skill:<name>`.
    pub source: String,
    /// False while the tool cannot run (its MCP server is down).
    pub available: bool,
}

/// `GET /v1/tools`
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    /// By name.
    pub tools: Vec<ToolInfo>,
}

/// The error body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What failed: a `snake_case` code and a sentence that says what to do.
    pub error: ErrorDetail,
}

/// The error's code and message.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// snake_case code.
    pub code: String,
    /// A sentence for people.
    pub message: String,
}

/// Body of `POST` and `DELETE /v1/permissions/grants`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// `user:<user_key>` or `role:<id>`.
    #[schema(value_type = Subject)]
    pub subject: String,
    /// A capability (`web.fetch`, ...), `preset:<name>` or a configured
    /// MCP server's `mcp.<server>`.
    #[schema(value_type = Grantable)]
    pub capability: String,
    /// `global` (the default) or a channel's space (`discord:guild:<id>`, ...).
    #[schema(value_type = Option<Scope>)]
    pub scope: Option<String>,
}

/// One grant.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GrantView {
    /// `user:<user_key>` or `role:<id>`.
    pub subject: String,
    /// A capability or `preset:<name>`.
    pub capability: String,
    /// `global` or a channel's space.
    pub scope: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub granted_at: String,
}

impl From<hearth_core::records::Grant> for GrantView {
    fn from(g: hearth_core::records::Grant) -> Self {
        Self {
            subject: g.subject,
            capability: g.capability,
            scope: g.scope,
            granted_at: hearth_core::rfc3339(g.granted_at),
        }
    }
}

/// `DELETE /v1/permissions/grants`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RemovedGrant {
    /// The grant that was removed.
    pub removed: GrantView,
}

/// Query of `GET /v1/permissions`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PermissionsParams {
    /// `global` (the default) or a channel's space.
    #[param(value_type = Option<Scope>)]
    pub scope: Option<String>,
}

/// `GET /v1/permissions`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Permissions {
    /// The scope listed.
    pub scope: String,
    /// What every user holds: `none`, `member`, `trusted` or `admin`.
    #[schema(pattern = "^(none|member|trusted|admin)$")]
    pub default_preset: String,
    /// The grants in the scope, by subject then capability.
    pub grants: Vec<GrantView>,
}

/// Query of `GET /v1/permissions/check`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CheckParams {
    /// The user.
    #[param(required = true, value_type = Key)]
    pub user_key: Option<String>,
    /// A capability (not a preset).
    #[param(required = true, value_type = Capability)]
    pub capability: Option<String>,
    /// `global` (the default) or a channel's space.
    #[param(value_type = Option<Scope>)]
    pub scope: Option<String>,
    /// Role ids the user holds, comma-separated (a Discord member's roles
    /// in the guild named by `scope`): grants to `role:<id>` count. At most
    /// 250 ids, each at most 251 characters.
    #[param(pattern = r"^([^,\u0000-\u001F\u007F-\u009F]+(,[^,\u0000-\u001F\u007F-\u009F]+)*)?$")]
    pub roles: Option<String>,
}

/// `GET /v1/permissions/check`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CheckResult {
    /// Whether the user holds the capability.
    pub allowed: bool,
    /// `admin`, `preset` or `grant`; null when not allowed.
    #[schema(pattern = "^(admin|preset|grant)$")]
    pub via: Option<String>,
}

/// Query of `GET /v1/audit`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// At most this many (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// One audit log entry: ids only, never message text.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditEventView {
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub at: String,
    /// Who acted (`operator`, a user key, ...).
    pub actor: String,
    /// What was attempted (`grant.add`, `grant.remove`, `tool.call`, ...).
    pub action: String,
    /// What it was attempted on (a subject, a tool name, ...).
    pub target: String,
    /// How it ended (`ok`, `denied`, ...).
    pub outcome: String,
    /// The capability involved.
    pub capability: Option<String>,
    /// The scope involved.
    pub scope: Option<String>,
}

impl From<hearth_core::records::AuditEvent> for AuditEventView {
    fn from(e: hearth_core::records::AuditEvent) -> Self {
        Self {
            at: hearth_core::rfc3339(e.at),
            actor: e.actor,
            action: e.action,
            target: e.target,
            outcome: e.outcome,
            capability: e.capability,
            scope: e.scope,
        }
    }
}

/// `GET /v1/audit`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditEvents {
    /// Newest first.
    pub events: Vec<AuditEventView>,
}
