//! Request and response bodies of the API that are not core types.

use std::collections::BTreeMap;

use hearth_core::DeliveryMode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/messages`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageRequest {
    /// The message; required, non-empty.
    pub text: String,
    /// Default `api:default`.
    pub thread_key: Option<String>,
    /// Default `api:user:anonymous`.
    pub user_key: Option<String>,
    /// Default `api`.
    pub source: Option<String>,
    /// Default `follow_up`.
    pub delivery_mode: Option<DeliveryMode>,
    /// Same key on the same thread returns the same run.
    pub idempotency_key: Option<String>,
    /// Wait for the run to finish (default false).
    pub wait: Option<bool>,
    /// Default 60, at most 600.
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
    /// Each check's result.
    pub checks: BTreeMap<String, String>,
}

/// `GET /v1/runs`
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<hearth_core::RunEnvelope>,
}

/// Query of `GET /v1/runs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct RunQuery {
    /// Only this thread.
    pub thread_key: Option<String>,
    /// Only this status.
    pub status: Option<String>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<u32>,
}

/// One step of `GET /v1/runs/{run_id}/trace`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceStep {
    /// Position in the run.
    pub index: u32,
    /// `llm` or `tool`.
    pub kind: String,
    /// Model or tool name.
    pub name: String,
    /// `started`, `succeeded`, `failed`.
    pub status: String,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339, once finished.
    pub finished_at: Option<String>,
    /// Token usage of a model call.
    #[schema(value_type = Option<Object>)]
    pub tokens: Option<serde_json::Value>,
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
#[derive(Debug, Serialize, ToSchema)]
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
}

/// One model of `GET /v1/models`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelInfo {
    /// `<provider>/<model>`.
    pub id: String,
    /// Provider name.
    pub provider: String,
    /// What it can do.
    pub capabilities: Capabilities,
}

/// `GET /v1/models`
#[derive(Debug, Serialize, ToSchema)]
pub struct Models {
    /// The default model.
    pub default: String,
    /// Known models.
    pub models: Vec<ModelInfo>,
}

/// `GET /v1/threads/{thread_key}/runtime`
#[derive(Debug, Serialize, ToSchema)]
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
}

impl From<hearth_runtime::ThreadRuntime> for ThreadRuntime {
    fn from(t: hearth_runtime::ThreadRuntime) -> Self {
        Self {
            thread_key: t.thread_key,
            model: t.model,
            thinking: t.thinking,
            incognito: t.incognito,
            message_count: t.message_count,
        }
    }
}

/// `PUT /v1/threads/{thread_key}/model`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetModel {
    /// `<provider>/<model>`.
    pub model: String,
}

/// `PUT /v1/threads/{thread_key}/thinking`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetThinking {
    /// `off`, `low`, `medium`, `high`.
    pub level: String,
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
pub struct UsageParams {
    /// From: RFC 3339, `today`, or an age such as `7d`.
    pub since: Option<String>,
    /// Until (exclusive), same forms.
    pub until: Option<String>,
    /// `provider` (default), `model` or `day`.
    pub group_by: Option<String>,
}

/// One group of `GET /v1/usage`.
#[derive(Debug, Serialize, ToSchema)]
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
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageRows {
    /// Groups, by key.
    pub rows: Vec<UsageRow>,
}

/// The error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The error's code and message.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// snake_case code.
    pub code: String,
    /// A sentence for people.
    pub message: String,
}
