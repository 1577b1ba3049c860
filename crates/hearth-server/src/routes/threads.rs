//! Models and per-thread runtime settings.

use axum::Json;
use axum::extract::State;
use hearth_core::{ThinkingLevel, ThreadKey};

use crate::AppState;
use crate::dto::{
    Capabilities, ModeSet, ModelInfo, Models, SetIncognito, SetMode, SetModel, SetThinking,
    ThreadList, ThreadRuntime, ThreadSummary, ThreadsQuery,
};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath, ApiQuery, page_limit};

/// How many threads `GET /v1/threads` lists without a `limit`.
const DEFAULT_THREADS_LIMIT: u32 = 50;

fn capabilities(c: hearth_runtime::Capabilities, default_window: u32) -> Capabilities {
    Capabilities {
        // Model-dependent tools are offered (and dropped if the server refuses).
        tools: c.tools != hearth_runtime::ToolSupport::No,
        parallel_tool_calls: c.parallel_tool_calls,
        streaming: c.streaming,
        usage_metrics: c.usage_metrics,
        json_mode: c.json_mode,
        thinking: c.thinking,
        context_window: c.context_window.unwrap_or(default_window),
        context_window_assumed: c.context_window.is_none(),
    }
}

/// The configured models and the default.
#[utoipa::path(get, path = "/v1/models", tag = "models",
    responses((status = 200, description = "The models and the default", body = Models)))]
pub async fn models(State(st): State<AppState>) -> Json<Models> {
    let list = st.runtime.models();
    Json(Models {
        default: list.default.to_string(),
        models: list
            .models
            .into_iter()
            .map(|m| ModelInfo {
                id: m.model.to_string(),
                provider: m.model.provider,
                capabilities: capabilities(m.capabilities, list.default_context_tokens),
            })
            .collect(),
    })
}

/// The threads that have runs, the most recently active first.
#[utoipa::path(get, path = "/v1/threads", tag = "threads", params(ThreadsQuery),
    responses((status = 200, description = "Threads, the most recently active first", body = ThreadList),
        (status = 400, body = crate::dto::ErrorBody)))]
pub async fn list_threads(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<ThreadsQuery>,
) -> Result<Json<ThreadList>, ApiError> {
    let limit = page_limit(q.limit, DEFAULT_THREADS_LIMIT)?;
    let threads = st.runtime.list_threads(limit).await?;
    Ok(Json(ThreadList {
        threads: threads
            .into_iter()
            .map(|t| ThreadSummary {
                thread_key: t.thread_key,
                runs: t.runs,
                last_run_at: hearth_core::rfc3339(t.last_run_at),
            })
            .collect(),
    }))
}

/// A thread's model, thinking level, incognito flag and message count.
#[utoipa::path(get, path = "/v1/threads/{thread_key}/runtime", tag = "threads",
    params(("thread_key" = crate::schemas::Key, Path, description = "Thread key")),
    responses((status = 200, description = "The thread's settings", body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn runtime(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Ok(Json(
        st.runtime
            .thread_runtime(&ThreadKey::new(thread_key)?)
            .await?
            .into(),
    ))
}

/// A thread's settings: model, thinking level, incognito flag, message
/// count and permission mode.
#[utoipa::path(get, path = "/v1/threads/{thread_key}", tag = "threads",
    params(("thread_key" = crate::schemas::Key, Path, description = "Thread key")),
    responses((status = 200, description = "The thread's settings", body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn thread(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    runtime(State(st), ApiPath(thread_key)).await
}

/// Sets a thread's permission mode: which allowed calls run without asking.
/// `bypass` is refused in a group chat (403 `bypass_in_group`) and lapses
/// to `ask` after `[permissions] bypass_minutes`.
#[utoipa::path(put, path = "/v1/threads/{thread_key}/mode", tag = "threads", request_body = SetMode,
    params(("thread_key" = crate::schemas::Key, Path, description = "Thread key")),
    responses((status = 200, description = "The mode now in force", body = ModeSet),
        (status = 400, description = "An unknown mode (`invalid_mode`) or a bad expiry", body = crate::dto::ErrorBody),
        (status = 403, description = "`bypass` without `permissions.bypass`, or in a group (`bypass_in_group`)", body = crate::dto::ErrorBody)))]
pub async fn set_mode(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
    ApiJson(body): ApiJson<SetMode>,
) -> Result<Json<ModeSet>, ApiError> {
    let set = st
        .runtime
        .set_mode(
            &ThreadKey::new(thread_key)?,
            &body.mode,
            body.expires_in_secs,
            hearth_runtime::ModeSetter::Operator,
        )
        .await?;
    Ok(Json(ModeSet {
        mode: set.mode.into(),
        expires_at: set.expires_at.map(hearth_core::rfc3339),
    }))
}

/// Sets a thread's model.
#[utoipa::path(put, path = "/v1/threads/{thread_key}/model", tag = "threads", request_body = SetModel,
    params(("thread_key" = crate::schemas::Key, Path, description = "Thread key")),
    responses((status = 200, description = "The thread's settings", body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn set_model(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
    ApiJson(body): ApiJson<SetModel>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Ok(Json(
        st.runtime
            .set_model(&ThreadKey::new(thread_key)?, &body.model)
            .await?
            .into(),
    ))
}

/// Sets a thread's thinking level.
#[utoipa::path(put, path = "/v1/threads/{thread_key}/thinking", tag = "threads", request_body = SetThinking,
    params(("thread_key" = crate::schemas::Key, Path, description = "Thread key")),
    responses((status = 200, description = "The thread's settings", body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn set_thinking(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
    ApiJson(body): ApiJson<SetThinking>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    let level = ThinkingLevel::parse(&body.level).ok_or_else(|| {
        ApiError::InvalidRequest(format!(
            "unknown thinking level {:?}; one of off, low, medium, high",
            body.level
        ))
    })?;
    Ok(Json(
        st.runtime
            .set_thinking(&ThreadKey::new(thread_key)?, level)
            .await?
            .into(),
    ))
}

/// Cancels the thread's active run and clears its history.
#[utoipa::path(delete, path = "/v1/threads/{thread_key}/session", tag = "threads",
    params(("thread_key" = crate::schemas::Key, Path, description = "Thread key")),
    responses((status = 200, description = "The thread's settings, history cleared", body = ThreadRuntime),
        (status = 400, description = "A bad thread key", body = crate::dto::ErrorBody)))]
pub async fn new_session(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Ok(Json(
        st.runtime
            .new_session(&ThreadKey::new(thread_key)?)
            .await?
            .into(),
    ))
}

/// Turns a thread's incognito mode on or off: while on, nothing of the
/// thread outlives the process.
#[utoipa::path(put, path = "/v1/threads/{thread_key}/incognito", tag = "threads", request_body = SetIncognito,
    params(("thread_key" = crate::schemas::Key, Path, description = "Thread key")),
    responses((status = 200, description = "The thread's settings", body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody),
              (status = 409, description = "Another replica holds the incognito thread (`incognito_elsewhere`, naming it)", body = crate::dto::ErrorBody)))]
pub async fn set_incognito(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
    ApiJson(body): ApiJson<SetIncognito>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Ok(Json(
        st.runtime
            .set_incognito(&ThreadKey::new(thread_key)?, body.enabled)
            .await?
            .into(),
    ))
}
