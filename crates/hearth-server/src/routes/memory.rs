//! `GET /v1/memory/search`: a user's memories found by words, meaning, or
//! both; `DELETE /v1/memory/{id}` forgets one; `GET /v1/memory/export` hands
//! them all over.

use axum::Json;
use axum::extract::State;
use hearth_runtime::memory::SearchMode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};

/// Query of `GET /v1/memory/search`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemorySearchQuery {
    /// What to look for, in plain words.
    pub q: String,
    /// Whose memories (their user-wide ones).
    #[param(value_type = crate::schemas::Key)]
    pub user_key: String,
    /// `hybrid` (words and meaning, fused), `text` or `vector`; default
    /// `hybrid` when `[memory] embeddings` is set, else `text`.
    #[param(pattern = "^(hybrid|text|vector)$")]
    pub mode: Option<String>,
    /// At most this many (default 10).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// One memory found.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemorySearchItem {
    /// The memory's id (what citations name).
    pub id: i64,
    /// What was remembered.
    pub text: String,
    /// Reciprocal-rank fusion score: higher is better; comparable within
    /// one answer only.
    pub score: f64,
    /// Which ranking found it: `text`, `vector` or `both`.
    #[schema(pattern = "^(text|vector|both)$")]
    pub matched: String,
}

/// `GET /v1/memory/search`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemorySearchResults {
    /// Best first.
    pub items: Vec<MemorySearchItem>,
}

/// A user's memories matching `q`, best first: by words (full text), by
/// meaning (cosine of embeddings), or both merged by reciprocal-rank fusion.
#[utoipa::path(get, path = "/v1/memory/search", tag = "memory", operation_id = "search_memory",
    params(MemorySearchQuery),
    responses((status = 200, description = "The memories found, best first", body = MemorySearchResults),
        (status = 400, description = "`invalid_mode`: an unknown mode, or `vector`/`hybrid` \
            without `[memory] embeddings`; `invalid_request`: a bad key or limit",
            body = crate::dto::ErrorBody)))]
pub async fn search(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<MemorySearchQuery>,
) -> Result<Json<MemorySearchResults>, ApiError> {
    hearth_runtime::check_key("user_key", &q.user_key)?;
    let mode = match q.mode.as_deref() {
        None => None,
        Some(m) => Some(SearchMode::parse(m).ok_or_else(|| {
            ApiError::InvalidMode(format!("mode {m:?} is not one of hybrid, text, vector"))
        })?),
    };
    if matches!(mode, Some(SearchMode::Vector | SearchMode::Hybrid))
        && st.runtime.memory_embeddings().is_none()
    {
        return Err(ApiError::InvalidMode(
            "mode vector and hybrid need [memory] embeddings = \"<provider>/<model>\" in \
             hearth.toml; use mode=text"
                .to_owned(),
        ));
    }
    let limit = match q.limit {
        None => 10,
        Some(n @ 1..=100) => n,
        Some(n) => {
            return Err(ApiError::InvalidRequest(format!(
                "limit {n} is out of range: 1 to 100"
            )));
        }
    };
    let found = st
        .runtime
        .find_memories(&q.user_key, None, &q.q, mode, limit)
        .await?;
    Ok(Json(MemorySearchResults {
        items: found
            .into_iter()
            .map(|f| MemorySearchItem {
                id: f.memory.id,
                text: f.memory.text,
                score: f.score,
                matched: f.matched.as_str().to_owned(),
            })
            .collect(),
    }))
}

/// Query of `DELETE /v1/memory/{id}` and `GET /v1/memory/export`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemoryUserQuery {
    /// Whose memories.
    #[param(value_type = crate::schemas::Key)]
    pub user_key: String,
}

/// `DELETE /v1/memory/{id}`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ForgottenMemory {
    /// The memory forgotten.
    pub id: i64,
    /// Whose it was.
    pub user_key: String,
}

/// One memory in an export.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ExportedMemory {
    /// The memory's id.
    pub id: i64,
    /// What was remembered.
    pub text: String,
    /// The only thread that sees it; `null` for a user-wide memory.
    pub thread_key: Option<String>,
    /// The run that saved it, if known.
    pub run_id: Option<String>,
    /// RFC 3339, when first saved.
    pub created_at: String,
    /// RFC 3339, when last saved again or found.
    pub last_used_at: String,
}

/// `GET /v1/memory/export`: the same document as `hearth memory export`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryExport {
    /// Whose memories.
    pub user_key: String,
    /// Every one of them, user-wide and per thread.
    pub memories: Vec<ExportedMemory>,
}

/// Forgets one of a user's memories.
#[utoipa::path(delete, path = "/v1/memory/{id}", tag = "memory", operation_id = "forget_memory",
    params(("id" = i64, Path, description = "Memory id"), MemoryUserQuery),
    responses((status = 200, description = "The memory is forgotten", body = ForgottenMemory),
        (status = 400, description = "`invalid_request`: a bad id or key", body = crate::dto::ErrorBody),
        (status = 404, description = "The user has no such memory", body = crate::dto::ErrorBody)))]
pub async fn forget(
    State(st): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<MemoryUserQuery>,
) -> Result<Json<ForgottenMemory>, ApiError> {
    if st.runtime.forget_memory(&q.user_key, id).await? {
        Ok(Json(ForgottenMemory {
            id,
            user_key: q.user_key,
        }))
    } else {
        Err(ApiError::NotFound(format!(
            "{} has no memory {id}",
            q.user_key
        )))
    }
}

/// Every memory of a user, for handing over (as `hearth memory export`).
#[utoipa::path(get, path = "/v1/memory/export", tag = "memory", operation_id = "export_memory",
    params(MemoryUserQuery),
    responses((status = 200, description = "The user's memories", body = MemoryExport),
        (status = 400, description = "`invalid_request`: a bad key", body = crate::dto::ErrorBody)))]
pub async fn export(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<MemoryUserQuery>,
) -> Result<Json<MemoryExport>, ApiError> {
    let memories = st.runtime.export_memories(&q.user_key).await?;
    Ok(Json(MemoryExport {
        memories: memories
            .into_iter()
            .map(|m| ExportedMemory {
                id: m.id,
                text: m.text,
                thread_key: m.thread_key,
                run_id: m.run_id,
                created_at: hearth_core::rfc3339(m.created_at),
                last_used_at: hearth_core::rfc3339(m.last_used_at),
            })
            .collect(),
        user_key: q.user_key,
    }))
}
