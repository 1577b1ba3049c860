//! A thread's full stored history, with compaction boundaries marked.

use axum::Json;
use axum::extract::State;
use hearth_core::ThreadKey;

use crate::AppState;
use crate::dto::{History, HistoryQuery};
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery, page_limit};

/// Messages on a page when the request names no `limit`.
const DEFAULT_HISTORY_LIMIT: u32 = 50;

/// Every stored message of a thread, newest first, a page at a time;
/// messages a summary replaces are marked `compacted`, never removed.
#[utoipa::path(get, path = "/v1/threads/{thread_key}/history", tag = "threads", params(
        ("thread_key" = crate::schemas::Key, Path, description = "Thread key"),
        HistoryQuery),
    responses((status = 200, description = "A page of the thread's messages, newest first", body = History),
        (status = 400, body = crate::dto::ErrorBody)))]
pub async fn history(
    State(st): State<AppState>,
    ApiPath(thread_key): ApiPath<String>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<History>, ApiError> {
    let limit = page_limit(q.limit, DEFAULT_HISTORY_LIMIT)?;
    let before = q.before.map(|b| b.to_string());
    let page = st
        .runtime
        .history(&ThreadKey::new(thread_key)?, Some(limit), before.as_deref())
        .await?;
    Ok(Json(page.into()))
}
