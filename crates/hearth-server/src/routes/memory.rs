//! `GET /v1/memory/search`: a user's memories found by words, meaning, or both.

use axum::Json;
use axum::extract::State;
use hearth_runtime::memory::SearchMode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// Query of `GET /v1/memory/search`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemorySearchQuery {
    /// What to look for, in plain words.
    pub q: String,
    /// Whose memories (their user-wide ones).
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
