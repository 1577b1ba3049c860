//! `GET /v1/tools`: the tools the model can be offered.

use axum::Json;
use axum::extract::State;

use crate::AppState;
use crate::dto::{ToolInfo, ToolList, ToolsParams};
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// Every registered tool; with `channel`, the tools that channel offers
/// (its `[tools.profiles.<channel>]` applied, other channels' own tools left
/// out). Each user then sees only what their capabilities allow.
#[utoipa::path(get, path = "/v1/tools", tag = "tools", params(ToolsParams),
    responses((status = 200, description = "The tools, by name", body = ToolList),
        (status = 400, body = crate::dto::ErrorBody)))]
pub async fn tools(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<ToolsParams>,
) -> Result<Json<ToolList>, ApiError> {
    Ok(Json(ToolList {
        tools: st
            .runtime
            .tools(q.channel.as_deref())
            .into_iter()
            .map(|t| ToolInfo {
                name: t.name,
                description: t.description,
                class: t.class,
                capability: t.capability,
                source: t.source,
                available: t.available,
            })
            .collect(),
    }))
}
