//! A thread's full stored history, with compaction boundaries marked.

use axum::Json;
use axum::extract::State;
use hearth_core::ThreadKey;

use crate::AppState;
use crate::dto::{History, HistoryQuery};
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};

/// Every stored message of a thread, newest first, a page at a time;
/// messages a summary replaces are marked `compacted`, never removed.
#[utoipa::path(get, path = "/v1/threads/{thread_key}/history", tag = "threads", params(
        ("thread_key" = String, Path, description = "Thread key: 1 to 256 bytes, no control characters", min_length = 1, max_length = 256),
        HistoryQuery),
    responses((status = 200, description = "A page of the thread's messages, newest first", body = History),
        (status = 400, body = crate::dto::ErrorBody)))]
pub async fn history(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<History>, ApiError> {
    let page = st
        .runtime
        .history(&ThreadKey::new(thread_key)?, q.limit, q.before.as_deref())
        .await?;
    Ok(Json(page.into()))
}
