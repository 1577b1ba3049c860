//! `/ui/memory`: search a user's memories, forget one (Delete), and export
//! all of a user's memories as a JSON download (what `hearth memory export`
//! prints). Each reads the `/v1/memory` handler of the same name.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Redirect};
use maud::html;
use serde::Deserialize;
use serde_json::Value;

use super::admin::{json_table, values};
use super::layout::{self, PageResult, csrf_field, fail, page};
use super::session::{Viewer, encode, form_field};
use crate::AppState;
use crate::extract::{ApiPath, ApiQuery};
use crate::routes::memory::{self as v1_memory, MemorySearchQuery, MemoryUserQuery};

/// `?q=&user_key=&mode=` of the memory search.
#[derive(Debug, Default, Deserialize)]
pub struct MemoryForm {
    q: Option<String>,
    user_key: Option<String>,
    mode: Option<String>,
}

/// The search page's own address for `user_key`, `q` and `mode`.
fn search_url(user_key: &str, q: &str, mode: &str) -> String {
    format!(
        "/ui/memory?user_key={}&q={}&mode={}",
        encode(user_key),
        encode(q),
        encode(mode)
    )
}

/// `/ui/memory`: search a user's memories; Delete one; export them all.
pub async fn show(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Query(f): Query<MemoryForm>,
) -> PageResult {
    let user = f.user_key.as_deref().filter(|u| !u.is_empty());
    let q = f.q.as_deref().filter(|q| !q.is_empty());
    let mode = f.mode.clone().filter(|m| !m.is_empty());
    let found = match (q, user) {
        (Some(q), Some(u)) => {
            let query = MemorySearchQuery {
                q: q.to_owned(),
                user_key: u.to_owned(),
                mode: mode.clone(),
                limit: Some(50),
            };
            Some(
                v1_memory::search(State(st), ApiQuery(query))
                    .await
                    .map_err(fail)?
                    .0
                    .items,
            )
        }
        _ => None,
    };
    let delete = |m: &Value| {
        let id = m.get("id").and_then(Value::as_i64).unwrap_or(0);
        html! {
            form.inline method="post" action={ "/ui/memory/" (id) "/delete" } {
                (csrf_field(&viewer))
                input type="hidden" name="user_key" value=(user.unwrap_or(""));
                input type="hidden" name="q" value=(q.unwrap_or(""));
                input type="hidden" name="mode" value=(mode.as_deref().unwrap_or(""));
                button type="submit" class="danger" aria-label={ "Delete memory " (id) } { "Delete" }
            }
        }
    };
    let body = html! {
        form.filters method="get" action="/ui/memory" role="search" {
            label { "User " input type="text" name="user_key" required value=[user] placeholder="telegram:user:42"; }
            label { "Words " input type="search" name="q" required value=[q]; }
            label { "Mode " select name="mode" { option value="" { "default" } option value="text" { "text" } option value="vector" { "vector" } option value="hybrid" { "hybrid" } } }
            button type="submit" { "Search" }
        }
        @if let Some(u) = user {
            p { a #memory-export href={ "/ui/memory/export?user_key=" (encode(u)) } download { "Export all memories of " (u) " (JSON)" } }
        }
        @if let Some(items) = found {
            (json_table("memories", &values(&items), &[("id", "Id"), ("text", "Memory"), ("score", "Score"), ("matched", "Matched by")], Some(&delete)))
        }
    };
    Ok(page(&viewer, "/ui/memory", "Memory", None, body).into_response())
}

/// Forgets one memory of the form's `user_key`, then shows the search the
/// form came from again.
pub async fn delete(
    State(st): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    body: Bytes,
) -> PageResult {
    let user = form_field(&body, "user_key").unwrap_or_default();
    if user.is_empty() {
        return Err(layout::status_page(
            StatusCode::BAD_REQUEST,
            "Refused",
            "Name the user whose memory to delete.",
        ));
    }
    let _ = v1_memory::forget(
        State(st),
        ApiPath(id),
        ApiQuery(MemoryUserQuery {
            user_key: user.clone(),
        }),
    )
    .await
    .map_err(fail)?;
    let q = form_field(&body, "q").unwrap_or_default();
    let mode = form_field(&body, "mode").unwrap_or_default();
    Ok(Redirect::to(&search_url(&user, &q, &mode)).into_response())
}

/// `GET /ui/memory/export?user_key=`: the user's memories as a JSON file.
pub async fn export(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<MemoryUserQuery>,
) -> PageResult {
    let doc = v1_memory::export(State(st), ApiQuery(q))
        .await
        .map_err(fail)?
        .0;
    let json = serde_json::to_string_pretty(&doc).map_err(|e| {
        layout::status_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Export failed",
            &format!("The memories could not be written as JSON: {e}"),
        )
    })?;
    Ok((
        [
            (CONTENT_TYPE, "application/json"),
            (
                CONTENT_DISPOSITION,
                "attachment; filename=\"hearth-memories.json\"",
            ),
        ],
        json,
    )
        .into_response())
}
