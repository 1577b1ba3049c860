//! Models and per-thread runtime settings.

use axum::Json;
use axum::extract::{Path, State};
use hearth_core::ThinkingLevel;

use crate::AppState;
use crate::dto::{
    Capabilities, ModelInfo, Models, SetIncognito, SetModel, SetThinking, ThreadRuntime,
};
use crate::error::ApiError;
use crate::extract::ApiJson;

/// Built-in capabilities of an adapter kind; config overrides win.
fn capabilities(kind: &str, overrides: &std::collections::BTreeMap<String, bool>) -> Capabilities {
    // (tools, parallel_tool_calls, usage_metrics, thinking) per adapter.
    let (tools, parallel, usage, thinking) = match kind {
        "anthropic" | "gemini" => (true, true, true, true),
        "openai_compat" => (true, true, true, false),
        _ => (false, false, false, false),
    };
    let get = |k: &str, d: bool| overrides.get(k).copied().unwrap_or(d);
    Capabilities {
        tools: get("tools", tools),
        parallel_tool_calls: get("parallel_tool_calls", parallel),
        streaming: get("streaming", true),
        usage_metrics: get("usage_metrics", usage),
        json_mode: get("json_mode", false),
        thinking: get("thinking", thinking),
    }
}

/// The configured models and the default.
#[utoipa::path(get, path = "/v1/models", tag = "models", responses((status = 200, body = Models)))]
pub async fn models(State(st): State<AppState>) -> Json<Models> {
    let catalog = st.runtime.catalog();
    let default = catalog.default_model();
    let mut models = Vec::new();
    for (name, entry) in catalog.providers() {
        let mut names = entry.models.clone();
        if names.is_empty() && default.provider == *name {
            names.push(default.model.clone());
        }
        for m in names {
            models.push(ModelInfo {
                id: format!("{name}/{m}"),
                provider: name.clone(),
                capabilities: capabilities(entry.kind, &entry.capabilities),
            });
        }
    }
    Json(Models {
        default: default.to_string(),
        models,
    })
}

/// A thread's model, thinking level, incognito flag and message count.
#[utoipa::path(get, path = "/v1/threads/{thread_key}/runtime", tag = "threads",
    params(("thread_key" = String, Path, description = "Thread key")),
    responses((status = 200, body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn runtime(
    State(st): State<AppState>,
    Path(thread_key): Path<String>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Ok(Json(st.runtime.thread_runtime(&thread_key).await?.into()))
}

/// Sets a thread's model.
#[utoipa::path(put, path = "/v1/threads/{thread_key}/model", tag = "threads", request_body = SetModel,
    params(("thread_key" = String, Path, description = "Thread key")),
    responses((status = 200, body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn set_model(
    State(st): State<AppState>,
    Path(thread_key): Path<String>,
    ApiJson(body): ApiJson<SetModel>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Ok(Json(
        st.runtime.set_model(&thread_key, &body.model).await?.into(),
    ))
}

/// Sets a thread's thinking level.
#[utoipa::path(put, path = "/v1/threads/{thread_key}/thinking", tag = "threads", request_body = SetThinking,
    params(("thread_key" = String, Path, description = "Thread key")),
    responses((status = 200, body = ThreadRuntime), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn set_thinking(
    State(st): State<AppState>,
    Path(thread_key): Path<String>,
    ApiJson(body): ApiJson<SetThinking>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    let level = ThinkingLevel::parse(&body.level).ok_or_else(|| {
        ApiError::InvalidRequest(format!(
            "unknown thinking level {:?}; one of off, low, medium, high",
            body.level
        ))
    })?;
    Ok(Json(
        st.runtime.set_thinking(&thread_key, level).await?.into(),
    ))
}

/// Cancels the thread's active run and clears its history.
#[utoipa::path(delete, path = "/v1/threads/{thread_key}/session", tag = "threads",
    params(("thread_key" = String, Path, description = "Thread key")),
    responses((status = 200, body = ThreadRuntime)))]
pub async fn new_session(
    State(st): State<AppState>,
    Path(thread_key): Path<String>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Ok(Json(st.runtime.new_session(&thread_key).await?.into()))
}

/// Incognito threads: not in this build (they need the memory and firewall work).
#[utoipa::path(put, path = "/v1/threads/{thread_key}/incognito", tag = "threads", request_body = SetIncognito,
    params(("thread_key" = String, Path, description = "Thread key")),
    responses((status = 501, body = crate::dto::ErrorBody)))]
pub async fn set_incognito(
    Path(_thread_key): Path<String>,
    ApiJson(_body): ApiJson<SetIncognito>,
) -> Result<Json<ThreadRuntime>, ApiError> {
    Err(ApiError::NotImplemented(
        "incognito threads are not available in this version of hearth".into(),
    ))
}
